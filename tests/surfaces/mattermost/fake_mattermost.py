"""A fake Mattermost server (API v4) on loopback that speaks its wire format, and its senders.

:class:`FakeMattermost` is a real ASGI app served by uvicorn in a thread. REST, with
``Authorization: Bearer <bot token>`` checked: ``GET /api/v4/users/me``, ``GET
/api/v4/users/{id}`` (``email`` empty while :attr:`show_email` is false, as with
``ShowEmailAddress`` off), ``GET /api/v4/users/me/channels``, ``GET
/api/v4/channels/{id}/posts?since=`` and ``GET /api/v4/posts/{id}/thread`` (``{"order",
"posts"}``), ``POST /api/v4/posts`` and ``PUT /api/v4/posts/{id}/patch``; every answer carries
``X-Ratelimit-Limit/-Remaining/-Reset``, and :meth:`fail` injects 429s (``X-Ratelimit-Remaining:
0``, ``X-Ratelimit-Reset``). The WebSocket ``/api/v4/websocket`` waits for
``authentication_challenge``, answers ``{"status": "OK", "seq_reply"}``, sends ``hello``, then
a ``posted`` event (``data.post`` and ``data.mentions`` as JSON strings) for every post — the
bot's own included — and answers ``ping`` with ``pong``. :meth:`drop` closes every socket;
:meth:`stall` makes the open ones silent (no events, no pongs) while they stay open, as behind
a proxy that stopped forwarding; posts made meanwhile are only found by a backfill.

:meth:`FakeMattermost.click` sends a button's callback the way Mattermost does (its
``integration.url``, the ``context``); :func:`send_command` sends a slash command's form.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import string
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

BOT_TOKEN = "fakebottoken0123456789abcd"
COMMAND_TOKEN = "fakecommandtoken0123456789"
_CLOSE = object()


def new_id() -> str:
    """A 26-character Mattermost id."""
    return "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(26))


BOT_ID, ANN_ID, BOB_ID = new_id(), new_id(), new_id()
TEAM_ID, TOWN_ID = new_id(), new_id()
DM_ID = new_id()


@dataclass
class Call:
    """One REST call as received: method, path, JSON body, when (monotonic), the status."""

    method: str
    path: str
    body: Any
    at: float
    status: int = 200


@dataclass
class _Socket:
    queue: asyncio.Queue[Any]
    loop: asyncio.AbstractEventLoop
    stalled: bool = False


@dataclass
class FakeMattermost:
    """The fake server (module docstring); ``url`` is set once it is served."""

    url: str = ""
    show_email: bool = True
    calls: list[Call] = field(default_factory=list)
    posts: dict[str, dict[str, Any]] = field(default_factory=dict)
    faults: dict[str, int] = field(default_factory=dict)
    reset_s: int = 1
    sockets: list[_Socket] = field(default_factory=list)
    authenticated: int = 0

    def __post_init__(self) -> None:
        self.lock = threading.Lock()
        self.users = {
            BOT_ID: {"id": BOT_ID, "username": "search2o", "is_bot": True, "email": ""},
            ANN_ID: {"id": ANN_ID, "username": "ann", "email": "ann@example.com"},
            BOB_ID: {"id": BOB_ID, "username": "bob", "email": "bob@example.com"},
        }
        self.channels = {
            TOWN_ID: {"id": TOWN_ID, "type": "O", "team_id": TEAM_ID, "name": "town-square"},
            DM_ID: {"id": DM_ID, "type": "D", "team_id": "", "name": f"{BOT_ID}__{ANN_ID}"},
        }

    def app(self) -> Starlette:
        """Return the ASGI app (serve it on loopback)."""
        return Starlette(
            routes=[
                Route("/api/v4/users/me/channels", self._my_channels),
                Route("/api/v4/users/{user_id}", self._user),
                Route("/api/v4/channels/{channel_id}/posts", self._channel_posts),
                Route("/api/v4/posts/{post_id}/thread", self._thread),
                Route("/api/v4/posts", self._create, methods=["POST"]),
                Route("/api/v4/posts/{post_id}/patch", self._patch, methods=["PUT"]),
                WebSocketRoute("/api/v4/websocket", self._websocket),
            ]
        )

    # --- what a test does ----------------------------------------------------------------

    def fail(self, kind: str, times: int, reset_s: int = 1) -> None:
        """Answer the next ``times`` calls of ``kind`` (``patch``, ``create``) with 429."""
        self.faults[kind] = times
        self.reset_s = reset_s

    def user_post(
        self,
        text: str,
        *,
        user: str = ANN_ID,
        channel: str = DM_ID,
        root_id: str = "",
        mention: bool = False,
        broadcast: bool = True,
    ) -> dict[str, Any]:
        """Post ``text`` as a person (broadcast as a ``posted`` event unless ``broadcast`` is
        false — e.g. while stalled the event is lost anyway); return the post."""
        post = self._store(user, channel, text, root_id, {})
        if broadcast:
            self._broadcast(post, [BOT_ID] if mention else [])
        return post

    def resend(self, post: dict[str, Any], mention: bool = False) -> None:
        """Broadcast ``post``'s ``posted`` event once more (a re-delivery)."""
        self._broadcast(post, [BOT_ID] if mention else [])

    def drop(self) -> None:
        """Close every open WebSocket (a dropped connection)."""
        for sock in list(self.sockets):
            sock.loop.call_soon_threadsafe(sock.queue.put_nowait, _CLOSE)

    def stall(self) -> None:
        """Make every open WebSocket silent while it stays open."""
        for sock in self.sockets:
            sock.stalled = True

    def bot_posts(self, channel: str | None = None) -> list[dict[str, Any]]:
        """The bot's posts (in ``channel``), oldest first."""
        with self.lock:
            found = [p for p in self.posts.values() if p["user_id"] == BOT_ID]
        found = [p for p in found if channel is None or p["channel_id"] == channel]
        return sorted(found, key=lambda p: p["create_at"])

    def of(self, method: str, path_part: str) -> list[Call]:
        """The calls of ``method`` whose path holds ``path_part``."""
        return [c for c in self.calls if c.method == method and path_part in c.path]

    def click(
        self,
        post: dict[str, Any],
        index: int,
        user: str = ANN_ID,
        context: dict[str, Any] | None = None,
    ) -> httpx.Response:
        """Click button ``index`` of ``post`` as Mattermost sends it (``context`` overrides)."""
        action = post["props"]["attachments"][0]["actions"][index]
        integration = action["integration"]
        body = {
            "user_id": user,
            "user_name": self.users[user]["username"],
            "channel_id": post["channel_id"],
            "team_id": TEAM_ID,
            "post_id": post["id"],
            "trigger_id": new_id(),
            "type": "",
            "data_source": "",
            "context": integration["context"] if context is None else context,
        }
        return httpx.post(integration["url"], json=body, timeout=10)

    # --- REST ----------------------------------------------------------------------------

    def _authorized(self, request: Request) -> bool:
        return request.headers.get("authorization") == f"Bearer {BOT_TOKEN}"

    def _answer(self, request: Request, body: Any, payload: Any, kind: str = "") -> Response:
        call = Call(request.method, request.url.path, body, time.monotonic())
        self.calls.append(call)
        headers = {
            "X-Ratelimit-Limit": "10",
            "X-Ratelimit-Remaining": "9",
            "X-Ratelimit-Reset": "1",
        }
        if not self._authorized(request):
            call.status = 401
            error = {"id": "api.context.session_expired.app_error", "status_code": 401}
            return JSONResponse(error, status_code=401)
        with self.lock:
            failing = self.faults.get(kind, 0)
            if failing:
                self.faults[kind] = failing - 1
        if failing:
            call.status = 429
            headers.update({"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": str(self.reset_s)})
            error = {"id": "api.context.rate_limit.app_error", "status_code": 429}
            return JSONResponse(error, status_code=429, headers=headers)
        result = payload() if callable(payload) else payload
        if isinstance(result, Response):
            call.status = result.status_code
            return result
        return JSONResponse(result, headers=headers)

    async def _user(self, request: Request) -> Response:
        user_id = request.path_params["user_id"]
        user_id = BOT_ID if user_id == "me" else user_id
        found = dict(self.users.get(user_id) or {})
        if not found:
            return self._answer(request, None, JSONResponse({"id": "missing"}, status_code=404))
        if found.get("email"):
            found["email_verified"] = True
        if not self.show_email and user_id != BOT_ID:
            found["email"] = ""
        return self._answer(request, None, found)

    async def _my_channels(self, request: Request) -> Response:
        return self._answer(request, None, list(self.channels.values()))

    def _listing(self, posts: list[dict[str, Any]]) -> dict[str, Any]:
        posts = sorted(posts, key=lambda p: p["create_at"], reverse=True)
        return {"order": [p["id"] for p in posts], "posts": {p["id"]: p for p in posts}}

    async def _channel_posts(self, request: Request) -> Response:
        channel = request.path_params["channel_id"]
        since = int(request.query_params.get("since", 0))
        with self.lock:
            found = [
                p
                for p in self.posts.values()
                if p["channel_id"] == channel and max(p["create_at"], p["update_at"]) > since
            ]
        return self._answer(request, None, self._listing(found))

    async def _thread(self, request: Request) -> Response:
        root = request.path_params["post_id"]
        with self.lock:
            found = [p for p in self.posts.values() if root in (p["id"], p["root_id"])]
        return self._answer(request, None, self._listing(found))

    async def _create(self, request: Request) -> Response:
        body = json.loads(await request.body())

        def make() -> Any:
            if len(body.get("message", "")) > 16_383:
                return JSONResponse({"id": "model.post.is_valid.msg.app_error"}, status_code=400)
            post = self._store(
                BOT_ID,
                body["channel_id"],
                body["message"],
                body.get("root_id", ""),
                body.get("props") or {},
            )
            self._broadcast(post, [])
            return post

        return self._answer(request, body, make, "create")

    async def _patch(self, request: Request) -> Response:
        body = json.loads(await request.body())
        post_id = request.path_params["post_id"]

        def patch() -> Any:
            with self.lock:
                post = self.posts.get(post_id)
                if post is None:
                    return JSONResponse({"id": "missing"}, status_code=404)
                if len(body.get("message", "")) > 16_383:
                    return JSONResponse({"id": "model.post.is_valid.msg"}, status_code=400)
                post["message"] = body.get("message", post["message"])
                if "props" in body:
                    post["props"] = body["props"]
                post["edit_at"] = post["update_at"] = int(time.time() * 1000)
                return dict(post)

        return self._answer(request, body, patch, "patch")

    def _store(
        self, user: str, channel: str, text: str, root_id: str, props: dict[str, Any]
    ) -> dict[str, Any]:
        with self.lock:
            now = max([int(time.time() * 1000), *(p["create_at"] + 1 for p in self.posts.values())])
            post = {
                "id": new_id(),
                "create_at": now,
                "update_at": now,
                "edit_at": 0,
                "delete_at": 0,
                "user_id": user,
                "channel_id": channel,
                "root_id": root_id,
                "message": text,
                "type": "",
                "props": props,
            }
            self.posts[post["id"]] = post
            return dict(post)

    # --- the WebSocket -------------------------------------------------------------------

    def _broadcast(self, post: dict[str, Any], mentions: list[str]) -> None:
        channel = self.channels.get(post["channel_id"], {})
        event = {
            "event": "posted",
            "data": {
                "channel_type": channel.get("type", "O"),
                "channel_name": channel.get("name", ""),
                "team_id": channel.get("team_id", ""),
                "sender_name": "@" + str(self.users.get(post["user_id"], {}).get("username")),
                "post": json.dumps(post),
                **({"mentions": json.dumps(mentions)} if mentions else {}),
            },
            "broadcast": {"channel_id": post["channel_id"], "team_id": "", "user_id": ""},
        }
        for sock in list(self.sockets):
            if not sock.stalled:  # behind a stalled proxy the event is lost
                sock.loop.call_soon_threadsafe(sock.queue.put_nowait, event)

    async def _websocket(self, ws: WebSocket) -> None:
        await ws.accept()
        try:
            challenge = json.loads(await ws.receive_text())
        except (WebSocketDisconnect, ValueError):
            return
        data = challenge.get("data") or {}
        if challenge.get("action") != "authentication_challenge" or data.get("token") != BOT_TOKEN:
            await ws.close(code=1008)
            return
        self.authenticated += 1
        sock = _Socket(asyncio.Queue(), asyncio.get_running_loop())
        self.sockets.append(sock)
        seq = 0
        await ws.send_json({"status": "OK", "seq_reply": challenge.get("seq")})
        await ws.send_json({"event": "hello", "data": {"server_version": "10.5.0"}, "seq": seq})

        async def read() -> None:
            while True:
                frame = json.loads(await ws.receive_text())
                if frame.get("action") == "ping" and not sock.stalled:
                    await ws.send_json(
                        {"status": "OK", "seq_reply": frame.get("seq"), "data": {"text": "pong"}}
                    )

        reader = asyncio.create_task(read())
        try:
            while True:
                getting = asyncio.create_task(sock.queue.get())
                done, _ = await asyncio.wait({getting, reader}, return_when=asyncio.FIRST_COMPLETED)
                if reader in done:
                    getting.cancel()
                    return
                item = getting.result()
                if item is _CLOSE:
                    await ws.close(code=1001)
                    return
                seq += 1
                await ws.send_json({**item, "seq": seq})
        except (WebSocketDisconnect, RuntimeError):
            return
        finally:
            reader.cancel()
            self.sockets.remove(sock)


def send_command(
    url: str,
    text: str,
    *,
    token: str | None = COMMAND_TOKEN,
    user: str = ANN_ID,
    channel: str = TOWN_ID,
    channel_name: str = "town-square",
) -> httpx.Response:
    """Send ``/search2o text`` to ``url`` as Mattermost does (a form; no token when ``None``)."""
    form = {
        "channel_id": channel,
        "channel_name": channel_name,
        "command": "/search2o",
        "team_domain": "acme",
        "team_id": TEAM_ID,
        "text": text,
        "trigger_id": new_id(),
        "user_id": user,
        "user_name": "ann",
        "response_url": "http://127.0.0.1:1/hooks/x",
    }
    if token is not None:
        form["token"] = token
    return httpx.post(url, data=form, timeout=10)
