"""The ``jobs`` settings section: the job queue and its transport (docs/jobs.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    model_validator,
)

__all__ = ["JobSettings"]


class JobSettings(BaseModel):
    """The job queue (:mod:`search2o.jobs`, docs/jobs.md): its transport, leases and retries.

    ``backend``: ``sqlite`` (embedded default) is Huey's ``SqliteHuey`` on ``sqlite_path``
    (default ``<data_dir>/jobs.db``), one host only; ``postgres`` is Huey's ``PostgresHuey`` on
    the PostgreSQL of ``database_url`` (``FOR UPDATE SKIP LOCKED`` and ``LISTEN/NOTIFY``);
    ``redis`` is ``RedisHuey`` on ``redis_url``. Whatever the transport, every job has a row in
    the ``jobs`` table of our database, which decides what runs: delivery is at-least-once.

    Times are in seconds. A worker holds a job's lease for ``lease_s`` and renews it every
    ``lease_s / 3`` while the handler runs; a lease that expires (the worker died) is taken
    back by the sweeper, which runs every ``sweep_interval_s`` in every consumer. A failed
    attempt is retried after ``min(backoff_max_s, backoff_base_s * 2**(attempt - 1))`` seconds
    with equal jitter (half fixed, half random; Brooker, "Exponential Backoff And Jitter", AWS
    Architecture Blog, 2015), until ``max_attempts``.
    """

    model_config = ConfigDict(extra="forbid")

    backend: Literal["sqlite", "postgres", "redis"] = Field(
        default="sqlite", description="transport: sqlite (one host), postgres or redis"
    )
    sqlite_path: Path | None = Field(
        default=None, description="sqlite: the queue file (default <data_dir>/jobs.db)"
    )
    redis_url: SecretStr | None = Field(
        default=None, description="redis: e.g. redis://:password@redis.internal:6379/0"
    )
    queue_name: str = Field(
        default="search2o",
        pattern=r"^[A-Za-z0-9_]{1,40}$",
        description="name of the queue in the transport (letters, digits, _)",
    )
    server_workers: int = Field(
        default=2, ge=0, le=64, description="consumer threads inside `search2o serve` (0: none)"
    )
    workers: int = Field(
        default=2, ge=1, le=64, description="consumer threads of `search2o worker`"
    )
    lease_s: float = Field(default=60.0, ge=0.5, le=3600, description="a running job's lease")
    max_attempts: int = Field(default=5, ge=1, le=100, description="attempts before `failed`")
    backoff_base_s: float = Field(default=2.0, gt=0, le=3600, description="first retry delay")
    backoff_max_s: float = Field(default=600.0, gt=0, le=86_400, description="longest delay")
    tick_s: int = Field(
        default=10, ge=1, le=60, description="how often each consumer fires periodic jobs"
    )
    sweep_interval_s: float = Field(
        default=30.0, gt=0, le=3600, description="how often a consumer sweeps the ledger"
    )
    lost_after_s: float = Field(
        default=120.0,
        gt=0,
        le=86_400,
        description="a due job nobody claimed this long has lost its message: resent",
    )
    keep_finished_days: float = Field(
        default=7.0, ge=0, le=3650, description="done/failed jobs are deleted after (0: kept)"
    )
    poll_max_s: float = Field(
        default=0.2,
        gt=0,
        le=10,
        description="sqlite: longest wait between two looks at an empty queue",
    )
    shutdown_timeout_s: float = Field(
        default=30.0,
        ge=0,
        le=3600,
        description="on stop: wait this long for running jobs, then release their leases",
    )
    max_payload_bytes: int = Field(default=16_384, ge=256, le=1_048_576)
    max_result_bytes: int = Field(default=65_536, ge=256, le=16_777_216)
    max_error_chars: int = Field(default=2000, ge=100, le=100_000)

    @model_validator(mode="after")
    def _consistent(self) -> JobSettings:
        if self.backoff_max_s < self.backoff_base_s:
            raise ValueError("backoff_max_s must be at least backoff_base_s")
        if self.backend == "redis" and not (
            self.redis_url and self.redis_url.get_secret_value().strip()
        ):
            raise ValueError(
                "jobs.backend redis needs jobs.redis_url (set SEARCH2O_JOBS__REDIS_URL, e.g. "
                "redis://localhost:6379/0)"
            )
        if self.redis_url is not None and not self.redis_url.get_secret_value().startswith(
            ("redis://", "rediss://", "unix://")
        ):
            raise ValueError("redis_url must start with redis://, rediss:// or unix://")
        return self
