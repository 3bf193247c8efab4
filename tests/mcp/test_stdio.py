"""``search2o mcp`` over stdio: the SDK's client starts the command, on both backends."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import anyio
import pytest
from tests.mcp.conftest import QUESTION, Handbook, golden_tools, structured, tool_error, tools_of
from tests.mcp.test_tools import MODES
from tests.test_cli import SCRIPT

from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.slow


def stdio_server(handbook: Handbook, *args: str) -> StdioServerParameters:
    """The command as an MCP client configuration names it, on the handbook's database."""
    settings = handbook.runtime.settings
    env = {
        **os.environ,
        "SEARCH2O_DATA_DIR": str(settings.data_dir),
        "SEARCH2O_DATABASE_URL": settings.database_url or "",
        "HF_HUB_OFFLINE": "1",
    }
    return StdioServerParameters(command=str(SCRIPT), args=["mcp", *args], env=env)


@pytest.mark.parametrize("mode", MODES)
def test_stdio_serves_the_tools_as_the_as_user(handbook: Handbook, mode: str) -> None:
    hr = str(handbook.hr_id)

    async def main() -> Any:
        async with Client(stdio_server(handbook, "--as", "bob@example.com"), mode=mode) as c:
            return (
                await c.list_tools(),
                await c.call_tool("search", {"query": QUESTION}),
                await c.call_tool("fetch", {"id": str(handbook.benefits_id)}),
                await c.call_tool("fetch", {"id": hr}),
            )

    listing, found, fetched, forbidden = anyio.run(main)
    assert tools_of(listing) == golden_tools()
    ids = [r["id"] for r in structured(found)["results"]]
    assert str(handbook.benefits_id) in ids[:3] and hr not in ids
    assert structured(fetched)["metadata"]["source"].endswith("benefits-and-perks.md")
    assert tool_error(forbidden).endswith(f"no document {hr}")


def test_stdio_as_alice_reaches_the_hr_document(handbook: Handbook) -> None:
    async def main() -> Any:
        async with Client(stdio_server(handbook, "--as", "alice@example.com")) as client:
            return await client.call_tool("fetch", {"id": str(handbook.hr_id)})

    assert structured(anyio.run(main))["id"] == str(handbook.hr_id)


def test_an_unknown_as_user_stops_with_one_error_line(handbook: Handbook) -> None:
    server = stdio_server(handbook, "--as", "nobody@example.com")
    done = subprocess.run(
        [server.command, *server.args],
        env=server.env,
        input="",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == ""  # stdout carries the protocol only
    assert done.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "nobody@example.com" in done.stderr
