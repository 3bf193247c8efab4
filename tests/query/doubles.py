"""Test doubles of our own protocols for the Query Engine tests, and small documents to ingest.

* :class:`ScriptedChatModel` implements the :class:`~search2o.providers.chat.ChatModel`
  protocol by playing a script (text pieces, tool calls, pauses, failures) and records every
  call it receives, so a test can make the model slow, fail mid-answer or ask for several tools.
* :class:`SlowEmbedder` wraps the real embedder (an :class:`~search2o.providers.embeddings.
  Embedder`) and holds each ``embed`` call for a while, counting how many run at once.
* :func:`searxng` runs a loopback HTTP server speaking SearXNG's JSON search API.

Nothing here replaces the system under test: the database, Knowledge Store, turn engine and
HTTP server stay real.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np
from sqlalchemy import func, select

from search2o.config import Settings
from search2o.knowledge.access import AccessList
from search2o.providers.chat import ChatMessage, Passage, TextDelta, ToolCall, ToolSpec
from search2o.providers.embeddings import Embedder
from search2o.query.settings import ChatSettings, ModelProfile, WebSearchSettings
from search2o.runtime import Runtime
from search2o.storage.models import Conversation, Message, RetrievalTrace

VACATION = (
    "# Vacation policy\n\n"
    "Every employee gets 25 days of paid vacation per year. Unused vacation days can roll over "
    "up to 5 days into the next year.\n\n"
    "## Sick leave\n\n"
    "Sick leave is unlimited but needs a doctor's note after three days.\n"
)
PARKING = (
    "# Office guide\n\n## Parking\n\nBicycles are parked in the basement garage next to the "
    "lockers.\n\n## Kitchen\n\nThe coffee machine is cleaned every Friday afternoon.\n"
)
SALARIES = (
    "# Salary bands\n\nThe salary band for level 3 engineers is confidential and reviewed by "
    "the compensation committee every spring.\n"
)
ROADMAP = (
    "# Product roadmap\n\nThe mobile app ships its offline mode in the third quarter, after the "
    "sync engine rewrite.\n"
)
DOCS = {"vacation.md": VACATION, "parking.md": PARKING}


def ingest(runtime: Runtime, docs: dict[str, str], groups: Iterable[str] = ()) -> dict[str, int]:
    """Ingest ``{file name: Markdown}`` as uploads readable by ``groups`` (all when empty).

    Returns the document id of each file name.
    """
    access = AccessList.build(groups=list(groups))
    ids = {}
    for name, text in docs.items():
        outcome = runtime.knowledge.ingest_bytes(f"upload:{name}", name, text.encode(), access)
        assert outcome.status in ("added", "updated", "unchanged"), outcome
        assert outcome.document_id is not None
        ids[name] = outcome.document_id
    return ids


def counts(runtime: Runtime) -> tuple[int, int, int]:
    """Conversations, messages and retrieval traces stored."""
    with runtime.database.session() as session:
        return tuple(  # type: ignore[return-value]
            int(session.scalar(select(func.count()).select_from(table)) or 0)
            for table in (Conversation, Message, RetrievalTrace)
        )


@contextmanager
def open_runtime(
    settings: Settings,
    embedder: Embedder,
    *,
    model: Any = None,
    auth_mode: str | None = None,
    **chat: Any,
) -> Iterator[Runtime]:
    """A runtime on ``settings``' database with ``chat`` settings overridden and ``model``."""
    updates: dict[str, Any] = {}
    if chat:
        updates["chat"] = settings.chat.model_copy(update=chat)
    if auth_mode is not None:
        updates["auth_mode"] = auth_mode
    rt = Runtime(settings.model_copy(update=updates), embedder=embedder, chat_model=model)
    try:
        yield rt
    finally:
        rt.close()


def web_settings(base_url: str, **values: Any) -> WebSearchSettings:
    """``chat.web_search`` settings for the built-in ``searxng`` provider at ``base_url``."""
    return WebSearchSettings(provider="searxng", base_url=base_url, **values)


# ---------------------------------------------------------------------------------------------
# chat models
# ---------------------------------------------------------------------------------------------

# A script step: an event to yield, a pause in seconds, an exception to raise, or a callable
# (run in a worker thread, so it may block, e.g. on a threading.Event).
Step = TextDelta | ToolCall | float | BaseException | Callable[[], None]
Script = Callable[[list[ChatMessage], list[ToolSpec]], Iterable[Step]]


@dataclass
class ModelCall:
    """One ``stream`` call the model received: the messages (copied) and the tools offered."""

    messages: list[ChatMessage]
    tools: list[str]


class ScriptedChatModel:
    """A :class:`~search2o.providers.chat.ChatModel` that plays ``script`` on every call.

    ``calls`` records what each call received; ``yielded`` counts the events it yielded.
    """

    model_id = "test/scripted-1"
    supports_tools = True
    supports_parallel_tools = True
    can_stream = True

    def __init__(self, script: Script) -> None:
        self.script = script
        self.calls: list[ModelCall] = []
        self.yielded = 0
        self._lock = threading.Lock()

    async def stream(
        self, messages: list[ChatMessage], tools: list[ToolSpec]
    ) -> AsyncIterator[Any]:
        with self._lock:
            self.calls.append(ModelCall(list(messages), [t.name for t in tools]))
        for step in self.script(messages, tools):
            if isinstance(step, TextDelta | ToolCall):
                with self._lock:
                    self.yielded += 1
                yield step
            elif isinstance(step, BaseException):
                raise step
            elif isinstance(step, int | float):
                await asyncio.sleep(step)
            else:
                await asyncio.to_thread(step)

    async def write_title(self, first_message: str) -> str:
        return " ".join(first_message.split())[:80]


def pieces(text: str, pause: float = 0.0) -> list[Step]:
    """``text`` as word pieces (each with the space before it), ``pause`` seconds before each."""
    steps: list[Step] = []
    for piece in re.findall(r"\s*\S+", text):
        if pause:
            steps.append(pause)
        steps.append(TextDelta(piece))
    return steps


def passages(messages: list[ChatMessage]) -> list[Passage]:
    """Every passage the tools returned, in message order."""
    return [p for m in messages if m.role == "tool" for p in m.passages]


def last_user(messages: list[ChatMessage]) -> str:
    return [m.content for m in messages if m.role == "user"][-1]


def answering(text: str, pause: float = 0.0) -> Script:
    """A model that answers ``text`` directly, never calling tools."""

    def script(messages: list[ChatMessage], tools: list[ToolSpec]) -> Iterable[Step]:
        return pieces(text, pause)

    return script


def searching(
    answer: str | Callable[[list[ChatMessage]], Iterable[Step]],
    queries: Callable[[list[ChatMessage]], list[tuple[str, str]]] | None = None,
) -> Script:
    """A model that calls tools on the user's message, then answers from what they returned.

    ``queries(messages)`` gives ``(tool name, query)`` pairs (default: ``search_knowledge`` on
    the last user message); ``answer`` is the text, or a function of the messages giving steps.
    """

    def script(messages: list[ChatMessage], tools: list[ToolSpec]) -> Iterable[Step]:
        if messages[-1].role == "tool":
            return pieces(answer) if isinstance(answer, str) else answer(messages)
        wanted = (
            queries(messages)
            if queries is not None
            else [("search_knowledge", last_user(messages))]
        )
        return [
            ToolCall(id=f"call_{i + 1}", name=name, arguments={"query": query})
            for i, (name, query) in enumerate(wanted)
        ]

    return script


# ---------------------------------------------------------------------------------------------
# embedder
# ---------------------------------------------------------------------------------------------


class SlowEmbedder:
    """Wraps a real embedder: each ``embed`` call waits ``delay`` seconds first.

    ``peak`` is the largest number of ``embed`` calls that were running at the same time.
    """

    def __init__(self, inner: Embedder, delay: float) -> None:
        self._inner = inner
        self._delay = delay
        self._lock = threading.Lock()
        self._active = 0
        self.peak = 0
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        self.max_tokens = inner.max_tokens

    def embed(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            self._active += 1
            self.peak = max(self.peak, self._active)
        try:
            time.sleep(self._delay)
            return self._inner.embed(texts)
        finally:
            with self._lock:
                self._active -= 1

    def count_tokens(self, text: str) -> int:
        return self._inner.count_tokens(text)


# ---------------------------------------------------------------------------------------------
# SearXNG
# ---------------------------------------------------------------------------------------------


@dataclass
class SearxngState:
    """What the loopback SearXNG answers, and what it was asked."""

    results: list[dict[str, str]]
    delay: float = 0.0
    status: int = 200
    requests: list[dict[str, list[str]]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    active: int = 0
    peak: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    base_url: str = ""


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        state = self.server.state
        parts = urlsplit(self.path)
        params = parse_qs(parts.query)
        with state.lock:
            state.paths.append(parts.path)
            state.requests.append(params)
            state.active += 1
            state.peak = max(state.peak, state.active)
        try:
            time.sleep(state.delay)
            if parts.path != "/search" or params.get("format") != ["json"]:
                self._reply(404, {"error": "not found"})
            elif state.status != 200:
                self._reply(state.status, {"error": "engine failure"})
            else:
                self._reply(200, {"query": params["q"][0], "results": state.results})
        finally:
            with state.lock:
                state.active -= 1

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: SearxngState


WEB_RESULTS = [
    {
        "title": "Bicycle parking rules",
        "url": "https://example.org/bicycles",
        "content": "Bicycles are parked in the basement garage of most office buildings.",
    },
    {
        "title": "Garage etiquette",
        "url": "https://example.org/garage",
        "content": "Lock your bicycle to the rack in the basement garage.",
    },
]


@contextmanager
def searxng(
    results: list[dict[str, str]] | None = None, *, delay: float = 0.0, status: int = 200
) -> Iterator[SearxngState]:
    """Run a SearXNG JSON API on a free loopback port: ``GET /search?q=...&format=json``."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.state = SearxngState(list(WEB_RESULTS if results is None else results), delay, status)
    server.state.base_url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def use_profile(runtime: Runtime, profile: ModelProfile, **chat: Any) -> int:
    """Switch ``runtime``'s Query Engine to ``profile`` (and ``chat`` settings); return the cap.

    The chat model and turn engine are rebuilt from the new settings on next use.
    """
    settings = ChatSettings(profiles={"default": profile}, **chat)
    runtime.settings = runtime.settings.model_copy(update={"chat": settings})
    for part in ("turns", "chat_models", "agent_runner", "chat"):
        runtime.__dict__.pop(part, None)  # built again from the new settings on next use
    return runtime.turns.budget.cap
