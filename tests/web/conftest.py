"""Browser tests: Debian's Chromium driven by Playwright for Python, against a real server.

One browser per test session (``browser``); each test opens its own context (cookies, storage,
colour scheme, viewport). The server is the real app on a loopback port (``tests.api.test_api
.serve``) over a real SQLite file, with the handbook ingested once per module. The chat model
is the built-in one behind :class:`Scripted`, which a test can hold at a gate mid-answer (to
reload while an answer streams) or make say a given text (hostile Markdown) — the paid edge is
the only thing replaced.

Screenshots go to ``build/screenshots/`` (:data:`SCREENSHOTS`), written by the run.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from search2o.api.app import create_app
from search2o.config import Settings
from search2o.knowledge.access import AccessList
from search2o.providers.chat import ChatEvent, ChatMessage, TextDelta, ToolSpec, build_chat_model
from search2o.runtime import Runtime
from tests.api.test_api import serve
from tests.conftest import MemoEmbedder, handbook_files

CHROMIUM = Path("/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "build" / "screenshots"
DIST_INDEX = ROOT / "src" / "search2o" / "webapp" / "dist" / "index.html"
LAUNCH_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _require(condition: bool, reason: str) -> None:
    # On CI a missing browser or build is a failure; on a developer machine, a skip.
    if condition:
        return
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium, headless, once per test module.

    Not once per session: Playwright's sync API keeps an event loop running while its driver
    is open, and every later test that runs asyncio in the main thread (the MCP client,
    ``asyncio.run``) would fail, as would the extension's own driver. A module's tests share
    one browser; the driver is closed when the module ends.
    """
    _require(CHROMIUM.exists(), f"{CHROMIUM} is missing: apt-get install -y chromium")
    _require(DIST_INDEX.exists(), "the Web App is not built: npm ci && npm run build in web/")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@dataclass
class Scripted:
    """The built-in chat model, with a gate a test can hold and texts it can make it say.

    ``hold_after`` > 0 makes the next answer wait after that many words until ``release()``;
    ``say`` queues answers given verbatim (a direct answer, no search).
    """

    inner: Any
    hold_after: int = 0
    say: list[str] = field(default_factory=list)
    gate: threading.Event = field(default_factory=threading.Event)
    held: threading.Event = field(default_factory=threading.Event)

    @property
    def model_id(self) -> str:
        return str(self.inner.model_id)

    supports_tools = True
    supports_parallel_tools = True
    can_stream = True

    def release(self) -> None:
        self.hold_after = 0
        self.gate.set()

    async def write_title(self, first_message: str) -> str:
        return str(await self.inner.write_title(first_message))

    async def stream(
        self, messages: list[ChatMessage], tools: list[ToolSpec]
    ) -> AsyncIterator[ChatEvent]:
        if self.say and messages[-1].role == "user":
            text = self.say.pop(0)
            for word in text.split(" "):
                yield TextDelta(word + " ")
            return
        words = 0
        async for event in self.inner.stream(messages, tools):
            yield event
            if isinstance(event, TextDelta):
                words += 1
                if self.hold_after and words == self.hold_after:
                    self.held.set()
                    await asyncio.to_thread(self.gate.wait, 60)


@dataclass
class Site:
    """A running server: its URL, its runtime, its scripted model."""

    url: str
    runtime: Runtime
    model: Scripted


def open_site(
    data_dir: Path, embedder: MemoEmbedder, port: int = 0, **settings: Any
) -> Iterator[Site]:
    """Run the app on loopback ``port`` (0: any) over a SQLite file in ``data_dir``, the
    handbook ingested."""
    chosen = Settings(
        data_dir=data_dir, database_url=f"sqlite:///{data_dir / 'search2o.db'}", **settings
    )
    model = Scripted(build_chat_model(chosen.chat, embedder))
    runtime = Runtime(chosen, embedder=embedder, chat_model=model)
    try:
        runtime.knowledge.ingest_paths(handbook_files(), AccessList())
        with serve(create_app(chosen, runtime=runtime), port) as client:
            yield Site(str(client.base_url).rstrip("/"), runtime, model)
    finally:
        runtime.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, embedder: MemoEmbedder) -> Iterator[Site]:
    """The app in local single-user mode (the embedded default), handbook ingested."""
    yield from open_site(tmp_path_factory.mktemp("site"), embedder)


def add_people(runtime: Runtime, people: list[tuple[str, tuple[str, ...], bool]]) -> None:
    """Create users given as (email, groups, admin)."""
    from search2o import accounts

    with runtime.database.session() as session:
        for email, groups, admin in people:
            accounts.create_user(session, email, groups=list(groups), is_admin=admin)


def login_link(site: Site, email: str) -> str:
    """A fresh one-time sign-in link of ``email`` on ``site`` (what ``users login-link`` prints)."""
    from search2o.signin import LINK_PATH, issue_login_link

    with site.runtime.database.session() as session:
        return f"{site.url}{LINK_PATH}{issue_login_link(session, email, 5).value}"


def sign_in_with_link(page: Any, site: Site, email: str) -> None:
    """Open a fresh sign-in link of ``email``, press "Sign in as …", wait for the app at ``/``."""
    from playwright.sync_api import expect

    page.goto(login_link(site, email))
    button = page.get_by_role("button", name=f"Sign in as {email}")
    expect(button).to_be_visible()
    button.click()
    page.wait_for_url(site.url + "/")
    expect(page.get_by_label("Message", exact=True)).to_be_visible()


def shot(page: Any, name: str) -> Path:
    """Write a full-page screenshot to :data:`SCREENSHOTS` and return its path."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
