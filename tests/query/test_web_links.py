"""Web search results with hostile addresses: only http(s) URLs become citation link targets.

A real turn on both backends against a loopback server speaking SearXNG's JSON API
(tests/query/doubles.py); the chat model is scripted to cite every passage it was given.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from search2o.providers.chat import ChatMessage
from search2o.runtime import Runtime
from tests.conftest import MemoEmbedder
from tests.query.doubles import (
    ScriptedChatModel,
    Step,
    open_runtime,
    passages,
    pieces,
    searching,
    searxng,
    web_settings,
)

pytestmark = pytest.mark.slow

HOSTILE = [
    "javascript:alert(document.cookie)",
    " JaVaScRiPt:alert(1)",
    "java\tscript:alert(1)",
    "\x01javascript:alert(1)",
    "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==",
    "vbscript:msgbox(1)",
    "//evil.example/scheme-relative",
]
# address as the engine sent it -> the link a citation carries
SAFE = {
    "https://example.org/bicycles": "https://example.org/bicycles",
    " HTTP://Example.org/x\n": "HTTP://Example.org/x",
}


def _cite_all(messages: list[ChatMessage]) -> Iterable[Step]:
    numbers = sorted({p.number for p in passages(messages)})
    return pieces("Found " + " ".join(f"[{n}]" for n in numbers) + ".")


def test_only_http_and_https_urls_become_citation_links(
    runtime: Runtime, embedder: MemoEmbedder
) -> None:
    results = [
        {"title": f"Result {i}", "url": url, "content": f"Bicycle parking note {i}."}
        for i, url in enumerate([*HOSTILE, *SAFE])
    ]
    model = ScriptedChatModel(searching(_cite_all, lambda m: [("web_search", "bicycles")]))
    with (
        searxng(results) as web,
        open_runtime(
            runtime.settings,
            embedder,
            model=model,
            web_search=web_settings(web.base_url, k=20),
        ) as rt,
    ):
        events = rt.turns.ask(rt.local_principal(), "where do bicycles go?")
    final = events[-1].data
    assert events[-1].kind == "done", final
    citations = final["citations"]
    assert len(citations) == len(results)
    by_source = {c["source"]: c for c in citations}
    for url in HOSTILE:
        assert by_source[url]["url"] is None, by_source[url]
    for url, link in SAFE.items():
        assert by_source[url]["url"] == link
    assert {c["url"] for c in citations} == {None, *SAFE.values()}
    sent = [e.data for e in events if e.kind == "citation"]
    assert all(c["url"] in (None, *SAFE.values()) for c in sent) and sent
