"""``GET /v1/conversations/{id}/waiting``: the agent whose question waits for the caller.

An agent run that reached ``ask`` pauses; the next message of the conversation answers it
(:meth:`~search2o.agents.runner.AgentRunner.answering_agent`). A client shows the question as
waiting after a reload by asking here; nothing is written.
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from search2o.api.deps import CurrentUser, RuntimeDep
from search2o.api.jsonbody import StrictJsonRoute
from search2o.api.openapi import error_responses
from search2o.api.params import ConversationId

__all__ = ["WaitingPublic", "router"]

router = APIRouter(prefix="/v1", tags=["conversations"], route_class=StrictJsonRoute)


class WaitingPublic(BaseModel):
    """The agent waiting on an answer in a conversation, if any."""

    agent: str | None = Field(description="the agent whose `ask` waits; null: none waits")


@router.get(
    "/conversations/{conversation_id}/waiting",
    responses=error_responses(401, 404, 422, 500, 502, 503),
)
def waiting(
    conversation_id: ConversationId, user: CurrentUser, runtime: RuntimeDep
) -> WaitingPublic:
    """Return the agent whose question waits for the caller's next message (404 if missing)."""
    agent = runtime.agent_runner.answering_agent(user, conversation_id, waiting_only=True)
    return WaitingPublic(agent=agent)
