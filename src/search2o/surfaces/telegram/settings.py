"""The ``telegram`` settings section (docs/telegram.md, docs/configuration.md)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import (
    ConfigDict,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
)

from search2o.settings_base import edit_pause, section_of, token_url
from search2o.surfaces.settings import MessengerSettings

__all__ = ["TelegramSettings", "telegram_settings"]


# Bot API "setWebhook" (secret_token) and Telegram's username rules.
_TELEGRAM_SECRET = re.compile(r"[A-Za-z0-9_-]{1,256}")


_TELEGRAM_USERNAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{3,31}")


class TelegramSettings(MessengerSettings):
    """The Telegram surface (:mod:`search2o.surfaces.telegram`, docs/telegram.md).

    Telegram is on when ``bot_token`` is set (:attr:`configured`). In ``webhook`` mode Telegram
    posts each update to ``POST /telegram/webhook`` of this server with ``secret_token`` in the
    ``X-Telegram-Bot-Api-Secret-Token`` header (required in that mode; 1-256 characters
    ``A-Z a-z 0-9 _ -``, Bot API "setWebhook"); in ``polling`` mode (no public URL needed)
    ``search2o telegram poll`` reads ``getUpdates`` with an offset kept in the database.
    Answers are jobs that call this server's API at ``server_url`` with the surface token
    ``service_token`` (``search2o surfaces token telegram``), never the engines. ``api_url`` is
    the Bot API base (a test points it at a fake). An answer in a group is edited at most every
    ``update_every_s`` seconds (Telegram allows about one message a second per chat and 20 a
    minute per group; Bot API FAQ, "My bot is hitting limits"); a private chat's draft is
    updated as often. ``group_budget`` messages and edits per ``group_window_s`` seconds and
    per group bound all the answers in flight in one group together (intermediate edits beyond
    it are skipped; the final text waits for room).
    """

    model_config = ConfigDict(extra="forbid")

    bot_token: SecretStr | None = Field(default=None, description="the bot token from @BotFather")
    mode: Literal["webhook", "polling"] = Field(default="polling", description="webhook or polling")
    # After bot_token and mode, and validated when unset too: its check reads them.
    secret_token: SecretStr | None = Field(
        default=None,
        validate_default=True,
        description="webhook secret (X-Telegram-Bot-Api-Secret-Token)",
    )
    api_url: str = Field(default="https://api.telegram.org/", description="Bot API base URL")
    bot_username: str | None = Field(
        default=None, description="the bot's @username without @ (default: asked with getMe)"
    )
    update_every_s: float = edit_pause(1.5)
    group_budget: int = Field(default=20, ge=1, le=1000, description="messages+edits per group")
    group_window_s: float = Field(default=60.0, gt=0, le=3600, description="per this window")
    stream: bool = Field(default=True, description="private chats: stream with sendMessageDraft")
    poll_timeout_s: int = Field(default=30, ge=0, le=50, description="getUpdates long-poll seconds")
    max_question_chars: int = Field(default=4096, ge=1, le=40_000)

    @field_validator("api_url")
    @classmethod
    def _api_url(cls, value: str | None) -> str | None:
        # The bot token travels to api_url (in the path).
        base = token_url(value)
        return None if base is None else base + "/"

    @field_validator("secret_token")
    @classmethod
    def _secret(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        if value is not None and not _TELEGRAM_SECRET.fullmatch(value.get_secret_value()):
            raise ValueError("must be 1-256 characters A-Z, a-z, 0-9, _ or - (Bot API setWebhook)")
        token = info.data.get("bot_token")
        on = token is not None and bool(token.get_secret_value())
        # Named on this field, so the error names SEARCH2O_TELEGRAM__SECRET_TOKEN.
        if value is None and on and info.data.get("mode") == "webhook":
            raise ValueError(
                "telegram.mode webhook needs it: set it to a random 1-256 characters "
                "A-Z, a-z, 0-9, _ or - and pass the same to setWebhook"
            )
        return value

    @field_validator("bot_username")
    @classmethod
    def _username(cls, value: str | None) -> str | None:
        if value is not None and not _TELEGRAM_USERNAME.fullmatch(value.removeprefix("@")):
            raise ValueError("must be a Telegram username: 4-32 letters, digits or _")
        return value.removeprefix("@") if value is not None else None

    @property
    def configured(self) -> bool:
        """Whether the surface is on: a bot token is set."""
        return bool(self.bot_token and self.bot_token.get_secret_value())


def telegram_settings(settings: object) -> TelegramSettings:
    """Return the ``telegram`` section of the root settings (by :func:`~.settings_base.section_of`).

    Raises:
        ConfigError: the section is not installed.

    """
    return section_of(settings, "telegram", TelegramSettings)
