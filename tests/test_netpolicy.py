"""One loopback rule for the whole product: the server, state hooks and the key service."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from search2o.config import StateSettings
from search2o.crypto.http_keys import HttpKeyProvider
from search2o.errors import ConfigError
from search2o.netpolicy import is_loopback_host

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
