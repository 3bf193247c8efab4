"""Structured logging: one JSON object per line (or plain text), configured once at start.

Call :func:`configure_logging` from the CLI or the app factory; library code only does
``logging.getLogger(__name__).info("event", extra={"fields": {...}})``.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

__all__ = ["JsonFormatter", "configure_logging"]


class JsonFormatter(logging.Formatter):
    """Format a record as one JSON line: ``ts``, ``level``, ``logger``, ``event`` + its fields.

    Fields come from ``extra={"fields": {...}}``; exceptions add ``error`` (type and message)
    and ``traceback`` (the formatted stack, one string).
    """

    def format(self, record: logging.LogRecord) -> str:
        """Return the JSON line for ``record`` (no trailing newline)."""
        payload: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            payload.update(fields)
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            payload["error"] = f"{type(exc).__name__}: {exc}"
            payload["traceback"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str)


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
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for name in ("search2o", "uvicorn", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level)
        logger.propagate = False
    # Per-request lines come from our middleware; uvicorn's access log would duplicate them.
    logging.getLogger("uvicorn.access").disabled = True
