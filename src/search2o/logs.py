"""Structured logging: one JSON object per line (or plain text), configured once at start.

Call :func:`configure_logging` from the CLI or the app factory; library code only does
``logging.getLogger(__name__).info("event", extra={"fields": {...}})``.

Log lines reach terminals: JSON lines escape every control character (``json.dumps`` with
ASCII output), and plain-text lines go through :func:`search2o.terminal.printable`, so a file
name or request path holding ``ESC`` sequences is logged inert. SQL parameters never reach a
log: the database engines hide them (:mod:`search2o.storage.db`).

JSON lines also carry the request, run and job ids bound where the line was logged
(:mod:`search2o.observability.ids`). What a line must never carry: message text, queries,
document text, tokens or keys; log ids and sizes instead (``tests/ops/test_logs.py`` checks
it during a chat and a search).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

from search2o.observability.ids import current_ids
from search2o.terminal import printable

__all__ = ["JsonFormatter", "TextFormatter", "configure_logging"]


class JsonFormatter(logging.Formatter):
    """Format a record as one JSON line: ``ts``, ``level``, ``logger``, ``event`` + its fields.

    Fields come from ``extra={"fields": {...}}``, after the ids bound in the logging context
    (``request_id``, ``run_id``, ``job_id``; a field of the same name wins); exceptions add
    ``error`` (type and message) and ``traceback`` (the formatted stack, one string).
    """

    def format(self, record: logging.LogRecord) -> str:
        """Return the JSON line for ``record`` (no trailing newline)."""
        payload: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
            **current_ids(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            payload.update(fields)
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            payload["error"] = f"{type(exc).__name__}: {exc}"
            payload["traceback"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str)


class TextFormatter(logging.Formatter):
    """Format a record for people: ``time LEVEL logger: message``, control characters inert.

    The message, the exception and its traceback pass :func:`~search2o.terminal.printable`
    (newlines kept, so a traceback still reads as one).
    """

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        """Return the text line for ``record`` with terminal control characters replaced."""
        return printable(super().format(record))


def configure_logging(level: str = "INFO", fmt: str = "json") -> None:
    """Route search2o's and uvicorn's logs to stderr in one format.

    Args:
        level: ``DEBUG``, ``INFO``, ``WARNING`` or ``ERROR``.
        fmt: ``json`` for one structured line per event, ``text`` for people.

    """
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter())
    for name in ("search2o", "uvicorn", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level)
        logger.propagate = False
    # Per-request lines come from our middleware; uvicorn's access log would duplicate them.
    logging.getLogger("uvicorn.access").disabled = True
