"""A fake Telegram Bot API on loopback that speaks its wire format, and a webhook sender.

:class:`FakeTelegram` is a real HTTP server (a thread) answering ``POST /bot{TOKEN}/{method}``
(JSON, form or query arguments) with the Bot API's envelope (Bot API docs, "Making requests"):
``{"ok": true, "result": ...}`` or ``{"ok": false, "error_code": ..., "description": ...,
"parameters": {"retry_after": ...}}``. It checks the token in the path, records every call,
keeps the messages the bot sent or edited per chat, and injects the documented failures on
demand: HTTP 429 ``Too Many Requests: retry after N`` with ``parameters.retry_after``, and
answers ``Bad Request: message is not modified`` to an edit that changes nothing, ``message is
too long`` past 4,096 UTF-16 code units, ``can't parse entities`` for an entity outside the
text and ``BUTTON_DATA_INVALID`` for ``callback_data`` over 64 bytes.

``getUpdates`` serves :meth:`FakeTelegram.push`-ed updates from ``offset`` on, long-polling up
to ``timeout`` seconds; an ``offset`` confirms (forgets) every update below it, as Telegram does.

:func:`send_webhook` posts an update the way Telegram's webhook does
(``X-Telegram-Bot-Api-Secret-Token``) and sends it again while the answer is not 2xx.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx

BOT_ID = 7000001
BOT_TOKEN = f"{BOT_ID}:AAH-fake-token-for-tests_0123456789"
BOT_USERNAME = "search2o_test_bot"
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup "
    "are exactly the same as a current content and reply markup of the message"
)


def utf16_len(text: str) -> int:
    """Length of ``text`` in UTF-16 code units, as Telegram counts."""
    return len(text.encode("utf-16-le")) // 2


@dataclass
class Call:
    """One Bot API call as received: the method, its arguments, when (monotonic), its answer."""

    method: str
    params: dict[str, Any]
    at: float
    status: int = 200
    answer: dict[str, Any] = field(default_factory=dict)


@dataclass
class Fault:
    """A failure to answer the next ``times`` calls of a method with."""

    error_code: int = 429
    description: str | None = None
    retry_after: int | None = None
    times: int = 1


class FakeTelegram:
    """The fake Bot API (see the module docstring). Use as a context manager.

    Attributes:
        url: the Bot API base URL, ``http://127.0.0.1:<port>/`` (``telegram.api_url``).
        calls: every call received, in order.
        messages: ``(chat_id, message_id) -> message`` of every message the bot sent.

    """

    def __init__(self, token: str = BOT_TOKEN) -> None:
        self.token = token
        self.calls: list[Call] = []
        self.messages: dict[tuple[int, int], dict[str, Any]] = {}
        self.webhook: dict[str, Any] = {"url": ""}
        self._updates: list[dict[str, Any]] = []
        self._faults: dict[str, list[Fault]] = {}
        self._lock = threading.Condition()
        self._next_message = 100
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FakeTelegram:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._lock.notify_all()
        self._server.shutdown()
        self._server.server_close()

    # --- test controls ------------------------------------------------------------------------

    def fail(
        self,
        method: str,
        error_code: int = 429,
        *,
        retry_after: int | None = None,
        description: str | None = None,
        times: int = 1,
    ) -> None:
        """Answer the next ``times`` calls of ``method`` with an error (429: retry after)."""
        with self._lock:
            self._faults.setdefault(method, []).append(
                Fault(error_code, description, retry_after, times)
            )

    def push(self, update: dict[str, Any]) -> None:
        """Queue an update for ``getUpdates``."""
        with self._lock:
            self._updates.append(update)
            self._lock.notify_all()

    def pending(self) -> list[int]:
        """The ``update_id`` of updates not confirmed yet."""
        with self._lock:
            return [u["update_id"] for u in self._updates]

    def of(self, method: str) -> list[Call]:
        """The calls of ``method`` that succeeded, in order."""
        with self._lock:
            return [c for c in self.calls if c.method == method and c.status == 200]

    def in_chat(self, chat_id: int) -> list[dict[str, Any]]:
        """The bot's messages in ``chat_id``, in the order they were sent."""
        with self._lock:
            found = [m for (chat, _), m in self.messages.items() if chat == chat_id]
        return sorted(found, key=lambda m: int(m["message_id"]))

    # --- the API ------------------------------------------------------------------------------

    def handle(self, token: str, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Answer one call (the server thread calls this)."""
        if token != self.token:
            return 401, {"ok": False, "error_code": 401, "description": "Unauthorized"}
        if method == "getUpdates":
            return 200, self._get_updates(params)
        with self._lock:
            call = Call(method, params, time.monotonic())
            self.calls.append(call)
            status, answer = self._fault(method) or self._answer(method, params)
            call.status, call.answer = status, answer
            return status, answer

    def _fault(self, method: str) -> tuple[int, dict[str, Any]] | None:
        faults = self._faults.get(method)
        if not faults:
            return None
        fault = faults[0]
        fault.times -= 1
        if fault.times <= 0:
            faults.pop(0)
        if fault.error_code == 429:
            after = fault.retry_after or 1
            return 429, {
                "ok": False,
                "error_code": 429,
                "description": f"Too Many Requests: retry after {after}",
                "parameters": {"retry_after": after},
            }
        return fault.error_code, _error(fault.error_code, fault.description or "Bad Request")

    def _answer(self, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if method == "getMe":
            return 200, _ok(
                {"id": BOT_ID, "is_bot": True, "first_name": "search2o", "username": BOT_USERNAME}
            )
        if method in ("setWebhook", "deleteWebhook"):
            self.webhook = {"url": str(params.get("url") or ""), "pending_update_count": 0}
            return 200, _ok(True)
        if method == "getWebhookInfo":
            return 200, _ok({"pending_update_count": len(self._updates), **self.webhook})
        if method == "answerCallbackQuery":
            return 200, _ok(True)
        problem = _check_content(params)
        if problem is not None:
            return 400, _error(400, problem)
        if method == "sendMessageDraft":
            if int(params.get("draft_id") or 0) == 0:
                return 400, _error(400, "Bad Request: draft_id must be non-zero")
            return 200, _ok(True)
        if method == "sendMessage":
            self._next_message += 1
            message = {
                "message_id": self._next_message,
                "chat": {"id": int(params["chat_id"])},
                "date": int(time.time()),
                "from": {"id": BOT_ID, "is_bot": True, "username": BOT_USERNAME},
                "text": params["text"],
                "entities": params.get("entities") or [],
                "reply_markup": params.get("reply_markup"),
                "reply_parameters": params.get("reply_parameters"),
                "edits": 0,
            }
            self.messages[(int(params["chat_id"]), self._next_message)] = message
            return 200, _ok(_public(message))
        if method == "editMessageText":
            key = (int(params["chat_id"]), int(params["message_id"]))
            message = self.messages.get(key)
            if message is None:
                return 400, _error(400, "Bad Request: message to edit not found")
            new = (params["text"], params.get("entities") or [], params.get("reply_markup"))
            if new == (message["text"], message["entities"], message["reply_markup"]):
                return 400, _error(400, NOT_MODIFIED)
            message.update(text=new[0], entities=new[1], reply_markup=new[2])
            message["edits"] += 1
            return 200, _ok(_public(message))
        return 404, _error(404, "Not Found")

    def _get_updates(self, params: dict[str, Any]) -> dict[str, Any]:
        offset = int(params.get("offset") or 0)
        timeout = min(float(params.get("timeout") or 0), 50.0)
        limit = int(params.get("limit") or 100)
        deadline = time.monotonic() + timeout
        with self._lock:
            self.calls.append(Call("getUpdates", params, time.monotonic()))
            if offset:  # confirms every update below the offset (Bot API "getUpdates")
                self._updates = [u for u in self._updates if u["update_id"] >= offset]
            while True:
                ready = [u for u in self._updates if u["update_id"] >= offset][:limit]
                left = deadline - time.monotonic()
                if ready or left <= 0:
                    return _ok(ready)
                self._lock.wait(min(left, 0.2))


def _ok(result: Any) -> dict[str, Any]:
    return {"ok": True, "result": result}


def _error(code: int, description: str) -> dict[str, Any]:
    return {"ok": False, "error_code": code, "description": description}


def _public(message: dict[str, Any]) -> dict[str, Any]:
    shown = {k: v for k, v in message.items() if k not in ("edits", "reply_parameters")}
    return {k: v for k, v in shown.items() if v not in (None, [])}


def _check_content(params: dict[str, Any]) -> str | None:
    """Telegram's checks of a text and its entities and buttons (Bot API "sendMessage")."""
    text = params.get("text")
    if not isinstance(text, str) or not text.strip():
        return "Bad Request: message text is empty"
    length = utf16_len(text)
    if length > 4096:
        return "Bad Request: message is too long"
    for entity in params.get("entities") or []:
        start, size = int(entity.get("offset", -1)), int(entity.get("length", 0))
        if start < 0 or size <= 0 or start + size > length:
            return "Bad Request: can't parse entities: entity beyond the end of the text"
    markup = params.get("reply_markup") or {}
    for row in markup.get("inline_keyboard") or []:
        for button in row:
            if len(str(button.get("callback_data", "")).encode()) > 64:
                return "Bad Request: BUTTON_DATA_INVALID"
    return None


def _handler(fake: FakeTelegram) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def _serve(self) -> None:
            parts = urlsplit(self.path)
            segments = parts.path.strip("/").split("/")
            if len(segments) != 2 or not segments[0].startswith("bot"):
                self._send(404, _error(404, "Not Found"))
                return
            params: dict[str, Any] = dict(parse_qsl(parts.query))
            size = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(size) if size else b""
            kind = self.headers.get("Content-Type") or ""
            if body and "json" in kind:
                params.update(json.loads(body))
            elif body:
                for key, value in parse_qsl(body.decode()):
                    params[key] = _maybe_json(value)
            status, answer = fake.handle(segments[0][3:], segments[1], params)
            self._send(status, answer)

        def do_POST(self) -> None:
            self._serve()

        def do_GET(self) -> None:
            self._serve()

        def _send(self, status: int, answer: dict[str, Any]) -> None:
            raw = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    return Handler


def _maybe_json(value: str) -> Any:
    # Form-encoded Bot API calls send objects (entities, reply_markup) as JSON strings.
    if value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


# --- updates, as Telegram sends them (Bot API "Update", "Message", "CallbackQuery") -----------


def user(user_id: int, name: str = "Ada") -> dict[str, Any]:
    """A ``User`` object of a person."""
    return {"id": user_id, "is_bot": False, "first_name": name, "language_code": "en"}


def message_update(
    update_id: int,
    text: str,
    *,
    chat_id: int = 501,
    chat_type: str = "private",
    user_id: int = 501,
    message_id: int = 10,
    entities: list[dict[str, Any]] | None = None,
    reply_to: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An ``Update`` carrying one text ``message``."""
    message: dict[str, Any] = {
        "message_id": message_id,
        "from": user(user_id),
        "chat": {"id": chat_id, "type": chat_type},
        "date": int(time.time()),
        "text": text,
    }
    if entities:
        message["entities"] = entities
    if reply_to is not None:
        message["reply_to_message"] = reply_to
    return {"update_id": update_id, "message": message}


def mention_update(update_id: int, text: str, **kw: Any) -> dict[str, Any]:
    """A group message that starts with ``@<bot>`` (a ``mention`` entity)."""
    mention = f"@{BOT_USERNAME}"
    entity = {"type": "mention", "offset": 0, "length": utf16_len(mention)}
    kw.setdefault("chat_id", -1001)
    kw.setdefault("chat_type", "supergroup")
    return message_update(update_id, f"{mention} {text}", entities=[entity], **kw)


def callback_update(
    update_id: int, data: str, message: dict[str, Any], *, user_id: int = 501
) -> dict[str, Any]:
    """An ``Update`` carrying a ``callback_query`` (a click on an inline button)."""
    return {
        "update_id": update_id,
        "callback_query": {
            "id": f"cb{update_id}",
            "from": user(user_id),
            "chat_instance": "ci1",
            "message": {**message, "chat": {"id": message["chat"]["id"], "type": "private"}},
            "data": data,
        },
    }


def send_webhook(
    url: str, update: dict[str, Any], secret: str | None, *, tries: int = 3, pause_s: float = 0.05
) -> list[int]:
    """Post ``update`` as Telegram's webhook does, again while not 2xx; return the statuses.

    Telegram repeats a delivery after a non-2xx answer (Bot API "setWebhook": "In case of an
    unsuccessful request, we will give up after a reasonable amount of attempts"); ``tries``
    bounds it here.
    """
    headers = {"Content-Type": "application/json"}
    if secret is not None:
        headers[SECRET_HEADER] = secret
    statuses: list[int] = []
    with httpx.Client(timeout=30) as client:
        for _ in range(tries):
            status = client.post(url, content=json.dumps(update), headers=headers).status_code
            statuses.append(status)
            if 200 <= status < 300:
                break
            time.sleep(pause_s)
    return statuses


@contextmanager
def running() -> Iterator[FakeTelegram]:
    """A started :class:`FakeTelegram` (stopped on exit)."""
    with FakeTelegram() as fake:
        yield fake
