"""The pieces of an agent run the runner passes around: the request, the conversation, messages.

:class:`PreparedRun` is a validated run request; the conversation a run answers in, its
transcript messages (when hooks keep the conversation), the run waiting on ``ask`` and the
citations of an answer are built here for :class:`~search2o.agents.runner.AgentRunner`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from search2o.accounts import Principal
from search2o.agents.definition import AgentDefinition
from search2o.query.citations import CitationFilter, CitationRegistry
from search2o.state.model import ConversationState
from search2o.state.records import RunRecord
from search2o.storage.models import new_id

if TYPE_CHECKING:
    pass


__all__ = ["PreparedRun"]


@dataclass(frozen=True)
class PreparedRun:
    """A validated run request."""

    principal: Principal
    definition: AgentDefinition
    message: str
    conversation_id: str | None
    inputs: dict[str, Any]
    validation: bool = False


def _cite(text: str, registry: CitationRegistry) -> tuple[str, list[dict[str, Any]]]:
    """Renumber the ``[n]`` markers of ``text`` by first use; return it and the citations.

    Only when the run handed sources to a model (``llm.passages``); then numbers no source
    has are dropped (:class:`CitationFilter`). Otherwise the text is left as it is.
    """
    if not len(registry):
        return text, []
    citer = CitationFilter(registry)
    head, first = citer.feed(text)
    tail, rest = citer.finish()
    return (head + tail).strip(), [c.to_dict() for c in [*first, *rest]]


@dataclass(frozen=True)
class _Opened:
    """The conversation a run answers in; ``question`` is set when the hooks keep it."""

    id: str
    message_id: str
    created: bool
    question: dict[str, Any] | None = None


def _transcript_message(
    role: str, text: str, agent: str, *, citations: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Return a transcript message (``ConversationState.transcript``'s form)."""
    return {
        "id": new_id(),
        "role": role,
        "text": text,
        "citations": citations or [],
        "status": "complete",
        "agent": agent,
        "searched": bool(citations),
        "created_at": _now(),
    }


def _waiting_run(state: ConversationState) -> RunRecord | None:
    """Return the conversation's run that waits on ``ask``, if any (at most one)."""
    for record in reversed(state.runs):
        if record.status == "paused" and record.pause is not None:
            return record
    return None


def _now() -> str:
    return datetime.now(UTC).isoformat()
