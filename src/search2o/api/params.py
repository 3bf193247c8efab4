"""Path and query parameters of the HTTP API, with their bounds (FastAPI ``Path``/``Query``).

The bounds are the database's: an id or offset fits PostgreSQL's ``integer``
(:data:`~search2o.wire.fields.INT32_MAX`); names and ids follow :mod:`search2o.wire.names`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from search2o.wire.fields import INT32_MAX
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
    "ExternalId",
    "MemoryLabel",
    "MessageId",
    "Offset",
    "Workspace",
]

DocumentId = Annotated[int, Path(ge=1, le=INT32_MAX, description="a document id")]
Offset = Annotated[int, Query(ge=0, le=INT32_MAX, description="rows to skip, 0 or more")]
ConversationId = Annotated[str, Path(max_length=64, description="a conversation id")]
MessageId = Annotated[str, Path(max_length=64, description="a message id")]
AgentName = Annotated[str, Path(max_length=100, description="an agent's name")]
MemoryLabel = Annotated[str, Path(max_length=64, description="a memory's label")]


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
