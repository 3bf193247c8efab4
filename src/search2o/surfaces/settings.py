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

from search2o.settings_base import edit_pause, token_url

__all__ = ["MessengerSettings"]


class MessengerSettings(BaseModel):
    """What every messenger section has (Slack, Telegram, Mattermost), declared once.

    Answers are jobs that call this server's API at ``server_url`` (default: this machine's
    own server, :func:`search2o.surfaces.connect.server_url`) with the surface token
    ``service_token`` (``search2o surfaces token <surface>``), never the engines; an answer is
    edited at most every ``update_every_s`` seconds (each section has its own default,
    redeclared with :func:`~search2o.settings_base.edit_pause`); ``unlinked`` says what an
    unlinked user gets: the
    shared-channel scope and a one-line hint how to link (``channel``), or only the hint
    (``link_only``). The environment names stay each section's:
    ``SEARCH2O_<SECTION>__SERVER_URL`` and so on.
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
