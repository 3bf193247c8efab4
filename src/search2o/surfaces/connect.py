"""How a messenger surface's jobs reach our API: the server's URL and a client with its token.

Shared by the surfaces that answer through jobs (Telegram, Mattermost; Slack has its own copy
in :mod:`search2o.surfaces.slack.surface` that can move here).
"""

from __future__ import annotations

from pydantic import SecretStr

from search2o.client import Client
from search2o.config import Settings
from search2o.errors import ConfigError

__all__ = ["connect_surface", "server_url"]


def server_url(settings: Settings, configured: str | None) -> str:
    """Where answers reach our API: ``configured``, else ``http://<host>:<port>``.

    A wildcard bind address (``0.0.0.0``, ``::``) is reached on loopback.
    """
    if configured:
        return configured.rstrip("/")
    host = settings.host if settings.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{settings.port}"


def connect_surface(
    settings: Settings, surface: str, configured_url: str | None, token: SecretStr | None
) -> Client:
    """Open a client of our API with ``surface``'s service token (close it, or use ``with``).

    Raises:
        ConfigError: the token is not set and the server needs tokens.

    """
    secret = token.get_secret_value() if token else None
    if secret is None and settings.auth_mode == "token":
        raise ConfigError(
            f"{surface}.service_token is not set: create one with `search2o surfaces token "
            f"{surface}` and set SEARCH2O_{surface.upper()}__SERVICE_TOKEN"
        )
    return Client(server_url(settings, configured_url), secret, timeout=60.0, retries=5)
