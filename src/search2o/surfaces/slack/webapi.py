"""Calls to the Slack Web API through ``slack_sdk``, with Slack's failures made explicit.

Every call goes through :meth:`SlackApi.call`:

* ``ok: false`` is an error (:class:`SlackCallError`, naming the method and Slack's ``error``),
  even with HTTP 200: Slack reports most failures that way (Slack API docs, "Web API basics");
* HTTP 429, and HTTP 200 ``ok:false`` ``ratelimited``, wait ``Retry-After`` seconds (1 s when
  absent) and try again, up to ``max_waits`` times (Slack API docs, "Rate limits");
* a connection error is a :class:`~search2o.errors.ProviderError`.

:class:`UpdateBudget` bounds the ``chat.update`` calls per workspace: a sliding window of
``budget`` calls per ``window_s`` seconds, shared by every answer of this process.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from search2o.errors import ProviderError

__all__ = ["SlackApi", "SlackCallError", "UpdateBudget"]

# Methods documented as reading form-encoded arguments only (no JSON body).
_FORM_METHODS = frozenset({"users.info", "auth.test", "apps.connections.open"})


class SlackCallError(ProviderError):
    """A Slack Web API call answered ``ok: false`` (or an HTTP error); ``error`` is Slack's."""

    def __init__(self, method: str, error: str) -> None:
        super().__init__(f"Slack {method} failed: {error}")
        self.method = method
        self.error = error


class SlackApi:
    """The Web API with one bot token.

    Args:
        token: the ``xoxb-`` bot token (or an ``xapp-`` app token for ``apps.connections.open``).
        base_url: ``slack.api_url``, e.g. ``https://slack.com/api/``.
        timeout_s: seconds per HTTP request.
        max_waits: rate-limit waits per call before giving up.
        sleep: how to wait (seconds); tests keep :func:`time.sleep`.

    """

    def __init__(
        self, token: str, base_url: str, *, timeout_s: float = 15.0, max_waits: int = 8
    ) -> None:
        self.client = WebClient(token=token, base_url=base_url, timeout=int(timeout_s))
        self.client.retry_handlers = []  # waits and retries are decided here, once
        self.max_waits = max_waits
        self.waits = 0

    def call(
        self, method: str, /, *, max_waits: int | None = None, **params: Any
    ) -> dict[str, Any]:
        """Call ``method`` with ``params``; return Slack's JSON answer (``ok`` true).

        ``max_waits`` overrides the rate-limit waits of this call (0: fail at once).

        Raises:
            SlackCallError: ``ok: false`` (or HTTP error) other than rate limits, or still
                rate limited after ``max_waits`` waits.
            ProviderError: Slack could not be reached.

        """
        waited, patience = 0, self.max_waits if max_waits is None else max_waits
        while True:
            try:
                if method in _FORM_METHODS:
                    response = self.client.api_call(method, data=params or None)
                else:
                    response = self.client.api_call(method, json=params)
                return dict(response.data) if isinstance(response.data, dict) else {}
            except SlackApiError as exc:
                status = exc.response.status_code
                error = str(exc.response.get("error") or f"HTTP {status}")
                if (status == 429 or error == "ratelimited") and waited < patience:
                    waited += 1
                    self.waits += 1
                    time.sleep(_retry_after(exc.response.headers))
                    continue
                raise SlackCallError(method, error) from None
            except SlackClientError as exc:
                raise ProviderError(f"Slack {method} failed: {exc}") from None
            except OSError as exc:
                raise ProviderError(f"cannot reach Slack for {method}: {exc}") from None


def _retry_after(headers: Any) -> float:
    """Seconds to wait from a ``Retry-After`` header (RFC 9110 delay-seconds), default 1."""
    values = headers.get("Retry-After") or headers.get("retry-after") if headers else None
    value = values[0] if isinstance(values, list) and values else values
    try:
        return min(max(float(str(value)), 0.0), 60.0)
    except (TypeError, ValueError):
        return 1.0


class UpdateBudget:
    """At most ``budget`` ``chat.update`` calls per ``window_s`` seconds, per workspace.

    Thread-safe; one instance per process, shared by all answers.
    """

    def __init__(self, budget: int, window_s: float) -> None:
        self.budget = budget
        self.window_s = window_s
        self._spent: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _room(self, team: str, now: float) -> float:
        """Seconds until a call fits (0: now); drops entries older than the window."""
        spent = self._spent.setdefault(team, deque())
        while spent and spent[0] <= now - self.window_s:
            spent.popleft()
        if len(spent) < self.budget:
            return 0.0
        return spent[0] + self.window_s - now

    def try_take(self, team: str) -> bool:
        """Take one call of ``team``'s budget if there is room now; tell whether it did."""
        with self._lock:
            now = time.monotonic()
            if self._room(team, now) > 0:
                return False
            self._spent[team].append(now)
            return True

    def take(self, team: str) -> None:
        """Take one call of ``team``'s budget, waiting for room."""
        while True:
            with self._lock:
                now = time.monotonic()
                wait = self._room(team, now)
                if wait <= 0:
                    self._spent[team].append(now)
                    return
            time.sleep(min(wait, 1.0) + 0.001)
