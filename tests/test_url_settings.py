"""Every URL a setting or an agent definition can hold, against the one URL rule (SSRF).

The URLs come from ``config.py`` (every field that holds one) and the agent definition schema
(which holds none: a model is chosen by profile name, so a definition cannot point the server
anywhere). Each URL setting goes through :func:`search2o.netpolicy.url_problem`:

* where a secret travels (a bot token, our service token, state, key wrapping, the signing
  keys of an identity provider), https only, plain http to loopback alone;
* model and search endpoints (often a box on the LAN) may be plain http, but never carry a
  user name or password in the URL (it would end up in logs and errors);
* none may be anything but http(s) with a host.

A refused URL is a settings error naming the setting and the reason.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from search2o.agents.definition import parse_definition
from search2o.config import OidcSettings
from search2o.errors import InputError
from search2o.providers.settings import EmbeddingSettings
from search2o.query.settings import ModelProfile, WebSearchSettings
from search2o.state.settings import StateSettings
from search2o.surfaces.mattermost.settings import MattermostSettings
from search2o.surfaces.mcp.settings import McpSettings
from search2o.surfaces.slack.settings import SlackSettings
from search2o.surfaces.telegram.settings import TelegramSettings

SECRET = {"hook_secret": "s" * 16}
# (settings class, field, extra fields it needs, whether a secret travels to it)
URL_SETTINGS: list[tuple[type[BaseModel], str, dict[str, Any], bool]] = [
    (ModelProfile, "base_url", {}, False),
    (EmbeddingSettings, "base_url", {}, False),
    (WebSearchSettings, "base_url", {}, False),
    (StateSettings, "hooks", SECRET, True),
    (McpSettings, "oidc_issuer", {}, True),
    (McpSettings, "public_url", {}, False),
    (OidcSettings, "issuer", {"client_id": "search2o"}, True),
    (OidcSettings, "redirect_url", {}, False),
    (SlackSettings, "api_url", {}, True),
    (SlackSettings, "server_url", {}, True),
    (TelegramSettings, "api_url", {}, True),
    (TelegramSettings, "server_url", {}, True),
    (MattermostSettings, "url", {}, True),
    (MattermostSettings, "public_url", {}, True),
    (MattermostSettings, "server_url", {}, True),
]
IDS = [f"{cls.__name__}.{field}" for cls, field, _, _ in URL_SETTINGS]


@pytest.mark.parametrize(("cls", "field", "extra", "secret"), URL_SETTINGS, ids=IDS)
def test_a_url_setting_refuses_other_schemes_and_credentials(
    cls: type[BaseModel], field: str, extra: dict[str, Any], secret: bool
) -> None:
    cases = [
        ("file:///etc/passwd", "must be an http(s) URL with a host"),
        ("gopher://127.0.0.1:6379/_INFO", "must be an http(s) URL with a host"),
        ("https://me:pw@api.example.com/", "must not hold a user name or password"),
    ]
    if (cls, field) == (StateSettings, "hooks"):
        # Anything but http(s) names an installed entry point there, never a place to call.
        cases = cases[2:]
    for bad, reason in cases:
        with pytest.raises(ValidationError) as refused:
            cls(**{field: bad, **extra})
        assert field in str(refused.value) and reason in str(refused.value), (bad, refused.value)


@pytest.mark.parametrize(
    ("cls", "field", "extra", "secret"),
    [s for s in URL_SETTINGS if s[3]],
    ids=[i for i, s in zip(IDS, URL_SETTINGS, strict=True) if s[3]],
)
def test_where_a_secret_travels_plain_http_goes_to_loopback_only(
    cls: type[BaseModel], field: str, extra: dict[str, Any], secret: bool
) -> None:
    for remote in ("http://10.0.0.7:8080", "http://169.254.169.254", "http://127.0.0.1.nip.io"):
        with pytest.raises(ValidationError, match="plain http to a remote host"):
            cls(**{field: remote, **extra})
    cls(**{field: "http://127.0.0.1:8080", **extra})  # the control: loopback is fine
    cls(**{field: "https://chat.example.com", **extra})


def test_an_agent_definition_holds_no_url() -> None:
    """A model is a profile's name: a URL in a command is an unknown key, refused with its path."""
    doc = {
        "name": "reach",
        "description": "tries to choose where the model call goes",
        "functions": {
            "main": {
                "llm": {"prompt": "hi", "base_url": "http://169.254.169.254/latest"},
                "end": {"output": "{ result }"},
            }
        },
    }
    with pytest.raises(InputError) as refused:
        parse_definition(doc, profiles=["default"])
    assert "$.functions.main.llm" in str(
        refused.value.problems if hasattr(refused.value, "problems") else refused.value
    )
