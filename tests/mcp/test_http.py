"""``/mcp`` over Streamable HTTP on a real loopback uvicorn, with the SDK's own client.

Both protocol eras, our API tokens, 401 with ``WWW-Authenticate`` and the RFC 9728 metadata,
the Host/Origin allowlist, and the citation URL ``GET /v1/documents/{id}/text``; on both
database backends.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client
from tests.api.test_api import serve
from tests.conftest import MemoEmbedder
from tests.mcp.conftest import (
    QUESTION,
    Handbook,
    golden_tools,
    structured,
    tool_error,
    tools_of,
)
from tests.mcp.test_tools import MODES

from mcp import Client
from search2o.api.app import create_app
from search2o.runtime import Runtime
from search2o.surfaces.mcp.settings import McpSettings

pytestmark = pytest.mark.slow

JSON_RPC = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw-http", "version": "1"},
    },
}


@pytest.fixture
def api(handbook: Handbook) -> Iterator[httpx.Client]:
    """The whole API, ``/mcp`` included, on loopback in token mode."""
    runtime = handbook.runtime
    with serve(create_app(runtime.settings, runtime=runtime)) as client:
        yield client


def over_http(
    api: httpx.Client,
    headers: dict[str, str],
    mode: str,
    body: Callable[[Client], Awaitable[Any]],
) -> Any:
    """Connect the SDK's client to ``<api>/mcp`` with ``headers``; return ``body(client)``."""
    url = f"{api.base_url}/mcp"

    async def main() -> Any:
        async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
            transport = streamable_http_client(url, http_client=http)
            async with Client(transport, mode=mode) as client:
                return await body(client)

    return anyio.run(main)


@pytest.mark.parametrize("mode", MODES)
def test_the_sdk_client_searches_and_fetches_over_http(
    api: httpx.Client, handbook: Handbook, mode: str
) -> None:
    benefits, hr = str(handbook.benefits_id), str(handbook.hr_id)

    async def body(client: Client) -> Any:
        listing = await client.list_tools()
        found = await client.call_tool("search", {"query": QUESTION})
        fetched = await client.call_tool("fetch", {"id": benefits})
        forbidden = await client.call_tool("fetch", {"id": hr})
        return client.protocol_version, listing, found, fetched, forbidden

    negotiated, listing, found, fetched, forbidden = over_http(api, handbook.bob_auth, mode, body)
    assert negotiated == ("2025-11-25" if mode == "legacy" else mode)
    assert tools_of(listing) == golden_tools()
    results = structured(found)["results"]
    assert benefits in [r["id"] for r in results[:3]]
    assert hr not in [r["id"] for r in results]
    assert all(r["url"].endswith(f"/v1/documents/{r['id']}/text") for r in results)
    document = structured(fetched)
    assert document["metadata"]["source"].endswith("benefits-and-perks.md")
    assert "20 days of vacation" in document["text"]
    assert tool_error(forbidden).endswith(f"no document {hr}")


def test_alice_reaches_her_hr_document_over_http(api: httpx.Client, handbook: Handbook) -> None:
    hr = str(handbook.hr_id)

    async def body(client: Client) -> Any:
        found = await client.call_tool("search", {"query": QUESTION})
        return found, await client.call_tool("fetch", {"id": hr})

    found, fetched = over_http(api, handbook.alice_auth, "2026-07-28", body)
    assert hr in [r["id"] for r in structured(found)["results"]]
    assert structured(fetched)["id"] == hr


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer s2o_not-a-token"}, {"Authorization": "Basic YTpi"}],
    ids=["no-token", "unknown-token", "not-bearer"],
)
def test_no_valid_token_answers_401_naming_the_resource_metadata(
    api: httpx.Client, headers: dict[str, str]
) -> None:
    response = api.post("/mcp", json=INITIALIZE, headers={**JSON_RPC, **headers})
    assert response.status_code == 401, response.text
    challenge = response.headers["WWW-Authenticate"]
    assert challenge.startswith("Bearer ")
    metadata_url = challenge.split('resource_metadata="', 1)[1].split('"', 1)[0]
    assert metadata_url.endswith("/.well-known/oauth-protected-resource/mcp")

    metadata = api.get("/.well-known/oauth-protected-resource/mcp")
    assert metadata.status_code == 200
    document = metadata.json()
    assert document["resource"] == metadata_url.replace(
        "/.well-known/oauth-protected-resource/mcp", "/mcp"
    )
    assert document["bearer_methods_supported"] == ["header"]
    assert "authorization_servers" not in document  # no identity provider configured
    assert api.get("/.well-known/oauth-protected-resource").json() == document


def test_a_surface_token_acts_for_no_one_over_mcp(api: httpx.Client, handbook: Handbook) -> None:
    from search2o.accounts import issue_surface_token

    with handbook.runtime.database.session() as session:
        token = issue_surface_token(session, "slack", "tests")
    response = api.post(
        "/mcp", json=INITIALIZE, headers={**JSON_RPC, "Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 401


@pytest.fixture
def allowlisted(
    handbook: Handbook, embedder: MemoEmbedder
) -> Iterator[tuple[httpx.Client, Handbook]]:
    """The API with ``mcp.allowed_hosts`` / ``allowed_origins`` naming one public name only."""
    settings = handbook.runtime.settings.model_copy(
        update={
            "mcp": McpSettings(
                allowed_hosts=["search.example.com"],
                allowed_origins=["https://search.example.com"],
            )
        }
    )
    runtime = Runtime(settings, embedder=embedder)
    try:
        with serve(create_app(settings, runtime=runtime)) as client:
            yield client, handbook
    finally:
        runtime.close()


def test_a_host_outside_the_allowlist_answers_421_a_configured_one_200(
    allowlisted: tuple[httpx.Client, Handbook],
) -> None:
    api, handbook = allowlisted
    headers = {**JSON_RPC, **handbook.bob_auth}
    # The client's own Host (127.0.0.1:<port>) is not configured, nor is any other name;
    # the allowlist answers first, with or without a token.
    for host in (None, "evil.example.com"):
        extra = {} if host is None else {"Host": host}
        refused = api.post("/mcp", json=INITIALIZE, headers={**headers, **extra})
        assert refused.status_code == 421, (host, refused.text)
        anonymous = api.post("/mcp", json=INITIALIZE, headers={**JSON_RPC, **extra})
        assert anonymous.status_code == 421 and "WWW-Authenticate" not in anonymous.headers
    accepted = api.post("/mcp", json=INITIALIZE, headers={**headers, "Host": "search.example.com"})
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["result"]["serverInfo"]["name"] == "search2o"

    origin = {**headers, "Host": "search.example.com"}
    bad_origin = api.post(
        "/mcp", json=INITIALIZE, headers={**origin, "Origin": "https://evil.example.com"}
    )
    assert bad_origin.status_code == 403
    good_origin = api.post(
        "/mcp", json=INITIALIZE, headers={**origin, "Origin": "https://search.example.com"}
    )
    assert good_origin.status_code == 200


def test_the_citation_url_serves_the_text_only_to_readers(
    api: httpx.Client, handbook: Handbook
) -> None:
    benefits = api.get(f"/v1/documents/{handbook.benefits_id}/text", headers=handbook.bob_auth)
    assert benefits.status_code == 200
    body = benefits.json()
    assert body["source"].endswith("benefits-and-perks.md") and body["truncated"] is False
    assert "20 days of vacation" in body["text"]

    hr = f"/v1/documents/{handbook.hr_id}/text"
    assert api.get(hr, headers=handbook.alice_auth).status_code == 200
    forbidden = api.get(hr, headers=handbook.bob_auth)
    missing = api.get(f"/v1/documents/{handbook.hr_id + 1000}/text", headers=handbook.bob_auth)
    assert forbidden.status_code == missing.status_code == 404
    # The same body as for an id no document has, but for the number itself.
    assert forbidden.text.replace(str(handbook.hr_id), "N") == missing.text.replace(
        str(handbook.hr_id + 1000), "N"
    )
    assert api.get(hr).status_code == 401


def test_concurrent_callers_each_search_with_their_own_rights(
    api: httpx.Client, handbook: Handbook
) -> None:
    # The caller travels in a context variable per request: requests of two users served at
    # the same time by one process must not see each other's rights.
    url = f"{api.base_url}/mcp"
    hr = str(handbook.hr_id)
    seen: dict[str, list[bool]] = {"alice": [], "bob": []}

    async def user(name: str, headers: dict[str, str], mode: str) -> None:
        async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
            transport = streamable_http_client(url, http_client=http)
            async with Client(transport, mode=mode) as client:
                for _ in range(4):
                    found = await client.call_tool("fetch", {"id": hr})
                    seen[name].append(not found.is_error)

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for mode in MODES:
                group.start_soon(user, "alice", handbook.alice_auth, mode)
                group.start_soon(user, "bob", handbook.bob_auth, mode)

    anyio.run(main)
    assert seen == {"alice": [True] * 8, "bob": [False] * 8}
