"""Generate the Web App's API types (``src/api/schema.d.ts``) from the server's OpenAPI document.

The types follow the server: ``create_app().openapi()`` on default settings, turned into
TypeScript by ``openapi-typescript`` (installed by ``npm ci``). Run after changing the API::

    PYTHONPATH=src python web/scripts/openapi_types.py          # rewrite schema.d.ts
    PYTHONPATH=src python web/scripts/openapi_types.py --check  # exit 1 when it is stale

``tests/web/test_types.py`` runs the check.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

WEB = Path(__file__).resolve().parents[1]
SCHEMA_TS = WEB / "src" / "api" / "schema.d.ts"
GENERATOR = WEB / "node_modules" / ".bin" / "openapi-typescript"


def openapi_document() -> dict[str, Any]:
    """Return the OpenAPI document of an app on default settings (a throw-away SQLite file)."""
    from search2o.api.app import create_app
    from search2o.config import Settings

    with tempfile.TemporaryDirectory() as folder:
        settings = Settings(data_dir=Path(folder), database_url=f"sqlite:///{folder}/api.db")
        app = create_app(settings)
        try:
            return app.openapi()
        finally:
            app.state.runtime.close()


def render_types(document: dict[str, Any]) -> str:
    """Return the TypeScript that ``openapi-typescript`` writes for ``document``.

    Raises:
        FileNotFoundError: ``npm ci`` has not been run in ``web/``.
        subprocess.CalledProcessError: the generator failed.

    """
    if not GENERATOR.exists():
        raise FileNotFoundError(f"{GENERATOR} is missing: run `npm ci` in {WEB}")
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "openapi.json"
        source.write_text(json.dumps(document, indent=1, sort_keys=True))
        done = subprocess.run(
            [str(GENERATOR), str(source)], capture_output=True, text=True, check=True, cwd=WEB
        )
    return done.stdout


def main(argv: list[str]) -> int:
    """Rewrite ``schema.d.ts``, or with ``--check`` report whether it is current (exit 1: not)."""
    text = render_types(openapi_document())
    if "--check" in argv:
        if SCHEMA_TS.read_text() != text:
            print(f"{SCHEMA_TS} is stale: run PYTHONPATH=src python {Path(__file__).name}")
            return 1
        return 0
    SCHEMA_TS.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
