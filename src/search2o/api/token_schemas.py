"""Bodies of ``/v1/me/tokens``: a user's own device tokens."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from search2o.wire.fields import text_field

__all__ = ["OwnTokenCreate", "OwnTokenCreated", "OwnTokenListPublic", "OwnTokenPublic"]


class OwnTokenCreate(BaseModel):
    """``POST /v1/me/tokens``: what the user calls the device."""

    model_config = ConfigDict(extra="forbid")

    name: StrictStr = text_field(
        "e.g. 'work laptop browser extension'; 1..100 characters, no control characters",
        max_length=100,
    )


class OwnTokenPublic(BaseModel):
    """One of the caller's tokens (never its secret)."""

    id: int
    name: str
    prefix: str = Field(description="the token's first 12 characters, to recognise it")
    created_at: datetime
    last_used_at: datetime | None
    revoked: bool
    local_only: bool = Field(description="works only while the server runs in local mode")


class OwnTokenCreated(OwnTokenPublic):
    """A token just created, with its secret: shown this once, stored only as a hash."""

    token: str = Field(description="send as `Authorization: Bearer <token>`")


class OwnTokenListPublic(BaseModel):
    """The caller's tokens, newest first."""

    tokens: list[OwnTokenPublic]
