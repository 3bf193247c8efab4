"""How messenger surfaces reach our API: one URL rule, one token rule, one client a process."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from search2o.client import Client
from search2o.config import Settings
from search2o.errors import ConfigError
from search2o.surfaces import connect as connecting
from search2o.surfaces.slack import surface as slack
from search2o.surfaces.telegram import surface as telegram


def test_the_shared_client_is_opened_once_per_process_even_by_racing_threads() -> None:
    opened: list[Client] = []

    def open_client() -> Client:
        opened.append(Client("http://127.0.0.1:9", None))
        return opened[-1]

    get = connecting.shared_client(open_client)
    got: list[Client] = []
    threads = [threading.Thread(target=lambda: got.append(get())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert len(opened) == 1
        assert got == opened * 8 and get() is opened[0]
    finally:
        opened[0].close()


def test_a_refused_open_is_tried_again_on_the_next_call() -> None:
    calls: list[int] = []

    def open_client() -> Client:
        calls.append(1)
        if len(calls) == 1:
            raise ConfigError("no token yet")
        return Client("http://127.0.0.1:9", None)

    get = connecting.shared_client(open_client)
    with pytest.raises(ConfigError):
        get()
    client = get()
    try:
        assert len(calls) == 2 and get() is client
    finally:
        client.close()


@pytest.mark.parametrize(
    ("connect", "name"), [(slack.connect, "slack"), (telegram.connect, "telegram")]
)
def test_each_surface_needs_its_own_service_token_in_token_mode(
    connect: Callable[[Settings], Client], name: str
) -> None:
    settings = Settings(auth_mode="token", host="127.0.0.1", port=8000)
    with pytest.raises(ConfigError) as raised:
        connect(settings)
    assert f"{name}.service_token is not set" in raised.value.message
    assert f"SEARCH2O_{name.upper()}__SERVICE_TOKEN" in raised.value.message


def test_slacks_server_url_is_its_setting_else_this_machines_server() -> None:
    assert slack.server_url(Settings(host="0.0.0.0", port=8000)) == "http://127.0.0.1:8000"
    configured = Settings(slack={"server_url": "https://search.example.com/"})
    assert slack.server_url(configured) == "https://search.example.com"
