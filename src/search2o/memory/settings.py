"""The ``memory`` settings section: long-term, per-user facts (docs/memory.md)."""

from __future__ import annotations

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
)

__all__ = ["MemorySettings"]


_MEMORY_LIMIT_DEFAULTS: dict[str, int] = {"free": 100, "paid": 500}


class MemorySettings(BaseModel):
    """Long-term memory of agents (:mod:`search2o.memory`, docs/memory.md).

    ``limits``: memories one user holds, per plan (a plan left out keeps its default); storing a
    new label at the bound evicts the least recently retrieved. ``min_score``: the relevance
    threshold on a memory's score (cosine similarity of query and memory plus
    ``lexical_weight`` x its BM25 share of the query, plus a time bonus for questions asking
    when, :func:`search2o.memory.ranking.hybrid_scores`),
    calibrated on the labelled set in ``tests/memory/labelled.py`` with the built-in embedding
    model: the highest threshold that still finds every relevant pair (another model needs its
    own calibration); ``lexical_weight`` 0 ranks by meaning
    alone. ``cache_mb``: the bound of each process's cache of users' vectors and term hashes
    (:mod:`search2o.memory.cache`, about 0.85 MB per user at 500 memories); 0 reads them from
    the database on every search.
    """

    model_config = ConfigDict(extra="forbid")

    limits: dict[str, int] = Field(
        default_factory=lambda: dict(_MEMORY_LIMIT_DEFAULTS),
        description="plan (free, paid) -> most memories a user holds",
    )
    max_text_chars: int = Field(
        default=4000, ge=1, le=1_000_000, description="longer texts are rejected for that label"
    )
    max_query_chars: int = Field(default=2000, ge=1, le=100_000)
    max_limit: int = Field(default=100, ge=1, le=1000, description="most matches one query returns")
    min_score: float = Field(
        default=0.43, ge=-1, le=2, description="relevance threshold (cosine + lexical)"
    )
    lexical_weight: float = Field(
        default=1.0, ge=0, le=1, description="weight of the BM25 share added to the cosine"
    )
    cache_mb: float = Field(
        default=64.0,
        ge=0,
        le=65536,
        allow_inf_nan=False,
        description="per process: users' memory vectors kept for search (MB); 0 = off",
    )

    @field_validator("limits")
    @classmethod
    def _known_plans(cls, limits: dict[str, int]) -> dict[str, int]:
        """Refuse unknown plans and bounds below 1; a plan left out keeps its default."""
        for plan, value in limits.items():
            if plan not in _MEMORY_LIMIT_DEFAULTS:
                raise ValueError(
                    f"limits has unknown plan {plan!r} (plans: free, paid); e.g. "
                    "SEARCH2O_MEMORY__LIMITS__FREE=50 or limits = {free = 50}"
                )
            if value < 1:
                raise ValueError(f"limits[{plan!r}] must be at least 1")
        return {**_MEMORY_LIMIT_DEFAULTS, **limits}

    def limit_for(self, plan: str) -> int:
        """Most memories a user on ``plan`` holds (an unknown plan gets the free bound)."""
        return self.limits.get(plan, self.limits["free"])
