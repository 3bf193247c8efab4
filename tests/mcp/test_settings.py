"""The ``mcp`` settings: bad values stop the start naming the setting; the URLs they give."""

from __future__ import annotations

from pathlib import Path

import pytest

from search2o.config import Settings, load_settings
from search2o.errors import ConfigError
from search2o.surfaces.mcp.urls import McpUrls


@pytest.mark.parametrize(
    ("env", "value", "needle"),
    [
        ("SEARCH2O_MCP__PUBLIC_URL", "https://search.example.com/base", "without a path"),
        ("SEARCH2O_MCP__PUBLIC_URL", "ftp://search.example.com", "http"),
        ("SEARCH2O_MCP__PUBLIC_URL", "https://u:p@search.example.com", "user name"),
        ("SEARCH2O_MCP__OIDC_ISSUER", "http://login.example.com", "https"),
        ("SEARCH2O_MCP__ALLOWED_HOSTS", '["search.example.com", " "]', "non-blank"),
        ("SEARCH2O_MCP__ALLOWED_ORIGINS", '[" https://a.example.com"]', "surrounding spaces"),
        ("SEARCH2O_MCP__OIDC_ALGORITHMS", '["HS256"]', "oidc_algorithms"),
        ("SEARCH2O_MCP__OIDC_ALGORITHMS", '["none"]', "oidc_algorithms"),
        ("SEARCH2O_MCP__OIDC_ALGORITHMS", "[]", "oidc_algorithms"),
        ("SEARCH2O_MCP__SEARCH_K", "0", "search_k"),
        ("SEARCH2O_MCP__MAX_FETCH_CHARS", "10", "max_fetch_chars"),
        ("SEARCH2O_MCP__AUDIENCE", "", "audience"),
    ],
)
def test_bad_mcp_values_name_the_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: str, value: str, needle: str
) -> None:
    monkeypatch.setenv("SEARCH2O_DATA_DIR", str(tmp_path))
    monkeypatch.setenv(env, value)
    with pytest.raises(ConfigError, match=needle) as refused:
        load_settings()
    assert "mcp" in refused.value.message


def test_an_issuer_on_loopback_may_be_plain_http(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, mcp={"oidc_issuer": "http://127.0.0.1:9000/realm"})
    assert settings.mcp.oidc_issuer == "http://127.0.0.1:9000/realm"


@pytest.mark.parametrize(
    ("host", "port", "base"),
    [
        ("127.0.0.1", 8000, "http://127.0.0.1:8000"),
        ("0.0.0.0", 8080, "http://127.0.0.1:8080"),  # all interfaces: reached on loopback here
        ("::", 8080, "http://127.0.0.1:8080"),
        ("::1", 9000, "http://[::1]:9000"),
        ("search.internal", 80, "http://search.internal:80"),
    ],
)
def test_the_default_base_follows_the_bind_address(
    tmp_path: Path, host: str, port: int, base: str
) -> None:
    urls = McpUrls.of(Settings(data_dir=tmp_path, host=host, port=port))
    assert urls.base == base
    assert urls.endpoint == base + "/mcp" == urls.audience
    assert urls.metadata == base + "/.well-known/oauth-protected-resource/mcp"


def test_the_public_url_gives_the_urls_and_the_default_allowlists(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, mcp={"public_url": "https://search.example.com/"})
    urls = McpUrls.of(settings)
    assert urls.base == "https://search.example.com"
    assert urls.document(7) == "https://search.example.com/v1/documents/7/text"
    assert "search.example.com" in urls.allowed_hosts and "127.0.0.1:*" in urls.allowed_hosts
    assert "https://search.example.com" in urls.allowed_origins
    assert "https://evil.example.com" not in urls.allowed_origins

    named = settings.model_copy(
        update={
            "mcp": settings.mcp.model_copy(
                update={"allowed_hosts": ["a.example.com"], "audience": "api://search2o"}
            )
        }
    )
    named_urls = McpUrls.of(named)
    assert named_urls.allowed_hosts == ("a.example.com",)  # configured: exactly these
    assert named_urls.audience == "api://search2o"
