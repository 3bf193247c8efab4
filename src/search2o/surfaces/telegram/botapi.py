"""Calls to the Telegram Bot API over httpx, with Telegram's failures made explicit.

Every call is ``POST {api_url}bot{TOKEN}/{method}`` with a JSON body, answered
``{"ok": true, "result": ...}`` or ``{"ok": false, "error_code", "description",
"parameters"}`` (Bot API docs, "Making requests"). :meth:`BotApi.call`:

* returns ``result``; ``ok: false`` is a :class:`TelegramCallError` naming the method, the code
  and Telegram's description;
* on 429 waits ``parameters.retry_after`` seconds (Bot API "ResponseParameters") and tries
  again, up to ``max_waits`` times. The wait is the chat's: every call of this process to that
  chat pauses until it is over, and a call made with ``max_waits=0`` (an intermediate edit)
  fails at once instead of waiting or being sent;
* a connection failure is a :class:`~search2o.errors.ProviderError`. The token is part of
  the URL, so no error message carries the URL or the token.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx

from search2o.errors import ProviderError

__all__ = ["BotApi", "TelegramCallError", "bot_id_of"]

_MAX_RETRY_AFTER_S = 300.0


class TelegramCallError(ProviderError):
    """A Bot API call answered ``ok: false``; ``error_code`` and ``description`` are Telegram's."""

    def __init__(
        self, method: str, error_code: int, description: str, retry_after: float | None = None
    ) -> None:
        super().__init__(f"Telegram {method} failed: {error_code} {description}")
        self.method = method
        self.error_code = error_code
        self.description = description
        self.retry_after = retry_after

    @property
    def not_modified(self) -> bool:
        """Whether Telegram said the edit changes nothing (the text is already there)."""
        return self.error_code == 400 and "message is not modified" in self.description


def bot_id_of(token: str) -> str:
    """Return the bot's id, the digits before ``:`` of its token (``123456:ABC…``).

    Raises:
        ValueError: the token does not have that shape.

    """
    head, sep, tail = token.partition(":")
    if not (sep and head.isdigit() and tail):
        raise ValueError("a Telegram bot token looks like 123456789:AAH… (from @BotFather)")
    return head


class BotApi:
    """The Bot API with one bot token (thread-safe; one per process).

    Args:
        token: the bot token.
        base_url: ``telegram.api_url``, e.g. ``https://api.telegram.org/``.
        timeout_s: seconds per HTTP request (``getUpdates`` adds its own long-poll timeout).
        max_waits: 429 waits per call before giving up.

    """

    def __init__(
        self, token: str, base_url: str, *, timeout_s: float = 15.0, max_waits: int = 8
    ) -> None:
        self._token = token
        self._http = httpx.Client(base_url=f"{base_url}bot{token}/", timeout=timeout_s)
        self.timeout_s = timeout_s
        self.max_waits = max_waits
        self.waits = 0
        self._paused: dict[str, float] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the HTTP connections."""
        self._http.close()

    def paused_for(self, chat: str) -> float:
        """Seconds this process still holds every call to ``chat`` (Telegram's ``retry_after``)."""
        with self._lock:
            return max(self._paused.get(chat, 0.0) - time.monotonic(), 0.0)

    def _pause(self, chat: str, seconds: float) -> None:
        with self._lock:
            until = time.monotonic() + seconds
            self._paused[chat] = max(self._paused.get(chat, 0.0), until)

    def call(self, method: str, /, *, max_waits: int | None = None, **params: Any) -> Any:
        """Call ``method`` with ``params`` (JSON); return Telegram's ``result``.

        Raises:
            TelegramCallError: ``ok: false`` other than 429, or still 429 after ``max_waits``
                waits (or at once with ``max_waits=0`` while the chat is paused).
            ProviderError: Telegram could not be reached or answered no JSON.

        """
        chat = str(params.get("chat_id", ""))
        patience = self.max_waits if max_waits is None else max_waits
        waited = 0
        timeout = self.timeout_s + float(params.get("timeout") or 0)
        while True:
            held = self.paused_for(chat) if chat else 0.0
            if held > 0:
                # another answer (or this call) was told to wait: never send before it is over
                if patience == 0:
                    raise TelegramCallError(method, 429, "paused by retry_after", held)
                time.sleep(held)
                continue
            try:
                response = self._http.post(method, json=params, timeout=timeout)
                answer = response.json()
            except httpx.HTTPError as exc:
                raise ProviderError(
                    f"cannot reach Telegram for {method}: {type(exc).__name__}"
                ) from None
            except ValueError:
                raise ProviderError(
                    f"Telegram {method} answered HTTP {response.status_code} without JSON"
                ) from None
            if not isinstance(answer, dict):
                raise ProviderError(f"Telegram {method} answered an unexpected body")
            if answer.get("ok") is True:
                return answer.get("result")
            code = int(answer.get("error_code") or response.status_code)
            description = str(answer.get("description") or "")[:300].replace(self._token, "…")
            retry_after = _retry_after(answer)
            if code == 429:
                delay = retry_after if retry_after is not None else 1.0
                if chat:
                    self._pause(chat, delay)
                if waited < patience:
                    waited += 1
                    self.waits += 1
                    if not chat:
                        time.sleep(delay)
                    continue
            raise TelegramCallError(method, code, description, retry_after)


def _retry_after(answer: dict[str, Any]) -> float | None:
    parameters = answer.get("parameters")
    value = parameters.get("retry_after") if isinstance(parameters, dict) else None
    try:
        return min(max(float(value), 0.0), _MAX_RETRY_AFTER_S) if value is not None else None
    except (TypeError, ValueError):
        return None
