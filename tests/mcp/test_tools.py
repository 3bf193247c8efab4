"""The MCP tools in memory, with the SDK's own client, in both protocol eras, on both backends."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from tests.mcp.conftest import (
    HR_NAME,
    QUESTION,
    Handbook,
    golden_tools,
    structured,
    tool_error,
    tools_of,
)

from mcp import Client
from search2o.accounts import Principal
from search2o.surfaces.mcp.server import build_mcp_server
from search2o.surfaces.mcp.urls import McpUrls

pytestmark = pytest.mark.slow

# The handshake era (initialize, negotiated to the SDK's newest handshake version) and the
# 2026-07-28 per-request envelope.
MODES = ["legacy", "2026-07-28"]


def run_as(
    handbook: Handbook, principal: Principal, mode: str, body: Callable[[Client], Awaitable[Any]]
) -> Any:
    """Connect the SDK's client in memory as ``principal``; return ``body(client)``."""
    runtime = handbook.runtime
    server = build_mcp_server(runtime, McpUrls.of(runtime.settings), lambda: principal)

    async def main() -> Any:
        async with Client(server, mode=mode) as client:
            return await body(client)

    return anyio.run(main)


def document_url(handbook: Handbook, document_id: int) -> str:
    """The citation URL the settings give a document."""
    return McpUrls.of(handbook.runtime.settings).document(document_id)


@pytest.mark.parametrize("mode", MODES)
def test_tools_list_matches_the_golden_file(handbook: Handbook, mode: str) -> None:
    async def body(client: Client) -> Any:
        return client.protocol_version, await client.list_tools()

    negotiated, listing = run_as(handbook, handbook.bob, mode, body)
    assert negotiated == ("2025-11-25" if mode == "legacy" else mode)
    assert tools_of(listing) == golden_tools()


@pytest.mark.parametrize("mode", MODES)
def test_search_finds_the_benefits_page_with_a_url_and_fetch_returns_its_text(
    handbook: Handbook, mode: str
) -> None:
    async def body(client: Client) -> Any:
        found = await client.call_tool("search", {"query": QUESTION})
        ids = [r["id"] for r in structured(found)["results"]]
        return found, await client.call_tool("fetch", {"id": str(handbook.benefits_id)}), ids

    found, fetched, ids = run_as(handbook, handbook.bob, mode, body)
    results = structured(found)["results"]
    assert all(set(r) == {"id", "title", "url"} for r in results)
    assert len(ids) == len(set(ids)), "each document once"
    benefits = str(handbook.benefits_id)
    assert benefits in ids[:3], results
    [hit] = [r for r in results if r["id"] == benefits]
    assert hit["url"] == document_url(handbook, handbook.benefits_id)
    assert hit["title"] == "Benefits & Perks"

    document = structured(fetched)
    assert set(document) == {"id", "title", "text", "url", "metadata"}
    assert document["id"] == benefits and document["url"] == hit["url"]
    assert document["metadata"]["source"].endswith("benefits-and-perks.md")
    assert document["metadata"]["truncated"] == "false"
    # The title is the document's; its sections open the text as Markdown headings.
    assert document["text"].startswith("# Health Insurance\n\n")
    assert "\n\n# Paid Time Off\n\n" in document["text"]
    assert "37signals offers 20 days of vacation and personal days plus" in document["text"]


@pytest.mark.parametrize("mode", MODES)
def test_another_users_hr_document_is_neither_found_nor_fetchable(
    handbook: Handbook, mode: str
) -> None:
    hr = str(handbook.hr_id)
    missing = str(handbook.hr_id + 1000)

    async def body(client: Client) -> Any:
        return (
            structured(await client.call_tool("search", {"query": QUESTION}))["results"],
            structured(
                await client.call_tool(
                    "search_knowledge", {"query": QUESTION, "k": 20, "document_ids": [hr]}
                )
            )["findings"],
            await client.call_tool("fetch", {"id": hr}),
            await client.call_tool("fetch", {"id": missing}),
        )

    # Alice (group hr) finds and fetches it: the control that the query does reach it.
    results, findings, fetched, _ = run_as(handbook, handbook.alice, mode, body)
    assert hr in [r["id"] for r in results]
    assert findings and {f["id"] for f in findings} == {hr}
    assert structured(fetched)["metadata"]["source"].endswith(HR_NAME)

    results, findings, forbidden, absent = run_as(handbook, handbook.bob, mode, body)
    assert hr not in [r["id"] for r in results]
    assert findings == []
    # The same answer as for an id no document has, but for the number itself.
    assert tool_error(forbidden).replace(hr, "N") == tool_error(absent).replace(missing, "N")
    assert tool_error(forbidden).endswith(f"no document {hr}")


def test_search_knowledge_returns_ranked_findings(handbook: Handbook) -> None:
    async def body(client: Client) -> Any:
        everything = await client.call_tool("search_knowledge", {"query": QUESTION, "k": 4})
        narrowed = await client.call_tool(
            "search_knowledge",
            {"query": QUESTION, "k": 4, "document_ids": [str(handbook.benefits_id)]},
        )
        return structured(everything)["findings"], structured(narrowed)["findings"]

    everything, narrowed = run_as(handbook, handbook.bob, "2026-07-28", body)
    assert 1 <= len(everything) <= 4
    keys = {"id", "title", "source", "heading_path", "text", "score", "url"}
    assert all(set(f) == keys for f in everything)
    scores = [f["score"] for f in everything]
    assert scores == sorted(scores, reverse=True)
    assert all(isinstance(f["heading_path"], list) and f["text"] for f in everything)
    assert narrowed and {f["id"] for f in narrowed} == {str(handbook.benefits_id)}
    assert all(f["url"] == document_url(handbook, handbook.benefits_id) for f in narrowed)


@pytest.mark.parametrize(
    ("tool", "arguments", "named"),
    [
        ("fetch", {"id": "abc"}, "id: 'abc' is not a document id"),
        ("fetch", {"id": "-3"}, "id: '-3' is not a document id"),
        ("search", {"query": "bad\x00query"}, "query"),
        ("search", {"query": ""}, "query"),
        ("search_knowledge", {"query": QUESTION, "k": 0}, "k"),
        ("search_knowledge", {"query": QUESTION, "document_ids": ["x1"]}, "document_ids[0]"),
    ],
)
def test_bad_arguments_are_tool_errors_naming_the_field(
    handbook: Handbook, tool: str, arguments: dict[str, Any], named: str
) -> None:
    async def body(client: Client) -> Any:
        return await client.call_tool(tool, arguments)

    message = tool_error(run_as(handbook, handbook.bob, "2026-07-28", body))
    assert named in message


def test_an_id_beyond_any_row_is_missing_not_a_database_error(handbook: Handbook) -> None:
    async def body(client: Client) -> Any:
        return await client.call_tool("fetch", {"id": "99999999999999999999"})

    message = tool_error(run_as(handbook, handbook.bob, "legacy", body))
    assert message.endswith("no document 99999999999999999999")
