"""The ``connectors`` settings section: how every source is synced (docs/connectors.md)."""

from __future__ import annotations

import os

from pydantic import BaseModel, ConfigDict, Field, field_validator

from search2o.settings_base import section_of

__all__ = ["ConnectorsSettings", "connectors_settings"]


class ConnectorsSettings(BaseModel):
    """Rules shared by every source's sync (``SEARCH2O_CONNECTORS__*``, ``[connectors]``).

    ``max_delete_share``: a sync that would delete more than this share of a source's documents
    (and more than ``mass_delete_floor`` documents: removing 1 of 4 files is an edit, not a
    mass deletion) stops before deleting anything and waits for ``sources sync NAME
    --allow-mass-delete``.
    ``batch_size`` documents are fetched and written between two checkpoints;
    ``fetch_concurrency`` fetches of one source run at once, at most ``requests_per_s`` a
    second. A transient fault (a reset, a 5xx) is retried ``retries`` times with exponential
    backoff and full jitter (AWS Architecture Blog, "Exponential Backoff And Jitter"); a
    ``Retry-After`` up to ``max_inline_wait_s`` is waited out, a longer one checkpoints the sync
    and reschedules it. ``lease_s``: how long a sync's claim on its source lasts without a
    checkpoint (a dead host's sync is taken over after it). Every ``tick_s`` seconds, ``serve``
    and ``worker`` start the syncs that are due. ``watch``: while ``serve`` runs, a change in a
    ``folder`` source starts its sync after ``watch_debounce_ms`` of quiet. ``folder_roots``:
    when set, a ``folder`` source must lie under one of these folders; admins add folder sources
    over the API only under them (a folder source reads every file of its folder into the
    Knowledge Store), while the host's command line may name any folder when it is empty.
    ``fan_out``: a sync's batches become ``sources.batch`` jobs that every ``serve`` and
    ``worker`` process shares, so more workers fetch and embed a source faster (the sync runs
    batches too while it waits; :mod:`search2o.connectors.fanout`). ``requests_per_s`` and
    ``fetch_concurrency`` then hold per process running batches.
    """

    model_config = ConfigDict(extra="forbid")

    max_delete_share: float = Field(default=0.2, ge=0.0, le=1.0)
    mass_delete_floor: int = Field(default=10, ge=0, le=1_000_000)
    batch_size: int = Field(default=32, ge=1, le=1000)
    fetch_concurrency: int = Field(default=4, ge=1, le=32)
    requests_per_s: float = Field(default=20.0, gt=0.0, le=10_000.0)
    retries: int = Field(default=4, ge=0, le=10)
    max_inline_wait_s: float = Field(default=30.0, ge=0.0, le=3600.0)
    lease_s: int = Field(default=600, ge=10, le=86_400)
    tick_s: float = Field(default=60.0, ge=1.0, le=86_400.0)
    watch: bool = True
    watch_debounce_ms: int = Field(default=1000, ge=50, le=60_000)
    folder_roots: list[str] = Field(default_factory=list, max_length=100)
    fan_out: bool = Field(
        default=False, description="run a sync's batches as jobs every worker process shares"
    )

    @field_validator("folder_roots")
    @classmethod
    def _absolute(cls, value: list[str]) -> list[str]:
        for root in value:
            if not os.path.isabs(root):
                raise ValueError(f"{root!r} must be an absolute path")
        return value


def connectors_settings(settings: object) -> ConnectorsSettings:
    """Return the ``connectors`` section of the root settings.

    Raises:
        ConfigError: the section is not installed.

    """
    return section_of(settings, "connectors", ConnectorsSettings)
