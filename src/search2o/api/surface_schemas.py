"""Request and response bodies of ``/v1/surfaces``: link codes, identities, threads.

The name rules (surface, workspace, ids) are :mod:`search2o.surfaces.names`; the patterns and
lengths here only document them, the code enforces them with errors naming the field.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

from search2o.surfaces.identity import DEFAULT_CODE_MINUTES, MAX_CODE_MINUTES, Identity
from search2o.surfaces.names import (
    ID_PATTERN,
    MAX_ID_CHARS,
    MAX_SURFACE_CHARS,
    MAX_WORKSPACE_CHARS,
    SURFACE_PATTERN,
    WORKSPACE_PATTERN,
)
from search2o.surfaces.threads import ThreadLink

__all__ = [
    "ExternalId",
    "IdentityPublic",
    "LinkCodePublic",
    "LinkCodeRequest",
    "LinkRequest",
    "ThreadPublic",
    "ThreadRequest",
    "Workspace",
]


def _rule(pattern: str, max_chars: int) -> dict[str, Any]:
    return {"pattern": pattern, "minLength": 1, "maxLength": max_chars}


_WORKSPACE_RULE = _rule(WORKSPACE_PATTERN, MAX_WORKSPACE_CHARS)
_ID_RULE = _rule(ID_PATTERN, MAX_ID_CHARS)

Workspace = Annotated[
    str,
    Path(
        description="the platform's workspace/team id, e.g. T0123ABCD",
        json_schema_extra=_WORKSPACE_RULE,
    ),
]
ExternalId = Annotated[
    str,
    Path(description="the platform's id of a user, channel or thread", json_schema_extra=_ID_RULE),
]


class LinkCodeRequest(BaseModel):
    """``POST /v1/surfaces/link-codes``: mint a one-time code to link an external account."""

    model_config = ConfigDict(extra="forbid")

    surface: StrictStr | None = Field(
        default=None,
        description="the only surface the code links on, e.g. slack; null for any",
        json_schema_extra=_rule(SURFACE_PATTERN, MAX_SURFACE_CHARS),
    )
    minutes: StrictInt = Field(
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

    @classmethod
    def of(cls, identity: Identity) -> IdentityPublic:
        """Describe a link."""
        return cls(
            surface=identity.surface,
            workspace=identity.workspace,
            external_user_id=identity.external_user_id,
            email=identity.email,
            linked_by=identity.linked_by,
            created_at=identity.created_at,
        )


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

    @classmethod
    def of(cls, link: ThreadLink) -> ThreadPublic:
        """Describe a mapping."""
        return cls(
            surface=link.surface,
            workspace=link.workspace,
            channel=link.channel,
            thread=link.thread,
            conversation_id=link.conversation_id,
            created=link.created,
        )
