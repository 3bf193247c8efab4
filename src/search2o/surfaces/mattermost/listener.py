"""The WebSocket listener: Mattermost's event stream into the pipeline, with backfill.

``search2o mattermost listen`` runs :meth:`Listener.run`. Each connection (Mattermost API v4,
"WebSocket"): open ``{url}/api/v4/websocket``, send ``authentication_challenge`` with the bot
token, wait for ``hello``, then **backfill** — every channel the bot is in
(``GET /users/me/channels``), its posts since the stored ``since`` cursor minus a minute of
overlap (``GET /channels/{id}/posts?since=``) — and then take every ``posted`` event. The
pipeline dedupes on ``post.id``, so what the backfill and the stream both bring is answered
once. The first connection ever stores "now" and answers no history; a gap is backfilled
at most ``mattermost.backfill_max_s`` back.

A closed or failed connection is opened again after a pause that doubles from 1 s to 30 s. The
**watchdog**: every third of ``mattermost.watchdog_s`` without a frame the listener sends a
``ping``; when no frame at all (event or pong) arrived for ``watchdog_s``, the socket is taken
for dead although it looks open (a proxy that stopped forwarding), closed and opened again.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

from websockets.exceptions import WebSocketException
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as ws_connect

from search2o.errors import ProviderError
from search2o.surfaces.mattermost.pipeline import MattermostPipeline
from search2o.surfaces.mattermost.posts import decode_posted
from search2o.surfaces.mattermost.restapi import MattermostApi

__all__ = ["Listener", "StalledError"]

OVERLAP_MS = 60_000
log = logging.getLogger("search2o.mattermost")


class StalledError(ProviderError):
    """The socket looked open but brought nothing, not even a pong, for ``watchdog_s``."""

    def __init__(self, watchdog_s: float) -> None:
        super().__init__(f"the Mattermost websocket was silent for {watchdog_s:.0f} s")


class Listener:
    """Reads the event stream into the pipeline (module docstring).

    Args:
        url: ``mattermost.url``.
        token: the bot token.
        api: the REST API (backfill).
        pipeline: where posts go.
        watchdog_s: no frame for this long: reconnect.
        backfill_max_s: the oldest gap a reconnect backfills.
        backoff_s: the first pause after a failed connection (doubling to 30 s).

    """

    def __init__(
        self,
        url: str,
        token: str,
        api: MattermostApi,
        pipeline: MattermostPipeline,
        *,
        watchdog_s: float = 30.0,
        backfill_max_s: int = 86_400,
        backoff_s: float = 1.0,
    ) -> None:
        scheme = "wss" if url.startswith("https") else "ws"
        self.ws_url = f"{scheme}{url[url.index(':') :].rstrip('/')}/api/v4/websocket"
        self._token = token
        self.api = api
        self.pipeline = pipeline
        self.watchdog_s = watchdog_s
        self.backfill_max_s = backfill_max_s
        self.backoff_s = backoff_s
        self.connections = 0
        self._seq = 0

    def run(self, stop: threading.Event) -> None:
        """Listen until ``stop`` is set, reconnecting with backoff (module docstring)."""
        pause = self.backoff_s
        while not stop.is_set():
            try:
                self.session(stop)
                pause = self.backoff_s
            except (OSError, TimeoutError, WebSocketException, ProviderError) as exc:
                log.warning(
                    "mattermost websocket lost (%s); again in %.0f s", type(exc).__name__, pause
                )
                stop.wait(pause)
                pause = min(pause * 2, 30.0)

    def _send(self, ws: ClientConnection, action: str, data: dict[str, Any] | None = None) -> None:
        self._seq += 1
        frame: dict[str, Any] = {"seq": self._seq, "action": action}
        if data is not None:
            frame["data"] = data
        ws.send(json.dumps(frame))

    def session(self, stop: threading.Event) -> None:
        """One connection: authenticate, backfill after ``hello``, take events until it ends.

        Raises:
            StalledError: the watchdog fired.
            OSError, WebSocketException: the connection failed or closed.
            ProviderError: the backfill's REST calls failed.

        """
        with ws_connect(self.ws_url, open_timeout=self.watchdog_s) as ws:
            self.connections += 1
            self._send(ws, "authentication_challenge", {"token": self._token})
            heard = time.monotonic()
            while not stop.is_set():
                try:
                    frame = ws.recv(timeout=self.watchdog_s / 3)
                except TimeoutError:
                    if time.monotonic() - heard >= self.watchdog_s:
                        raise StalledError(self.watchdog_s) from None
                    self._send(ws, "ping")
                    continue
                heard = time.monotonic()
                try:
                    event = json.loads(frame)
                except ValueError:
                    continue
                if not isinstance(event, dict):
                    continue
                if event.get("event") == "hello":
                    self.backfill()
                    continue
                posted = decode_posted(event)
                if posted is not None:
                    self.pipeline.take_post(*posted)

    def backfill(self) -> int:
        """Take what was posted since the cursor in every channel of the bot; return the count.

        Raises:
            ProviderError: a REST call failed (the connection is then opened again).

        """
        now_ms = int(time.time() * 1000)
        since = self.pipeline.since()
        if since is None:  # the first connection ever: no history
            self.pipeline.advance(now_ms)
            return 0
        since = max(since - OVERLAP_MS, now_ms - self.backfill_max_s * 1000)
        taken = 0
        for channel in self.api.my_channels():
            channel_id, kind = str(channel.get("id") or ""), str(channel.get("type") or "")
            for post in self.api.posts_since(channel_id, since):
                if int(post.get("create_at") or 0) > since:
                    self.pipeline.take_post(post, kind, [])
                    taken += 1
        log.info("mattermost backfill took %s posts", taken)
        return taken
