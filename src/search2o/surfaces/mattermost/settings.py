"""The ``mattermost`` settings section (docs/mattermost.md, docs/configuration.md)."""

from __future__ import annotations

from pydantic import (
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
)

from search2o.settings_base import edit_pause, section_of, token_url
from search2o.surfaces.settings import MessengerSettings

__all__ = ["MattermostSettings", "mattermost_settings"]


class MattermostSettings(MessengerSettings):
    """The Mattermost surface (:mod:`search2o.surfaces.mattermost`, docs/mattermost.md).

    Mattermost is on when ``url`` and ``bot_token`` are set (:attr:`configured`). ``search2o
    mattermost listen`` reads the bot's WebSocket event stream (``{url}/api/v4/websocket``,
    Mattermost API v4 "WebSocket") and backfills a gap over REST; the slash command
    ``/search2o`` posts to ``POST /mattermost/command`` with ``command_token`` (the token
    Mattermost shows for the command; without it the route is not served) and rating buttons
    post to ``POST /mattermost/actions`` at ``public_url`` (how the Mattermost server reaches
    this one; default :func:`public_url`). Answers are jobs that call this server's API at
    ``server_url`` with ``service_token`` (``search2o surfaces token mattermost``). An answer
    is patched at most every ``update_every_s`` seconds and never while the server's
    ``X-Ratelimit-*`` headers or a 429 say to wait. ``watchdog_s``: a socket that answers no
    ping for this long is taken for dead and reconnected.
    """

    model_config = ConfigDict(extra="forbid")

    url: str | None = Field(default=None, description="the Mattermost server, https://chat.example")
    bot_token: SecretStr | None = Field(default=None, description="the bot account's access token")
    command_token: SecretStr | None = Field(
        default=None, description="the slash command's token (Integrations > Slash Commands)"
    )
    public_url: str | None = Field(
        default=None, description="this server as Mattermost reaches it (button callbacks)"
    )
    update_every_s: float = edit_pause(1.0, "patches")
    watchdog_s: float = Field(
        default=30.0, gt=0, le=600, description="reconnect when a ping gets no answer this long"
    )
    backfill_max_s: int = Field(
        default=86_400, ge=0, le=30 * 86_400, description="oldest gap a reconnect backfills"
    )
    max_question_chars: int = Field(default=16_383, ge=1, le=40_000)

    @field_validator("url", "public_url")
    @classmethod
    def _mm_url(cls, value: str | None) -> str | None:
        # The bot token travels to url.
        return token_url(value)

    @field_validator("command_token")
    @classmethod
    def _command_token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < 16:
            raise ValueError("must be the token Mattermost shows for the command (26 characters)")
        return value

    @property
    def configured(self) -> bool:
        """Whether the surface is on: a server URL and a bot token are set."""
        return bool(self.url and self.bot_token and self.bot_token.get_secret_value())


def mattermost_settings(settings: object) -> MattermostSettings:
    """Return the ``mattermost`` section of the root settings (:func:`~.settings_base.section_of`).

    Raises:
        ConfigError: the section is not installed.

    """
    return section_of(settings, "mattermost", MattermostSettings)
