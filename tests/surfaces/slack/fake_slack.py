"""A fake Slack on loopback that speaks the Web API's wire format, and a signer of events.

:class:`FakeSlack` is a real HTTP server (a thread) answering ``POST /api/{method}`` with
Slack's JSON shapes (``{"ok": true, ...}`` / ``{"ok": false, "error": ...}``; Slack API docs,
"Web API basics" and each method's page). It reads form, query and JSON bodies as Slack does,
checks ``Authorization: Bearer``, records every call, keeps the messages posted per channel and
injects the documented failures on demand: HTTP 429 with ``Retry-After``, HTTP 200
``ok:false ratelimited``, ``missing_recipient_team_id``, ``msg_too_long``. Messages keep their
``metadata`` (Slack API docs, "Message metadata"), which ``conversations.replies`` returns with
``include_all_metadata``; :meth:`FakeSlack.hold` answers a call late, after it took effect.

:func:`signed` builds the headers Slack sends with an HTTP event (``X-Slack-Signature`` v0,
``X-Slack-Request-Timestamp``, optionally ``X-Slack-Retry-Num`` / ``X-Slack-Retry-Reason``).
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from search2o.signing import slack_signature

BOT_USER = "UBOT"
BOT_ID = "BBOT"
TEAM = "T1"
SCOPES = (
    "app_mentions:read,channels:history,chat:write,commands,groups:history,im:history,"
    "im:read,im:write,mpim:history,reactions:write,users:read,users:read.email"
)


@dataclass
class Call:
    """One Web API call as received: the method, its merged parameters and when (monotonic)."""

    method: str
    params: dict[str, Any]
    token: str | None
    at: float
    status: int = 200
    answer: dict[str, Any] = field(default_factory=dict)


@dataclass
class Fault:
    """A failure to inject on the next ``times`` calls of a method."""

    status: int = 200
    error: str | None = None
    retry_after: int | None = None
    times: int = 1
    when: Callable[[dict[str, Any]], bool] | None = None


class FakeSlack:
    """The fake Web API (see the module docstring). Use as a context manager.

    Attributes:
        url: the Web API base URL, ``http://127.0.0.1:<port>/api/`` (``slack.api_url``).
        calls: every call received, in order.
        messages: ``(channel, ts) -> message`` of every message posted and updated.
        users: ``user id -> users.info`` user object.

    """

    def __init__(
        self, token: str = "xoxb-test", scopes: str = SCOPES, app_token: str = "xapp-test"
    ) -> None:
        self.token = token
        self.app_token = app_token
        self.socket: FakeSocketMode | None = None
        self.scopes = scopes
        self.calls: list[Call] = []
        self.messages: dict[tuple[str, str], dict[str, Any]] = {}
        self.users: dict[str, dict[str, Any]] = {}
        self._faults: dict[str, list[Fault]] = {}
        self._holds: dict[str, float] = {}
        self._lock = threading.Lock()
        self._clock = 1_700_000_000
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/api/"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FakeSlack:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    # --- test controls ------------------------------------------------------------------------

    def fail(
        self,
        method: str,
        *,
        status: int = 200,
        error: str | None = None,
        retry_after: int | None = None,
        times: int = 1,
        when: Callable[[dict[str, Any]], bool] | None = None,
    ) -> None:
        """Make the next ``times`` calls of ``method`` (those ``when`` accepts) fail."""
        with self._lock:
            fault = Fault(status, error, retry_after, times, when)
            self._faults.setdefault(method, []).append(fault)

    def hold(self, method: str, seconds: float) -> None:
        """Answer the next call of ``method`` only ``seconds`` after it took effect (a client
        that dies meanwhile never learns of it)."""
        with self._lock:
            self._holds[method] = seconds

    def held(self, method: str) -> float:
        """Take the hold of ``method`` (0 when none)."""
        with self._lock:
            return self._holds.pop(method, 0.0)

    def add_user(self, user_id: str, email: str | None, team: str = TEAM) -> None:
        """Give ``users.info`` a user (``email`` ``None``: no email visible)."""
        profile: dict[str, Any] = {"real_name": user_id}
        if email is not None:
            profile["email"] = email
        self.users[user_id] = {"id": user_id, "team_id": team, "profile": profile}

    def of(self, method: str) -> list[Call]:
        """The successful calls of ``method``, in order."""
        with self._lock:
            return [c for c in self.calls if c.method == method and c.answer.get("ok")]

    def replies(self, channel: str, thread_ts: str) -> list[dict[str, Any]]:
        """The bot's messages in one thread, in posting order."""
        with self._lock:
            return [
                m
                for (ch, _), m in sorted(self.messages.items(), key=lambda kv: kv[0][1])
                if ch == channel and m.get("thread_ts") == thread_ts
            ]

    # --- the API ------------------------------------------------------------------------------

    def _next_ts(self) -> str:
        self._clock += 1
        return f"{self._clock}.{len(self.calls):06d}"

    def answer(
        self, method: str, params: dict[str, Any], token: str | None
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        """Answer one call: (HTTP status, JSON body, extra headers)."""
        with self._lock:
            call = Call(method, params, token, time.monotonic())
            self.calls.append(call)
            status, body, headers = self._answer(method, params, token)
            call.status, call.answer = status, body
            return status, body, headers

    def _answer(
        self, method: str, params: dict[str, Any], token: str | None
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        wanted = self.app_token if method == "apps.connections.open" else self.token
        if token != wanted:
            return 200, {"ok": False, "error": "invalid_auth"}, {}
        faults = self._faults.get(method, [])
        if faults and (faults[0].when is None or faults[0].when(params)):
            fault = faults[0]
            fault.times -= 1
            if fault.times <= 0:
                faults.pop(0)
            headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after else {}
            return fault.status, {"ok": False, "error": fault.error or "ratelimited"}, headers
        handler = getattr(self, "_m_" + _snake(method), None)
        if handler is None:
            return 200, {"ok": False, "error": "unknown_method"}, {}
        body: dict[str, Any] = handler(params)
        return 200, body, {"X-OAuth-Scopes": self.scopes} if method == "auth.test" else {}

    def _m_auth_test(self, p: dict[str, Any]) -> dict[str, Any]:
        return {
            "ok": True,
            "url": "https://acme.slack.com/",
            "team": "Acme",
            "user": "search2o",
            "team_id": TEAM,
            "user_id": BOT_USER,
            "bot_id": BOT_ID,
        }

    def _post(self, p: dict[str, Any], streaming: bool = False) -> dict[str, Any]:
        channel = str(p.get("channel", ""))
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        text = p.get("text") or p.get("markdown_text") or ""
        if len(str(text)) > 40_000:
            return {"ok": False, "error": "msg_too_long"}
        ts = self._next_ts()
        message = {
            "type": "message",
            "user": BOT_USER,
            "bot_id": BOT_ID,
            "ts": ts,
            "text": str(text),
            "blocks": _json(p.get("blocks")) or [],
            "thread_ts": p.get("thread_ts"),
            "streaming": streaming,
        }
        metadata = _json(p.get("metadata"))
        if isinstance(metadata, dict):  # Slack keeps event_type and event_payload
            message["metadata"] = {
                "event_type": metadata.get("event_type"),
                "event_payload": metadata.get("event_payload") or {},
            }
        self.messages[(channel, ts)] = message
        return {"ok": True, "channel": channel, "ts": ts, "message": message}

    def _m_chat_post_message(self, p: dict[str, Any]) -> dict[str, Any]:
        return self._post(p)

    def _m_chat_update(self, p: dict[str, Any]) -> dict[str, Any]:
        key = (str(p.get("channel", "")), str(p.get("ts", "")))
        if key not in self.messages:
            return {"ok": False, "error": "message_not_found"}
        if len(str(p.get("text") or "")) > 40_000:
            return {"ok": False, "error": "msg_too_long"}
        message = self.messages[key]
        message["text"] = str(p.get("text") or "")
        message["blocks"] = _json(p.get("blocks")) or []
        message["edits"] = message.get("edits", 0) + 1
        return {"ok": True, "channel": key[0], "ts": key[1], "text": message["text"]}

    def _m_chat_start_stream(self, p: dict[str, Any]) -> dict[str, Any]:
        if not str(p.get("channel", "")).startswith("D") and not (
            p.get("recipient_team_id") and p.get("recipient_user_id")
        ):
            return {"ok": False, "error": "missing_recipient_team_id"}
        return self._post({**p, "text": p.get("markdown_text") or ""}, streaming=True)

    def _m_chat_append_stream(self, p: dict[str, Any]) -> dict[str, Any]:
        key = (str(p.get("channel", "")), str(p.get("ts", "")))
        message = self.messages.get(key)
        if message is None or not message.get("streaming"):
            return {"ok": False, "error": "message_not_in_streaming_state"}
        message["text"] += str(p.get("markdown_text") or "")
        return {"ok": True, "channel": key[0], "ts": key[1]}

    def _m_chat_stop_stream(self, p: dict[str, Any]) -> dict[str, Any]:
        key = (str(p.get("channel", "")), str(p.get("ts", "")))
        message = self.messages.get(key)
        if message is None or not message.get("streaming"):
            return {"ok": False, "error": "message_not_in_streaming_state"}
        message["text"] += str(p.get("markdown_text") or "")
        message["streaming"] = False
        message["blocks"] = _json(p.get("blocks")) or []
        return {"ok": True, "channel": key[0], "ts": key[1], "message": message}

    def _m_conversations_replies(self, p: dict[str, Any]) -> dict[str, Any]:
        """A thread's messages, oldest first, paged by ``limit`` and ``cursor`` (Slack's shape);
        ``metadata`` only with ``include_all_metadata``."""
        channel, parent = str(p.get("channel", "")), str(p.get("ts", ""))
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        thread = [
            m
            for (ch, ts), m in sorted(self.messages.items(), key=lambda kv: kv[0][1])
            if ch == channel and (ts == parent or m.get("thread_ts") == parent)
        ]
        if not thread:
            return {"ok": False, "error": "thread_not_found"}
        start = int(p.get("cursor") or 0)
        limit = max(1, min(int(p.get("limit") or 1000), 1000))
        metadata = str(p.get("include_all_metadata", "")).lower() in ("true", "1")
        page = [
            {k: v for k, v in m.items() if metadata or k != "metadata"}
            for m in thread[start : start + limit]
        ]
        more = start + limit < len(thread)
        return {
            "ok": True,
            "messages": page,
            "has_more": more,
            "response_metadata": {"next_cursor": str(start + limit) if more else ""},
        }

    def _m_reactions_add(self, p: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True}

    def _m_reactions_remove(self, p: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True}

    def _m_assistant_threads_set_status(self, p: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True}

    def _m_apps_connections_open(self, p: dict[str, Any]) -> dict[str, Any]:
        if self.socket is None:
            return {"ok": False, "error": "not_allowed_token_type"}
        return {"ok": True, "url": self.socket.url}

    def _m_users_info(self, p: dict[str, Any]) -> dict[str, Any]:
        user = self.users.get(str(p.get("user", "")))
        if user is None:
            return {"ok": False, "error": "user_not_found"}
        return {"ok": True, "user": user}


class FakeSocketMode:
    """Slack's Socket Mode end on loopback (Slack API docs, "Using Socket Mode").

    Each connection gets ``hello``; :meth:`send` pushes an envelope (``events_api``,
    ``interactive``, ``slash_commands``) to the current connection and :meth:`disconnect` asks
    the client to reconnect (``type: disconnect``). ``acks`` holds every acknowledgement
    received, ``connections`` counts the connections.
    """

    def __init__(self) -> None:
        from websockets.sync.server import serve

        self.acks: list[dict[str, Any]] = []
        self.connections = 0
        self._current: Any = None
        self._lock = threading.Condition()
        self._server = serve(self._handle, "127.0.0.1", 0)
        self.url = f"ws://127.0.0.1:{self._server.socket.getsockname()[1]}/link/?ticket=t"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._thread.join(timeout=10)

    def _handle(self, connection: Any) -> None:
        connection.send(
            json.dumps(
                {
                    "type": "hello",
                    "num_connections": 1,
                    "connection_info": {"app_id": "A1"},
                    "debug_info": {"host": "fake"},
                }
            )
        )
        with self._lock:
            self.connections += 1
            self._current = connection
            self._lock.notify_all()
        try:
            for raw in connection:
                with self._lock:
                    self.acks.append(json.loads(raw))
                    self._lock.notify_all()
        except Exception:
            pass  # the client went away

    def wait_connected(self, count: int, timeout_s: float = 20) -> None:
        with self._lock:
            assert self._lock.wait_for(lambda: self.connections >= count, timeout_s), (
                f"{count} Socket Mode connections did not happen"
            )

    def send(self, kind: str, payload: dict[str, Any], envelope_id: str, retry: int = 0) -> None:
        with self._lock:
            connection = self._current
        connection.send(
            json.dumps(
                {
                    "envelope_id": envelope_id,
                    "payload": payload,
                    "type": kind,
                    "accepts_response_payload": kind == "slash_commands",
                    "retry_attempt": retry,
                    "retry_reason": "timeout" if retry else "",
                }
            )
        )

    def wait_ack(self, envelope_id: str, timeout_s: float = 20) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            return next((a for a in self.acks if a.get("envelope_id") == envelope_id), None)

        with self._lock:
            assert self._lock.wait_for(lambda: found() is not None, timeout_s), (
                f"envelope {envelope_id} was not acknowledged"
            )
            ack = found()
            assert ack is not None
            return ack

    def disconnect(self) -> None:
        with self._lock:
            connection = self._current
        connection.send(
            json.dumps(
                {
                    "type": "disconnect",
                    "reason": "refresh_requested",
                    "debug_info": {"host": "fake"},
                }
            )
        )


def _snake(method: str) -> str:
    """``chat.postMessage`` -> ``chat_post_message``."""
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), method.replace(".", "_"))


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _handler(fake: FakeSlack) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            url = urlsplit(self.path)
            method = url.path.removeprefix("/api/")
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            params: dict[str, Any] = dict(parse_qsl(url.query))
            if "json" in (self.headers.get("Content-Type") or ""):
                params.update(json.loads(raw or b"{}"))
            else:
                params.update(parse_qsl(raw.decode()))
            auth = self.headers.get("Authorization") or ""
            bearer = auth.startswith("Bearer ")
            token = auth.removeprefix("Bearer ") if bearer else params.get("token")
            status, body, headers = fake.answer(method, params, token)
            time.sleep(fake.held(method))
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            with contextlib.suppress(ConnectionError):  # a held caller may have died meanwhile
                self.wfile.write(data)

        def do_GET(self) -> None:
            self.do_POST()

    return Handler


def signed(
    secret: str,
    body: bytes,
    *,
    timestamp: int | None = None,
    retry: int | None = None,
    reason: str = "http_timeout",
    content_type: str = "application/json",
) -> dict[str, str]:
    """Return the headers Slack sends with ``body`` (v0 signature over the raw bytes)."""
    stamp = int(time.time()) if timestamp is None else timestamp
    headers = {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": str(stamp),
        "X-Slack-Signature": slack_signature(secret, stamp, body),
    }
    if retry is not None:
        headers["X-Slack-Retry-Num"] = str(retry)
        headers["X-Slack-Retry-Reason"] = reason
    return headers


def event_callback(
    event: dict[str, Any], event_id: str, team: str = TEAM, retry_attempt: int = 0
) -> dict[str, Any]:
    """An Events API ``event_callback`` envelope around ``event`` (Slack's shape)."""
    return {
        "token": "legacy",
        "team_id": team,
        "api_app_id": "A1",
        "event": event,
        "type": "event_callback",
        "event_id": event_id,
        "event_time": int(time.time()),
        "authorizations": [{"team_id": team, "user_id": BOT_USER, "is_bot": True}],
        "retry_attempt": retry_attempt,
    }


def message_event(
    text: str,
    ts: str,
    *,
    channel: str = "C1",
    user: str = "U1",
    kind: str = "message",
    thread_ts: str | None = None,
    channel_type: str = "channel",
    **extra: Any,
) -> dict[str, Any]:
    """A ``message`` or ``app_mention`` event as Slack sends it."""
    event: dict[str, Any] = {
        "type": kind,
        "user": user,
        "text": text,
        "ts": ts,
        "channel": channel,
        "event_ts": ts,
        "team": TEAM,
    }
    if kind == "message":
        event["channel_type"] = channel_type
    if thread_ts is not None:
        event["thread_ts"] = thread_ts
    event.update(extra)
    return event


@contextmanager
def fake_slack(**kwargs: Any) -> Iterator[FakeSlack]:
    """Run a :class:`FakeSlack` for the block."""
    with FakeSlack(**kwargs) as fake:
        yield fake
