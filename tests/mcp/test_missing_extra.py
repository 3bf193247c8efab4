"""Without the ``mcp`` extra the endpoint is off, said at info level; asked for, refused.

The refusal of ``mcp.enabled = true`` without the extra is at start-up
(``tests/test_missing_extras.py``); here, the default: the app serves without ``/mcp``.
"""

from __future__ import annotations

import logging
import sys

import pytest
from fastapi import FastAPI

from search2o.errors import MissingExtraError
from search2o.extensions import check_extras
from search2o.runtime import Runtime
from search2o.surfaces.mcp import extension
from search2o.surfaces.mcp.settings import McpSettings


def test_by_default_the_endpoint_is_off_and_said_once_at_info(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "joserfc", None)  # the extra's second module is missing
    assert "enabled" not in runtime.settings.mcp.model_fields_set  # on by default
    app = FastAPI()
    with caplog.at_level(logging.INFO, logger="search2o.api"):
        check_extras(runtime.settings)  # not asked for: no refusal
        assert extension._add_routes(app, runtime) is None
    records = [r for r in caplog.records if r.getMessage().startswith("MCP endpoint off")]
    assert [r.levelno for r in records] == [logging.INFO]
    assert "pip install 'search2o[mcp]'" in records[0].getMessage()
    assert app.state.mcp is None


def test_asked_for_it_is_refused_naming_the_setting(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "joserfc", None)
    chosen = runtime.settings.model_copy(update={"mcp": McpSettings(enabled=True)})
    with pytest.raises(MissingExtraError) as refused:
        check_extras(chosen)
    assert refused.value.extra == "mcp"
    assert refused.value.message.startswith("mcp.enabled turns on the MCP server")
