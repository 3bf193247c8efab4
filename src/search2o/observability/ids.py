"""The ids a log line carries without being told: the request, run and job being worked on.

They live in :mod:`contextvars`, so they follow the work: a request's id is bound by the
telemetry middleware (:mod:`search2o.api.telemetry`) and reaches every line logged while the
request runs, in worker threads too (Starlette runs sync routes with a copy of the context) and
in the task that writes the request's answer (asyncio copies the context into tasks it
creates); a job's id is bound in the consumer thread that runs it
(:func:`search2o.observability.jobs.instrument_queue`). :class:`~search2o.logs.JsonFormatter`
adds them to each line as ``request_id``, ``run_id`` and ``job_id``.

Only ids: never message text, queries, tokens or keys.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["bind_ids", "current_ids"]

_NAMES = ("request_id", "run_id", "job_id")
_VARS: dict[str, ContextVar[str | None]] = {
    name: ContextVar(f"search2o_{name}", default=None) for name in _NAMES
}


def current_ids() -> dict[str, str]:
    """Return the ids bound in this context, e.g. ``{"request_id": "3f2a..."}`` (unset left out)."""
    return {name: value for name, var in _VARS.items() if (value := var.get()) is not None}


@contextmanager
def bind_ids(
    *, request_id: str | None = None, run_id: str | None = None, job_id: str | None = None
) -> Iterator[None]:
    """Bind the given ids for the duration of the block (``None`` leaves an id as it is)."""
    given = {"request_id": request_id, "run_id": run_id, "job_id": job_id}
    tokens = [(_VARS[name], _VARS[name].set(value)) for name, value in given.items() if value]
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)
