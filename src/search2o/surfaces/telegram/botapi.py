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
* a message or an edit (``sendMessage``, ``editMessageText`` …) to a group (a negative chat
  id) first takes a slot of that group's :class:`~search2o.surfaces.budget.CallBudget`
  (``telegram.group_budget`` per ``telegram.group_window_s``: Telegram allows a bot about 20
  messages a minute in one group, edits included), and every such call one of the bot's
  overall budget (30 a second); Bot API FAQ, "My bot is hitting limits". The budgets are the
  process's, shared by every answer in flight: a call with ``max_waits=0`` that finds no room
  fails at once (an intermediate edit is skipped), any other waits for room;
* a connection failure is a :class:`~search2o.errors.ProviderError`. The token is part of
  the URL, so no error message carries the URL or the token.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx

from search2o.errors import ProviderError
from search2o.surfaces.budget import CallBudget
from search2o.surfaces.reach import cannot_reach

__all__ = ["BotApi", "TelegramCallError", "bot_id_of"]

_MAX_RETRY_AFTER_S = 300.0
# The calls that put a message in a chat or change one: what Telegram's limits count.
_SENDS = frozenset({"sendMessage", "sendMessageDraft", "editMessageText", "editMessageReplyMarkup"})
_OVERALL = "*"


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
        group_budget: messages and edits per group (module docstring); ``None``: unbounded.
        overall_budget: messages and edits of the bot in all chats; ``None``: unbounded.

    """

    def __init__(
        self,
        token: str,
        base_url: str,
        *,
        timeout_s: float = 15.0,
        max_waits: int = 8,
        group_budget: CallBudget | None = None,
        overall_budget: CallBudget | None = None,
    ) -> None:
        self._token = token
        self.base_url = base_url
        self.group_budget = group_budget
        self.overall_budget = overall_budget
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
            slots = self._take_slots(method, chat, wait=patience > 0)
            try:
                response = self._http.post(method, json=params, timeout=timeout)
                answer = response.json()
            except httpx.HTTPError as exc:
                # the base URL only: the token follows it in the path
                raise ProviderError(cannot_reach(self.base_url, exc)) from None
            except ValueError:
                raise ProviderError(
                    f"Telegram {method} answered HTTP {response.status_code} without JSON"
                ) from None
            finally:
                for slot in slots:
                    slot.done()
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

    def _take_slots(self, method: str, chat: str, *, wait: bool) -> list[Any]:
        """Take the budgets' slots a send to ``chat`` needs (module docstring).

        Raises:
            TelegramCallError: 429 "over the send budget" when ``wait`` is false and a budget
                has no room now (nothing was taken).

        """
        if method not in _SENDS or not chat:
            return []
        needed = []
        if self.group_budget is not None and chat.startswith("-"):  # groups' ids are negative
            needed.append((self.group_budget, chat))
        if self.overall_budget is not None:
            needed.append((self.overall_budget, _OVERALL))
        slots: list[Any] = []
        for budget, key in needed:
            slot = budget.take(key) if wait else budget.try_take(key)
            if slot is None:
                for taken in slots:
                    taken.done()
                raise TelegramCallError(method, 429, "over the send budget")
            slots.append(slot)
        return slots


def _retry_after(answer: dict[str, Any]) -> float | None:
    parameters = answer.get("parameters")
    value = parameters.get("retry_after") if isinstance(parameters, dict) else None
    try:
        return min(max(float(value), 0.0), _MAX_RETRY_AFTER_S) if value is not None else None
    except (TypeError, ValueError):
        return None
