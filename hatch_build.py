"""Build the Web App during the Python build (hatchling's custom build hook).

Hatchling calls :class:`WebAppBuildHook` before it builds a wheel (also an editable one, so
``pip install -e .`` builds the app) or an sdist. With the app's sources present (``web/``) and
Node's ``npm`` on the path it runs ``npm ci`` (the committed ``package-lock.json``, exactly) and
``npm run build``, which writes ``src/search2o/webapp/dist``. The built files are git-ignored,
so they are declared as build artifacts: the wheel and the sdist both carry them, and building
a wheel from that sdist on a machine without Node uses them as they are.

Set ``SEARCH2O_SKIP_WEB_BUILD=1`` to package an existing build without running npm.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

DIST = "src/search2o/webapp/dist"


class WebAppBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    """Run ``npm ci && npm run build`` in ``web/`` and ship the result (module docstring)."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        """Build the app unless told not to; fail when there is neither a build nor a way to one."""
        root = Path(self.root)
        web = root / "web"
        index = root / DIST / "index.html"
        npm = shutil.which("npm")
        skip = os.environ.get("SEARCH2O_SKIP_WEB_BUILD", "") not in ("", "0")
        if (web / "package.json").is_file() and not skip:
            if npm is None:
                if not index.is_file():
                    raise RuntimeError(
                        "building search2o's Web App needs Node.js and npm (none on PATH): "
                        "install them (e.g. `apt-get install nodejs npm`) and build again"
                    )
                self.app.display_warning("npm not found: packaging the existing Web App build")
            else:
                self.app.display_info("building the Web App: npm ci && npm run build (web/)")
                for command in ([npm, "ci", "--no-audit", "--no-fund"], [npm, "run", "build"]):
                    subprocess.run(command, cwd=web, check=True)
        if not index.is_file():
            raise RuntimeError(f"the Web App build is missing ({DIST}/index.html)")
        build_data.setdefault("artifacts", []).append(f"/{DIST}")
