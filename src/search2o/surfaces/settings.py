"""The settings every messenger section shares (Slack, Telegram, Mattermost), declared once."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
)

from search2o.errors import ConfigError
from search2o.settings_base import edit_pause, token_url

__all__ = ["MessengerSettings", "service_token_problem"]


def service_token_problem(surface: str, auth_mode: str, token: SecretStr | None) -> str | None:
    """Return why ``surface`` cannot call the API without its service token, or ``None``.

    The one rule for every surface that calls our API (messengers at start, their clients when
    they connect): in token mode every call needs a token; in local mode none does.

    Args:
        surface: the surface's name (``slack``), its settings section.
        auth_mode: the server's ``auth_mode``.
        token: the configured ``<surface>.service_token``.

    """
    if auth_mode != "token" or token is not None:
        return None
    return (
        f"{surface}.service_token is not set (SEARCH2O_{surface.upper()}__SERVICE_TOKEN): "
        f"in token mode answers cannot reach the API without it; run `search2o surfaces "
        f"token {surface}` and set it"
    )


class MessengerSettings(BaseModel):
    """What every messenger section has (Slack, Telegram, Mattermost), declared once.

    Answers are jobs that call this server's API at ``server_url`` (default: this machine's
    own server, :func:`search2o.surfaces.connect.server_url`) with the surface token
    ``service_token`` (``search2o surfaces token <surface>``), never the engines; an answer is
    edited at most every ``update_every_s`` seconds (each section has its own default,
    redeclared with :func:`~search2o.settings_base.edit_pause`); ``unlinked`` says what an
    unlinked user gets: the shared-channel scope and a one-line hint how to link
    (``channel``), or only the hint (``link_only``). The environment names stay each
    section's: ``SEARCH2O_<SECTION>__SERVER_URL`` and so on.
    """

    model_config = ConfigDict(extra="forbid")

    server_url: str | None = Field(
        default=None, description="this server's API as answers reach it (default http://host:port)"
    )
    service_token: SecretStr | None = Field(
        default=None, description="surface token from `search2o surfaces token <surface>`"
    )
    update_every_s: float = edit_pause(1.0)
    unlinked: Literal["channel", "link_only"] = Field(
        default="channel", description="unlinked users: shared scope + hint, or only a hint"
    )

    @field_validator("server_url")
    @classmethod
    def _server_url(cls, value: str | None) -> str | None:
        # The service token travels to server_url.
        return token_url(value)

    def service_token_problem(self, section: str, auth_mode: str) -> str | None:
        """Return why answers cannot reach the API without a service token, or ``None``.

        In token mode every API call needs a token, so a configured messenger without
        ``service_token`` could only post "could not answer" into each thread: it is refused
        at start instead (the surface's extension hooks, ``search2o <surface> check`` first).
        The rule is :func:`service_token_problem`.

        Args:
            section: the section's name (``slack``), for the setting and the command named.
            auth_mode: the server's ``auth_mode``.

        """
        return service_token_problem(section, auth_mode, self.service_token)

    def refuse_without_service_token(self, section: str, auth_mode: str) -> None:
        """Raise :class:`~search2o.errors.ConfigError` with :meth:`service_token_problem`, if any.

        Raises:
            ConfigError: the section is configured in token mode without its service token.

        """
        problem = self.service_token_problem(section, auth_mode)
        if problem is not None:
            raise ConfigError(problem)
