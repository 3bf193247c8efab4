"""Response bodies of the agent registry endpoints (``/v1/agents``).

The request body of ``PUT /v1/agents/{name}`` is the definition document itself (JSON, or YAML
with ``Content-Type: application/yaml``), checked by
:func:`search2o.agents.definition.parse_definition`, so it has no model here.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from search2o.wire.fields import text_field

__all__ = ["AgentDeletedPublic", "AgentListPublic", "AgentPutPublic", "AgentSummaryPublic"]


class AgentPutPublic(BaseModel):
    """``PUT /v1/agents/{name}``: the stored definition, summed up."""

    name: str = Field(description="the agent's name")
    description: str = Field(description="what the agent does")
    created: bool = Field(description="true when the name was new, false when it was replaced")
    memory_labels: list[str] = Field(
        description="the distinct memory labels its memory commands use, in order"
    )
    functions: list[str] = Field(description="its function names, in order (runs start at main)")


class AgentSummaryPublic(BaseModel):
    """One stored agent as listed."""

    name: str = Field(description="the agent's name")
    description: str = Field(description="what the agent does")


class AgentListPublic(BaseModel):
    """Every stored agent, ordered by name."""

    agents: list[AgentSummaryPublic]


class AgentDeletedPublic(BaseModel):
    """``DELETE /v1/agents/{name}``: what was deleted."""

    deleted: str = Field(description="the deleted agent's name")
    memories_deleted: int = Field(
        description="how many memories the agent had stored, for every user, all deleted"
    )


class AgentValidateRequest(BaseModel):
    """``POST /v1/agents/{name}/validate``: the message and inputs of a validation run."""

    model_config = ConfigDict(extra="forbid")

    query: StrictStr = text_field("the user's message; not empty, at most chat.max_message_chars")
    inputs: dict[str, Any] | None = Field(default=None, description="the agent's inputs")
    conversation_id: StrictStr | None = Field(
        default=None, max_length=64, description="continue a validation conversation"
    )
