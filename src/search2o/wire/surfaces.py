"""Request and response bodies of ``/v1/surfaces``: link codes, identities, threads.

The name rules (surface, workspace, ids) are :mod:`search2o.wire.names`; the patterns and
lengths here only document them, the code enforces them with errors naming the field.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from search2o.wire.fields import JsonInt
from search2o.wire.names import (
    DEFAULT_CODE_MINUTES,
    ID_PATTERN,
    MAX_CODE_MINUTES,
    MAX_ID_CHARS,
    MAX_SURFACE_CHARS,
    MAX_WORKSPACE_CHARS,
    SURFACE_PATTERN,
    WORKSPACE_PATTERN,
    json_rule,
)

_WORKSPACE_RULE = json_rule(WORKSPACE_PATTERN, MAX_WORKSPACE_CHARS)
_ID_RULE = json_rule(ID_PATTERN, MAX_ID_CHARS)

__all__ = [
    "IdentityPublic",
    "LinkCodePublic",
    "LinkCodeRequest",
    "LinkRequest",
    "ThreadPublic",
    "ThreadRequest",
]


class LinkCodeRequest(BaseModel):
    """``POST /v1/surfaces/link-codes``: mint a one-time code to link an external account."""

    model_config = ConfigDict(extra="forbid")

    surface: StrictStr | None = Field(
        default=None,
        description="the only surface the code links on, e.g. slack; null for any",
        json_schema_extra=json_rule(SURFACE_PATTERN, MAX_SURFACE_CHARS),
    )
    minutes: JsonInt = Field(
        default=DEFAULT_CODE_MINUTES,
        ge=1,
        le=MAX_CODE_MINUTES,
        description="how long the code stays valid",
    )


class LinkCodePublic(BaseModel):
    """A link code, shown once (only its SHA-256 is stored)."""

    code: str = Field(description="XXXX-XXXX-XXX; case, hyphens and spaces do not matter")
    surface: str | None
    expires_at: datetime


class LinkRequest(BaseModel):
    """``POST /v1/surfaces/identities``: link an external account by code or verified email."""

    model_config = ConfigDict(extra="forbid")

    workspace: StrictStr = Field(
        description="the platform's workspace/team id", json_schema_extra=_WORKSPACE_RULE
    )
    external_user_id: StrictStr = Field(
        description="the platform's id of the user", json_schema_extra=_ID_RULE
    )
    code: StrictStr | None = Field(
        default=None,
        max_length=64,
        description="the link code the user typed (give this or `email`)",
    )
    email: StrictStr | None = Field(
        default=None,
        max_length=320,
        description="the email the platform verified for this user (give this or `code`)",
    )


class IdentityPublic(BaseModel):
    """An external account and the user it is linked to."""

    surface: str
    workspace: str
    external_user_id: str
    email: str = Field(description="the linked user's email")
    linked_by: str = Field(description="email or code")
    created_at: datetime


class ThreadRequest(BaseModel):
    """``PUT /v1/surfaces/threads/...``: the conversation a thread's first message started."""

    model_config = ConfigDict(extra="forbid")

    conversation_id: StrictStr = Field(
        max_length=64, description="from the first event (`conversation`) of the answer"
    )


class ThreadPublic(BaseModel):
    """A thread and the conversation it continues."""

    surface: str
    workspace: str
    channel: str
    thread: str
    conversation_id: str
    created: bool = Field(description="false: the thread was mapped already (to this id)")
