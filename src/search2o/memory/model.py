"""What memory operations return: search hits, listed memories, the outcome of applying a run.

Plain frozen dataclasses; :meth:`MemoryHit.to_dict` is the shape the ``memory`` command hands
to the agent (``{"agentName", "label", "text", "createdAt"}``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

__all__ = ["MemoryHit", "MemoryOutcome", "MemoryRecord", "Rejection"]


@dataclass(frozen=True)
class MemoryHit:
    """One memory that matched a query.

    Attributes:
        agent: the name of the agent that stored it.
        label: its label.
        text: the text, exactly as stored.
        created_at: when it was (last) stored, aware UTC.
        score: cosine similarity of query and memory, in [-1, 1]; at least ``memory.min_score``.

    """

    agent: str
    label: str
    text: str
    created_at: datetime
    score: float

    def to_dict(self) -> dict[str, str]:
        """Return the ``memory`` command's result item.

        Returns:
            ``{"agentName": str, "label": str, "text": str, "createdAt": ISO 8601 UTC}``.

        """
        return {
            "agentName": self.agent,
            "label": self.label,
            "text": self.text,
            "createdAt": self.created_at.isoformat(),
        }


@dataclass(frozen=True)
class MemoryRecord:
    """One memory as listed to its owner (``GET /v1/memories``, ``search2o memory list``).

    ``last_retrieved_at`` is ``None`` until an agent's query returned it.
    """

    agent: str
    label: str
    text: str
    created_at: datetime
    last_retrieved_at: datetime | None


@dataclass(frozen=True)
class Rejection:
    """A store refused for one label only (the command's other stores still apply).

    Attributes:
        agent: the storing agent.
        label: the label whose text was refused.
        reason: the rule, e.g. ``"is 40000 characters; at most 4000 (memory.max_text_chars)"``.

    """

    agent: str
    label: str
    reason: str


@dataclass(frozen=True)
class MemoryOutcome:
    """What applying a run's memory changes did; each entry is ``(agent, label)``.

    Attributes:
        applied: ``False`` for a validation run (nothing is ever written).
        stored: labels that did not exist and were stored.
        replaced: labels whose earlier memory was replaced (never evicts).
        deleted: labels deleted (a delete of a missing label is not listed).
        evicted: memories removed to keep the user within the plan's bound, least recently
            retrieved first.
        rejected: stores refused (too long, empty), with the reason.

    """

    applied: bool = True
    stored: tuple[tuple[str, str], ...] = ()
    replaced: tuple[tuple[str, str], ...] = ()
    deleted: tuple[tuple[str, str], ...] = ()
    evicted: tuple[tuple[str, str], ...] = ()
    rejected: tuple[Rejection, ...] = field(default=())
