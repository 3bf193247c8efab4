"""The ``slack`` settings section (docs/slack.md, docs/configuration.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    ConfigDict,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
)

from search2o.extensions import Extra
from search2o.settings_base import section_of, token_url
from search2o.surfaces.settings import MessengerSettings

__all__ = ["EXTRA", "SlackSettings", "slack_settings"]


class SlackSettings(MessengerSettings):
    """The Slack surface (:mod:`search2o.surfaces.slack`, docs/slack.md).

    Slack is on when ``bot_token`` and ``signing_secret`` are set (:attr:`configured`). In
    ``http`` mode Slack posts to ``/slack/events`` and ``/slack/interactions`` of this server;
    in ``socket`` mode (the default: no inbound port) ``search2o slack socket`` holds a Socket
    Mode connection with ``app_token`` (``xapp-``). Answers are jobs that call this server's API
    at ``server_url`` with the surface token ``service_token`` (``search2o surfaces token
    slack``), never the engines. ``api_url`` is the Slack Web API base (a test points it at a
    fake). ``update_budget`` ``chat.update`` calls per ``update_window_s`` seconds and per
    workspace bound the edits of answers in flight (Slack's ``chat.update`` is a Tier 3 method,
    about 50 a minute; Slack API docs, "Rate limits"); intermediate edits beyond it are skipped,
    the final one waits for room.
    """

    model_config = ConfigDict(extra="forbid")

    bot_token: SecretStr | None = Field(default=None, description="xoxb- bot token")
    signing_secret: SecretStr | None = Field(default=None, description="the app's signing secret")
    app_token: SecretStr | None = Field(default=None, description="xapp- token (Socket Mode)")
    mode: Literal["socket", "http"] = Field(default="socket", description="socket or http")
    api_url: str = Field(default="https://slack.com/api/", description="Slack Web API base URL")
    update_budget: int = Field(default=40, ge=1, le=1000, description="chat.update calls")
    update_window_s: float = Field(default=60.0, gt=0, le=3600, description="per this window")
    stream: bool = Field(default=True, description="native streaming (chat.startStream)")
    allow_bots: bool = Field(default=False, description="answer other bots' messages")
    agent: str | None = Field(
        default=None, min_length=1, max_length=100, description="the agent new threads start"
    )
    max_question_chars: int = Field(default=8000, ge=1, le=40_000)

    @field_validator("api_url")
    @classmethod
    def _api_url(cls, value: str | None) -> str | None:
        # The bot token travels to api_url.
        base = token_url(value)
        return None if base is None else base + "/"

    @field_validator("bot_token", "app_token")
    @classmethod
    def _token_kind(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        # Slack's token prefixes (Slack API docs, "Token types"): a bot token is xoxb-, an
        # app-level token xapp-. Swapped, every call fails with a vague not_allowed_token_type.
        if value is None:
            return value
        wanted, other = ("xoxb-", "xapp-") if info.field_name == "bot_token" else ("xapp-", "xoxb-")
        if value.get_secret_value().startswith(other):
            theirs = "app_token" if info.field_name == "bot_token" else "bot_token"
            raise ValueError(
                f"holds an {other} token, which belongs in slack.{theirs}: the two are swapped "
                f"(slack.{info.field_name} takes the {wanted} token)"
            )
        return value

    @property
    def configured(self) -> bool:
        """Whether the surface is on: a bot token and a signing secret are set."""
        return bool(
            self.bot_token
            and self.bot_token.get_secret_value()
            and self.signing_secret
            and self.signing_secret.get_secret_value()
        )


def slack_settings(settings: object) -> SlackSettings:
    """Return the ``slack`` section of the root settings (by :func:`~.settings_base.section_of`).

    Raises:
        ConfigError: the section is not installed.

    """
    return section_of(settings, "slack", SlackSettings)


def _asked_by(settings: object) -> str | None:
    """Return the setting that turns the surface on (both tokens set), or ``None``."""
    return "slack.bot_token" if slack_settings(settings).configured else None


EXTRA = Extra("slack", ("slack_sdk",), "the Slack surface", _asked_by)
"""Slack's SDK (the Web API and Socket Mode clients), needed once the surface is configured."""
