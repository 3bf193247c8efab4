"""One loopback rule for the whole product: the server, state hooks and the key service."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from search2o.crypto.http_keys import HttpKeyProvider
from search2o.errors import ConfigError
from search2o.netpolicy import is_loopback_host
from search2o.state.settings import StateSettings

LOOPBACK = ["127.0.0.1", "127.0.0.2", "127.255.255.254", "::1", "[::1]", "localhost", "LocalHost"]
REMOTE = [
    "0.0.0.0",
    "::",
    "10.0.0.1",
    "128.0.0.1",
    "localhost.example.com",
    "evil-localhost",
    "127.0.0.1.nip.io",
    "",
    "::ffff:10.0.0.1",
]


@pytest.mark.parametrize("host", LOOPBACK)
def test_loopback_hosts(host: str) -> None:
    assert is_loopback_host(host)


@pytest.mark.parametrize("host", REMOTE)
def test_other_hosts_are_not_loopback(host: str) -> None:
    assert not is_loopback_host(host)


def test_an_ipv4_mapped_loopback_address_is_loopback() -> None:
    assert is_loopback_host("::ffff:127.0.0.1")


@pytest.mark.parametrize("host", ["127.0.0.2", "[::1]", "localhost"])
def test_state_hooks_and_key_service_accept_the_same_loopback_urls(host: str) -> None:
    url = f"http://{host}:9000/hooks"
    assert StateSettings(hooks=url, hook_secret="s" * 16).hooks == url
    assert str(HttpKeyProvider(url, "s" * 16).url) == url


@pytest.mark.parametrize("host", ["10.0.0.1", "127.0.0.1.nip.io"])
def test_state_hooks_and_key_service_refuse_the_same_remote_http_urls(host: str) -> None:
    url = f"http://{host}:9000/hooks"
    with pytest.raises(ValidationError, match="https"):
        StateSettings(hooks=url, hook_secret="s" * 16)
    with pytest.raises(ConfigError, match="https"):
        HttpKeyProvider(url, "s" * 16)


@pytest.mark.parametrize(
    ("url", "secure", "problem"),
    [
        ("https://hooks.example.com/state", True, None),
        ("http://127.0.0.2:8080/state", True, None),
        ("http://[::1]/x", True, None),
        ("http://hooks.example.com/state", True, "uses plain http to a remote host"),
        ("http://gpu-box:11434/v1", False, None),
        ("https://user:secret@hooks.example.com/", True, "must not hold a user name or password"),
        ("ftp://example.com/", False, "must be an http(s) URL with a host"),
        ("https:///path-only", False, "must be an http(s) URL with a host"),
        ("http://host:99999/", False, "is not a URL"),
        ("not a url", False, "must be an http(s) URL with a host"),
    ],
)
def test_one_url_policy(url: str, secure: bool, problem: str | None) -> None:
    from search2o.netpolicy import url_problem

    found = url_problem(url, secure=secure)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


def test_configured_endpoints_follow_the_policy() -> None:
    from pydantic import ValidationError

    from search2o.providers.settings import EmbeddingSettings
    from search2o.query.settings import ModelProfile, WebSearchSettings

    for model in (EmbeddingSettings, ModelProfile, WebSearchSettings):
        assert model(base_url="http://10.0.0.5:8000/v1").base_url == "http://10.0.0.5:8000/v1"
        with pytest.raises(ValidationError, match="must not hold a user name or password"):
            model(base_url="https://me:pw@api.example.com/v1")
