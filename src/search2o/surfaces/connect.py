"""How a messenger surface's jobs reach our API: the server's URL and a client with its token.

Shared by the surfaces that answer through jobs (Slack, Telegram): one way to find the server,
one way to open the client, one client per process (:func:`shared_client`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from pydantic import SecretStr

from search2o.client import Client
from search2o.config import Settings
from search2o.config import server_url as config_server_url
from search2o.errors import ConfigError
from search2o.surfaces.settings import service_token_problem

__all__ = ["connect_surface", "server_url", "shared_client"]


def server_url(settings: Settings, configured: str | None) -> str:
    """Where answers reach our API: ``configured``, else this machine's own server.

    ``configured`` is the surface's ``server_url`` setting; without it,
    :func:`search2o.config.server_url` for a process (a wildcard bind address is reached on
    loopback).
    """
    if configured:
        return configured.rstrip("/")
    return config_server_url(settings, for_people=False)


def connect_surface(
    settings: Settings, surface: str, configured_url: str | None, token: SecretStr | None
) -> Client:
    """Open a client of our API with ``surface``'s service token (close it, or use ``with``).

    Raises:
        ConfigError: the token is not set and the server needs tokens.

    """
    problem = service_token_problem(surface, settings.auth_mode, token)
    if problem is not None:
        raise ConfigError(problem)
    secret = token.get_secret_value() if token else None
    return Client(server_url(settings, configured_url), secret, timeout=60.0, retries=5)


def shared_client(open_client: Callable[[], Client]) -> Callable[[], Client]:
    """Return a getter of one client of our API per process, opened by ``open_client`` on first use.

    Every job and command of a surface shares it: :class:`~search2o.client.Client` is
    thread-safe, and one connection pool spares each job a new TLS context and connection.
    Callers do not close it; it lives as long as the process.

    Raises (from the getter):
        ConfigError: as ``open_client`` (e.g. :func:`connect_surface` without a token); the
            next call tries again.

    """
    lock = threading.Lock()
    opened: list[Client] = []

    def get() -> Client:
        with lock:
            if not opened:
                opened.append(open_client())
            return opened[0]

    return get
