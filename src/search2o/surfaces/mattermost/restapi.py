"""Calls to the Mattermost REST API v4 over httpx, with its rate limits obeyed.

Every call is ``{url}/api/v4/{path}`` with ``Authorization: Bearer <bot token>`` (Mattermost
API v4 reference, "Authentication"); errors answer ``{"id", "message", "status_code"}``.
Mattermost limits requests per token and says so in ``X-Ratelimit-Limit``,
``X-Ratelimit-Remaining`` and ``X-Ratelimit-Reset`` (seconds until the window refills), and
answers 429 when the window is spent (Mattermost docs, "Rate limiting"). :meth:`MattermostApi.call`:

* returns the decoded JSON; another status is a :class:`MattermostCallError` naming the method,
  the path template, the status and Mattermost's error id;
* after a response with ``X-Ratelimit-Remaining: 0``, and on 429, holds every call of this
  process until the reset; a 429 is tried again up to ``max_waits`` times. A call made with
  ``max_waits=0`` (an intermediate patch of an answer) fails at once while held instead of
  waiting or being sent;
* a connection failure is a :class:`~search2o.errors.ProviderError`; no message carries the
  token.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx

from search2o.errors import ProviderError
from search2o.surfaces.reach import cannot_reach

__all__ = ["MattermostApi", "MattermostCallError"]

_MAX_RESET_S = 300.0


class MattermostCallError(ProviderError):
    """A REST call answered an error status; ``status`` and ``error_id`` are Mattermost's."""

    def __init__(self, method: str, path: str, status: int, error_id: str = "") -> None:
        super().__init__(f"Mattermost {method} {path} failed: {status} {error_id}".rstrip())
        self.method = method
        self.path = path
        self.status = status
        self.error_id = error_id


def _seconds(value: str | None) -> float | None:
    try:
        return min(max(float(value), 0.0), _MAX_RESET_S) if value is not None else None
    except ValueError:
        return None


class MattermostApi:
    """The REST API with the bot's token (thread-safe; one per process).

    Args:
        url: ``mattermost.url``, e.g. ``https://chat.example.com``.
        token: the bot account's access token.
        timeout_s: seconds per HTTP request.
        max_waits: 429 waits per call before giving up.

    """

    def __init__(
        self, url: str, token: str, *, timeout_s: float = 15.0, max_waits: int = 8
    ) -> None:
        self.url = url
        self._http = httpx.Client(
            base_url=f"{url.rstrip('/')}/api/v4/",
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout_s,
        )
        self.max_waits = max_waits
        self.waits = 0
        self._held_until = 0.0
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the HTTP connections."""
        self._http.close()

    def held_for(self) -> float:
        """Seconds this process still holds every call (the rate limit's reset)."""
        with self._lock:
            return max(self._held_until - time.monotonic(), 0.0)

    def _hold(self, seconds: float) -> None:
        with self._lock:
            self._held_until = max(self._held_until, time.monotonic() + seconds)

    def call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, Any] | None = None,
        max_waits: int | None = None,
    ) -> Any:
        """Send ``method path`` (``body`` as JSON); return the decoded answer.

        Raises:
            MattermostCallError: an error status, or still 429 after ``max_waits`` waits (at
                once with ``max_waits=0`` while held).
            ProviderError: the server could not be reached or answered no JSON.

        """
        patience = self.max_waits if max_waits is None else max_waits
        waited = 0
        while True:
            held = self.held_for()
            if held > 0:
                if patience == 0:
                    raise MattermostCallError(method, path, 429, "held by X-Ratelimit-Reset")
                time.sleep(held)
            try:
                response = self._http.request(method, path, json=body, params=params)
            except httpx.HTTPError as exc:
                raise ProviderError(cannot_reach(self.url, exc)) from None
            reset = _seconds(response.headers.get("X-Ratelimit-Reset"))
            if response.headers.get("X-Ratelimit-Remaining") == "0" or response.status_code == 429:
                self._hold(reset if reset is not None else 1.0)
            if response.status_code == 429 and waited < patience:
                waited += 1
                self.waits += 1
                continue
            try:
                answer = response.json() if response.content else None
            except ValueError:
                raise ProviderError(
                    f"Mattermost {method} {path} answered HTTP {response.status_code} without JSON"
                ) from None
            if response.status_code >= 400:
                error_id = str(answer.get("id") or "") if isinstance(answer, dict) else ""
                raise MattermostCallError(method, path, response.status_code, error_id[:200])
            return answer

    # --- the calls the surface makes (Mattermost API v4 reference) -------------------------

    def me(self) -> dict[str, Any]:
        """``GET /users/me``: the bot's own user."""
        found: dict[str, Any] = self.call("GET", "users/me")
        return found

    def user(self, user_id: str) -> dict[str, Any]:
        """``GET /users/{id}``: a user (``email`` empty when the server hides it)."""
        found: dict[str, Any] = self.call("GET", f"users/{user_id}")
        return found

    def my_channels(self) -> list[dict[str, Any]]:
        """``GET /users/me/channels``: every channel of every team the bot is in."""
        found: list[dict[str, Any]] = self.call("GET", "users/me/channels") or []
        return found

    def posts_since(self, channel_id: str, since_ms: int) -> list[dict[str, Any]]:
        """``GET /channels/{id}/posts?since=``: posts changed after ``since_ms``, oldest first."""
        answer = self.call("GET", f"channels/{channel_id}/posts", params={"since": since_ms})
        posts = (answer or {}).get("posts") or {}
        found = [p for p in posts.values() if isinstance(p, dict)]
        return sorted(found, key=lambda p: int(p.get("create_at") or 0))

    def create_post(
        self,
        channel_id: str,
        message: str,
        *,
        root_id: str = "",
        props: dict[str, Any] | None = None,
        max_waits: int | None = None,
    ) -> str:
        """``POST /posts``; return the new post's id."""
        body: dict[str, Any] = {"channel_id": channel_id, "message": message, "root_id": root_id}
        if props is not None:
            body["props"] = props
        created = self.call("POST", "posts", body=body, max_waits=max_waits)
        return str(created["id"])

    def patch_post(
        self,
        post_id: str,
        message: str,
        *,
        props: dict[str, Any] | None = None,
        max_waits: int | None = None,
    ) -> None:
        """``PUT /posts/{id}/patch``: change the post's message (and ``props``)."""
        body: dict[str, Any] = {"message": message}
        if props is not None:
            body["props"] = props
        self.call("PUT", f"posts/{post_id}/patch", body=body, max_waits=max_waits)
