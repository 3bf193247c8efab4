"""The registry of job kinds: which handler runs a kind, how often a periodic kind runs.

A handler is a plain function ``(ctx, payload) -> result``: ``ctx`` is the
:class:`~search2o.jobs.context.JobContext` of the attempt (job id, attempt number, progress
reporting, lease), ``payload`` the JSON object given at enqueue, ``result`` any JSON value (or
``None``) stored with the job when it is ``done``.

**Handlers must be idempotent.** Delivery is at-least-once: a worker can die after the effect
and before the ledger records ``done``, and the job then runs again. Key every effect by
something the job carries (its id, or the ids in its payload) so a second run finds the work
done: ``INSERT ... ON CONFLICT DO NOTHING``, "delete what is expired", "compact to version N".

An exception fails the attempt: :class:`~search2o.errors.InputError` (and subclasses) fails
the job at once (retrying cannot fix its input); any other is retried with backoff until
``max_attempts``.

**Final-failure hooks.** A kind may register ``on_final_failure(payload, reason)``, called
once when a job of it is given up for good: its last attempt raised (or raised an
``InputError``), or the worker running its last attempt died and the sweeper found the lease
expired. ``reason`` is the error stored with the job. The hook runs as a short job of its own,
``jobs.final_failure`` (payload ``{"job": id}``), inserted by the ledger in the same
transaction that fails the job, rather than inside the sweeper or the failing worker:

* that transaction happens once however many workers and sweepers race (each is a
  conditional update), so the hook job exists once — and a crash right after the commit
  cannot lose it, where a call made by the sweeper after its commit would be lost with it;
* the hook gets a lease, a heartbeat and a worker of its own, so a slow messenger never holds
  up the sweep of other jobs, and its time is bounded by its HTTP calls' timeouts and
  :data:`~search2o.jobs.ledger.HOOK_ATTEMPTS` (3) attempts: a hook that keeps failing is
  logged with each attempt and given up, never retried forever, and has no hook itself.

Delivery is at least once, so a hook must be idempotent too (e.g. "post the error unless the
record says it was posted").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from search2o.errors import ConfigError
from search2o.jobs import ledger
from search2o.jobs.ledger import FINAL_FAILURE, HOOK_ATTEMPTS

if TYPE_CHECKING:
    from search2o.jobs.context import JobContext

__all__ = ["FinalFailureHook", "Handler", "JobKind", "JobRegistry", "check_kind_name"]

Handler = Callable[["JobContext", dict[str, Any]], Any]
"""``(ctx, payload) -> result``: runs one attempt of a job (see the module docstring)."""

FinalFailureHook = Callable[[dict[str, Any], str], None]
"""``(payload, reason) -> None``: runs once a job is given up for good (module docstring)."""

_KIND = re.compile(r"^[a-z][a-z0-9_.-]{0,99}$")


def check_kind_name(name: str) -> str:
    """Return ``name`` if it may name a job kind: lower case, digits, ``_ . -``, 1-100 chars.

    Raises:
        ConfigError: the name breaks the rule (kinds are named in code, not by users).

    """
    if not _KIND.match(name):
        raise ConfigError(
            f"job kind {name!r} must be 1-100 characters of a-z, 0-9, '_', '.', '-', "
            "starting with a letter (e.g. 'retention.sweep')"
        )
    return name


@dataclass(frozen=True)
class JobKind:
    """A registered kind of job.

    Attributes:
        name: the kind, e.g. ``documents.ingest``.
        handler: runs one attempt (module docstring).
        max_attempts: attempts before the job ends ``failed``; ``None`` = ``jobs.max_attempts``.
        every_s: for a periodic kind, its period in seconds: each consumer's tick enqueues it
            with the dedupe key ``<name>:<slot start, ISO 8601 UTC>``, so it runs once per slot
            across any number of consumers; ``None`` for kinds enqueued on demand.
        on_final_failure: called once when a job of this kind is given up for good
            (module docstring); ``None``: nothing is called.

    """

    name: str
    handler: Handler
    max_attempts: int | None = None
    every_s: float | None = None
    on_final_failure: FinalFailureHook | None = None


class JobRegistry:
    """Kinds by name; one registry is given to a :class:`~search2o.jobs.queue.JobQueue`.

    Build it where the process starts (``search2o serve``, ``search2o worker``), never at
    import time, so handlers can close over that process's database and stores::

        registry = JobRegistry()

        @registry.job("retention.sweep", every_s=3600)
        def sweep_expired(ctx, payload):
            return {"deleted": sweep(database, vault, retention).deleted}
    """

    def __init__(self) -> None:
        self._kinds: dict[str, JobKind] = {}

    def add(
        self,
        name: str,
        handler: Handler,
        *,
        max_attempts: int | None = None,
        every_s: float | None = None,
        on_final_failure: FinalFailureHook | None = None,
    ) -> JobKind:
        """Register ``handler`` for kind ``name`` and return the :class:`JobKind`.

        With ``on_final_failure``, the hook runner kind ``jobs.final_failure`` is registered
        too (once).

        Raises:
            ConfigError: the name is malformed or taken, ``max_attempts`` is outside 1-100,
                or ``every_s`` is not positive.

        """
        check_kind_name(name)
        if name in self._kinds:
            raise ConfigError(f"job kind {name!r} is registered twice")
        if max_attempts is not None and not 1 <= max_attempts <= 100:
            raise ConfigError(f"job kind {name!r}: max_attempts must be 1-100")
        if every_s is not None and not every_s > 0:
            raise ConfigError(f"job kind {name!r}: every_s must be positive")
        kind = JobKind(name, handler, max_attempts, every_s, on_final_failure)
        self._kinds[name] = kind
        if on_final_failure is not None and FINAL_FAILURE not in self._kinds:
            self._kinds[FINAL_FAILURE] = JobKind(
                FINAL_FAILURE, self._run_final_failure, HOOK_ATTEMPTS
            )
        return kind

    def hooked(self) -> frozenset[str]:
        """Return the names of the kinds with a final-failure hook."""
        return frozenset(n for n, k in self._kinds.items() if k.on_final_failure is not None)

    def _run_final_failure(self, ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
        """Call the failed job's hook once: the handler of ``jobs.final_failure``.

        Raises:
            ConfigError: this worker does not know the failed job's kind (retried: another
                worker may).

        """
        job = ledger.get(ctx.database, str(payload.get("job", "")))
        if job is None:  # purged after jobs.keep_finished_days: nothing left to tell
            return {"job": payload.get("job"), "hooked": False}
        kind = self.get(job.kind)
        if kind is None or kind.on_final_failure is None:
            raise ConfigError(f"no final-failure hook for job kind {job.kind!r} in this worker")
        kind.on_final_failure(job.payload, job.error or "")
        return {"job": job.id, "hooked": True}

    def job(
        self, name: str, *, max_attempts: int | None = None, every_s: float | None = None
    ) -> Callable[[Handler], Handler]:
        """Register the decorated handler as :meth:`add` does; return it unchanged."""

        def register(handler: Handler) -> Handler:
            self.add(name, handler, max_attempts=max_attempts, every_s=every_s)
            return handler

        return register

    def get(self, name: str) -> JobKind | None:
        """Return the kind named ``name``, or ``None`` when it is not registered."""
        return self._kinds.get(name)

    def periodic(self) -> list[JobKind]:
        """Return the periodic kinds (those with ``every_s``), by name."""
        return [k for _, k in sorted(self._kinds.items()) if k.every_s is not None]

    def names(self) -> list[str]:
        """Return every registered kind's name, sorted."""
        return sorted(self._kinds)

    def __contains__(self, name: object) -> bool:
        return name in self._kinds

    def __iter__(self) -> Iterator[JobKind]:
        return iter([k for _, k in sorted(self._kinds.items())])
