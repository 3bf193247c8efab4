"""What a sync did: its counts (checkpointed, shown as progress) and its report."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Progress", "SyncCounts", "SyncReport"]

_MAX_FAILURES_KEPT = 20


@dataclass
class SyncCounts:
    """What one sync did; ``embedded`` counts chunks that went through the model.

    ``seconds`` is the sync's running time (across a resume), so ``documents_per_s`` is its
    rate.
    """

    listed: int = 0
    fetched: int = 0
    added: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0
    failed: int = 0
    embedded: int = 0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)

    def line(self) -> str:
        """Return the summary line ``N added, N updated, N deleted, N unchanged, N failed``."""
        return (
            f"{self.added} added, {self.updated} updated, {self.deleted} deleted, "
            f"{self.unchanged} unchanged, {self.failed} failed"
        )

    def fail(self, key: str, reason: str) -> None:
        """Count one failed document and keep its reason (the first few)."""
        self.failed += 1
        if len(self.failures) < _MAX_FAILURES_KEPT:
            self.failures.append(f"{key}: {reason}"[:400])

    def add(self, other: SyncCounts) -> None:
        """Add ``other``'s document counts (a batch run elsewhere) and its first failures."""
        for name in ("fetched", "added", "updated", "unchanged", "failed", "embedded"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        room = _MAX_FAILURES_KEPT - len(self.failures)
        self.failures.extend(other.failures[: max(room, 0)])

    @property
    def documents_per_s(self) -> float:
        """Documents fetched per second of the sync so far."""
        return self.fetched / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        """Return the counts as a JSON object, with ``documents_per_s``."""
        return {**asdict(self), "documents_per_s": round(self.documents_per_s, 2)}

    @classmethod
    def of(cls, data: dict[str, Any] | None) -> SyncCounts:
        """Rebuild counts from :meth:`to_json` (a checkpoint); unknown keys are ignored."""
        known = {k: v for k, v in (data or {}).items() if k in cls.__dataclass_fields__}
        return cls(**known)


@dataclass(frozen=True)
class SyncReport:
    """The outcome of one sync.

    Attributes:
        source: its name.
        counts: what it did.
        complete: its listing (or changes feed) reached the end, so missing keys were pruned.
        error: why it did not succeed fully (incomplete listing, mass delete stop, rejected
            credentials, a wait), or ``None``.
        status: the source's status after it: ``idle``, ``blocked`` or ``stopped``.
        seconds: wall time of this run.
        resumed: it continued a sync that had died.

    """

    source: str
    counts: SyncCounts
    complete: bool
    error: str | None
    status: str
    seconds: float
    resumed: bool = False

    @property
    def documents_per_s(self) -> float:
        """Documents fetched and written per second."""
        return self.counts.fetched / self.seconds if self.seconds > 0 else 0.0


Progress = Callable[[str, SyncCounts, int | None], None]
"""``(phase, counts, total)``: called as a sync lists, fetches and prunes (CLI progress)."""
