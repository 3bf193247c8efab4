"""Calls to the Slack Web API through ``slack_sdk``, with Slack's failures made explicit.

Every call goes through :meth:`SlackApi.call`:

* ``ok: false`` is an error (:class:`SlackCallError`, naming the method and Slack's ``error``),
  even with HTTP 200: Slack reports most failures that way (Slack API docs, "Web API basics");
* HTTP 429, and HTTP 200 ``ok:false`` ``ratelimited``, wait ``Retry-After`` seconds (1 s when
  absent) and try again, up to ``max_waits`` times (Slack API docs, "Rate limits"); a call
  under a budget pauses the whole workspace's budget for that long, since Slack limits the
  method per workspace;
* a connection error is a :class:`~search2o.errors.ProviderError`.

:class:`UpdateBudget` (a :class:`~search2o.surfaces.budget.CallBudget`) bounds the
``chat.update`` calls per workspace: a sliding window of ``budget`` calls per ``window_s``
seconds, shared by every answer of this process.
"""

from __future__ import annotations

import time
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from search2o.errors import ProviderError
from search2o.surfaces.budget import CallBudget
from search2o.surfaces.reach import cannot_reach

__all__ = ["SlackApi", "SlackCallError", "UpdateBudget"]

UpdateBudget = CallBudget
"""The per-workspace ``chat.update`` budget: a :class:`~search2o.surfaces.budget.CallBudget`."""

# Methods documented as reading form-encoded arguments only (no JSON body).
# Read methods take form fields, not JSON bodies (Slack API docs, "Web API basics").
_FORM_METHODS = frozenset(
    {"users.info", "auth.test", "apps.connections.open", "conversations.replies"}
)


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
        self,
        method: str,
        /,
        *,
        max_waits: int | None = None,
        budget: tuple[UpdateBudget, str] | None = None,
        **params: Any,
    ) -> dict[str, Any]:
        """Call ``method`` with ``params``; return Slack's JSON answer (``ok`` true).

        ``max_waits`` overrides the rate-limit waits of this call (0: fail at once).
        ``budget`` (a budget and the workspace) is taken from before every HTTP attempt,
        retries included: waiting for room, or with ``max_waits=0`` failing at once
        (``budget_exhausted``) when there is none.

        Raises:
            SlackCallError: ``ok: false`` (or HTTP error) other than rate limits, or still
                rate limited after ``max_waits`` waits.
            ProviderError: Slack could not be reached.

        """
        waited, patience = 0, self.max_waits if max_waits is None else max_waits
        while True:
            slot = None
            if budget is not None:
                spend, team = budget
                slot = spend.take(team) if patience > 0 else spend.try_take(team)
                if slot is None:
                    raise SlackCallError(method, "budget_exhausted")
            try:
                if method in _FORM_METHODS:
                    response = self.client.api_call(method, data=params or None)
                else:
                    response = self.client.api_call(method, json=params)
                return dict(response.data) if isinstance(response.data, dict) else {}
            except SlackApiError as exc:
                status = exc.response.status_code
                error = str(exc.response.get("error") or f"HTTP {status}")
                limited = status == 429 or error == "ratelimited"
                delay = _retry_after(exc.response.headers) if limited else 0.0
                if limited and budget is not None:  # the workspace's limit: every answer waits
                    budget[0].pause(budget[1], delay)
                if limited and waited < patience:
                    waited += 1
                    self.waits += 1
                    if budget is None:
                        time.sleep(delay)
                    continue
                raise SlackCallError(method, error) from None
            except SlackClientError as exc:
                raise ProviderError(f"Slack {method} failed: {exc}") from None
            except OSError as exc:
                raise ProviderError(cannot_reach(self.client.base_url, exc)) from None
            finally:
                if slot is not None:
                    slot.done()

    def scopes(self) -> set[str]:
        """Return the token's granted scopes (``auth.test``'s ``X-OAuth-Scopes`` header).

        Raises:
            SlackCallError, ProviderError: as :meth:`call`.

        """
        try:
            response = self.client.api_call("auth.test")
        except SlackApiError as exc:
            raise SlackCallError("auth.test", str(exc.response.get("error"))) from None
        except SlackClientError as exc:
            raise ProviderError(f"Slack auth.test failed: {exc}") from None
        except OSError as exc:
            raise ProviderError(cannot_reach(self.client.base_url, exc)) from None
        header = _header(response.headers, "X-OAuth-Scopes") or ""
        return {scope.strip() for scope in header.split(",") if scope.strip()}


def _header(headers: Any, name: str) -> str | None:
    """One header's value from slack_sdk's headers (a dict of str or of lists, any case)."""
    for key, value in (headers or {}).items():
        if str(key).lower() == name.lower():
            return str(value[0] if isinstance(value, list) and value else value)
    return None


def _retry_after(headers: Any) -> float:
    """Seconds to wait from a ``Retry-After`` header (RFC 9110 delay-seconds), default 1."""
    value = _header(headers, "Retry-After")
    try:
        return min(max(float(str(value)), 0.0), 60.0)
    except (TypeError, ValueError):
        return 1.0
