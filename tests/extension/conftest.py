"""Extension tests: the built extension loaded unpacked into Debian's Chromium, headless.

Each test gets a fresh browser profile (``chromium.launch_persistent_context`` with
``--load-extension``; extensions need a persistent context) and finds the extension's id from
its service worker's URL. The side panel and options pages are opened as tabs at
``chrome-extension://<id>/...``; the server is the Web App suite's real app on loopback
(:func:`tests.web.conftest.open_site`, token mode, the handbook ingested, the built-in model).

One thing cannot be done headless: clicking "Allow" in Chromium's permission prompt, which is
browser UI, not a page. The browser gets a copy of the build whose manifest already grants
``http://127.0.0.1/*`` — what the user's "Allow" grants for the loopback server (the options
page still asks, and Chromium answers at once for a granted origin), and what ``activeTab``
grants on a loopback test page after the user opens the panel from the toolbar.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import MemoEmbedder
from tests.web.conftest import CHROMIUM, LAUNCH_ARGS, Site, _require, open_site

ROOT = Path(__file__).resolve().parents[2]
DIST = ROOT / "extension" / "dist"
LOOPBACK_GRANT = "http://127.0.0.1/*"
# About the width Chromium gives a side panel: the Web App's narrow layout (sidebar as a drawer).
PANEL_SIZE = {"width": 400, "height": 800}


@pytest.fixture(scope="session")
def built() -> Path:
    """The extension's build (``cd extension && npm ci && npm run build``)."""
    _require(CHROMIUM.exists(), f"{CHROMIUM} is missing: apt-get install -y chromium")
    _require(
        (DIST / "manifest.json").exists(),
        "the extension is not built: cd extension && npm ci && npm run build",
    )
    return DIST


@pytest.fixture(scope="session")
def granted(built: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the build whose manifest grants the loopback origin (see the module doc)."""
    copy = tmp_path_factory.mktemp("extension") / "dist"
    shutil.copytree(built, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["host_permissions"] = [LOOPBACK_GRANT]
    (copy / "manifest.json").write_text(json.dumps(manifest))
    return copy


@dataclass
class Browser:
    """A browser with the extension loaded: its context, the extension id, its worker."""

    context: Any
    id: str
    worker: Any

    def url(self, page: str) -> str:
        return f"chrome-extension://{self.id}/{page}"

    def store(self, **values: Any) -> None:
        """Write the extension's settings (chrome.storage.local), as the options page does."""
        self.worker.evaluate("(values) => chrome.storage.local.set(values)", values)

    def stored(self) -> dict[str, Any]:
        value: dict[str, Any] = self.worker.evaluate("() => chrome.storage.local.get(null)")
        return value


@contextmanager
def launch(dist: Path) -> Iterator[Browser]:
    """Start Chromium with ``dist`` loaded unpacked, in a fresh profile."""
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="s2o-ext-profile-")
    args = [
        *(a for a in LAUNCH_ARGS if a != "--headless"),
        f"--disable-extensions-except={dist}",
        f"--load-extension={dist}",
    ]
    try:
        with sync_playwright() as playwright:
            context = playwright.chromium.launch_persistent_context(
                profile,
                executable_path=str(CHROMIUM),
                headless=True,
                args=args,
                viewport=PANEL_SIZE,
            )
            try:
                workers = context.service_workers
                worker = workers[0] if workers else context.wait_for_event("serviceworker")
                yield Browser(context, worker.url.split("/")[2], worker)
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def browser(granted: Path) -> Iterator[Browser]:
    """Chromium with the extension (loopback granted), a fresh profile per test."""
    with launch(granted) as opened:
        yield opened


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, embedder: MemoEmbedder) -> Iterator[Site]:
    """The app in token mode on loopback, the handbook ingested."""
    yield from open_site(tmp_path_factory.mktemp("site"), embedder, auth_mode="token")


@contextmanager
def pages(files: dict[str, str]) -> Iterator[str]:
    """Serve ``{path: html}`` from a loopback HTTP server (another port than the app's)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = files.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.end_headers()
            self.wfile.write((body or "missing").encode())

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
