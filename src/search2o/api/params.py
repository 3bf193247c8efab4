"""Parameters of the HTTP API with their bounds, and texts several operations share.

Path and query parameters are FastAPI ``Path``/``Query``; the texts of bodies and forms
(:data:`GroupName`, :data:`EmailText`, :data:`UploadPath`) are pydantic annotations.

The bounds are the database's: an id or offset fits PostgreSQL's ``integer``
(:data:`~search2o.wire.fields.INT32_MAX`); names and ids follow :mod:`search2o.wire.names`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query
from pydantic import Field, StrictStr

from search2o.api.uploads import MAX_NAME_CHARS
from search2o.wire.fields import (
    EMAIL_PATTERN,
    GROUP_PATTERN,
    INT32_MAX,
    NAME_PATTERN,
    PATH_PATTERN,
)
from search2o.wire.names import (
    ID_PATTERN,
    MAX_ID_CHARS,
    MAX_WORKSPACE_CHARS,
    WORKSPACE_PATTERN,
    json_rule,
)

__all__ = [
    "AgentName",
    "ConversationId",
    "DocumentId",
    "EmailText",
    "ExternalId",
    "GroupName",
    "MemoryLabel",
    "MessageId",
    "Offset",
    "UploadPath",
    "UserEmail",
    "Workspace",
]

GroupName = Annotated[StrictStr, Field(json_schema_extra=json_rule(GROUP_PATTERN, 100))]
"""A group name as sent (checked by :func:`search2o.accounts.normalize_groups`)."""

EmailText = Annotated[StrictStr, Field(json_schema_extra=json_rule(EMAIL_PATTERN, 320))]
"""An email as sent (checked by :func:`search2o.accounts.normalize_email`)."""

UploadPath = Annotated[StrictStr, Field(json_schema_extra=json_rule(PATH_PATTERN, MAX_NAME_CHARS))]
"""An uploaded file's identity (checked by :func:`search2o.api.uploads.check_name`)."""

DocumentId = Annotated[int, Path(ge=1, le=INT32_MAX, description="a document id")]
Offset = Annotated[int, Query(ge=0, le=INT32_MAX, description="rows to skip, 0 or more")]
ConversationId = Annotated[str, Path(max_length=64, description="a conversation id")]
MessageId = Annotated[str, Path(max_length=64, description="a message id")]
AgentName = Annotated[
    str,
    Path(
        max_length=100,
        description="an agent's name",
        json_schema_extra=json_rule(NAME_PATTERN, 100),
    ),
]
UserEmail = Annotated[
    str,
    Path(
        max_length=320,
        description="the user's email",
        json_schema_extra=json_rule(EMAIL_PATTERN, 320),
    ),
]
MemoryLabel = Annotated[
    str,
    Path(
        max_length=64, description="a memory's label", json_schema_extra=json_rule(NAME_PATTERN, 64)
    ),
]


_WORKSPACE_RULE = json_rule(WORKSPACE_PATTERN, MAX_WORKSPACE_CHARS)
_ID_RULE = json_rule(ID_PATTERN, MAX_ID_CHARS)

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
