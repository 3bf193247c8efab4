"""Without the ``mcp`` extra the endpoint is off: a warning only when MCP was asked for."""

from __future__ import annotations

import logging

import pytest
from fastapi import FastAPI

from search2o.errors import ConfigError
from search2o.runtime import Runtime
from search2o.surfaces.mcp import extension
from search2o.surfaces.mcp.settings import McpSettings


def _missing(*args: object) -> None:
    raise ConfigError("the MCP server needs the extra: pip install 'search2o[mcp]'")


@pytest.mark.parametrize(("asked", "level"), [(False, logging.INFO), (True, logging.WARNING)])
def test_the_endpoint_is_off_and_only_a_request_for_it_warns(
    runtime: Runtime,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    asked: bool,
    level: int,
) -> None:
    monkeypatch.setattr(extension, "require_extra", _missing)
    section = McpSettings(enabled=True) if asked else McpSettings()
    chosen = runtime.settings.model_copy(update={"mcp": section})
    monkeypatch.setattr(runtime, "settings", chosen)
    app = FastAPI()
    with caplog.at_level(logging.INFO, logger="search2o.api"):
        assert extension._add_routes(app, runtime) is None
    records = [r for r in caplog.records if r.getMessage().startswith("MCP endpoint off")]
    assert [r.levelno for r in records] == [level]
    assert app.state.mcp is None
