"""Long polling of Telegram (``getUpdates``) for installs without a public URL.

``search2o telegram poll`` runs :meth:`Poller.run`. Each round asks ``getUpdates`` with the
stored ``offset`` (Bot API "getUpdates": an offset confirms every update below it, and each
update is served until confirmed), puts every update through the pipeline — which records it —
and only then stores ``offset = last update_id + 1`` in ``surface_cursors``. A crash between the
two repeats the batch after a restart, and the pipeline's dedupe on ``update_id`` makes the
repeat a no-op; an update is never confirmed before it is recorded, so none is lost. Polling
and a webhook exclude each other (Telegram answers 409 Conflict to ``getUpdates`` while a
webhook is set); ``Poller.run`` removes a webhook first (``deleteWebhook``, keeping pending
updates).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from search2o.errors import ProviderError
from search2o.surfaces.deliveries import DeliveryStore
from search2o.surfaces.telegram.botapi import BotApi
from search2o.surfaces.telegram.pipeline import TelegramPipeline
from search2o.surfaces.telegram.updates import SURFACE

__all__ = ["OFFSET", "Poller"]

OFFSET = "offset"
ALLOWED = ["message", "callback_query"]
log = logging.getLogger("search2o.telegram")


class Poller:
    """Reads ``getUpdates`` into the pipeline with a persisted offset (module docstring).

    Args:
        api: the Bot API.
        pipeline: where updates go.
        store: keeps the offset (``surface_cursors``: ``telegram``, the bot id, ``offset``).
        workspace: the bot's id.
        timeout_s: long-poll seconds per ``getUpdates``.
        backoff_s: the first pause after a failed round (doubling to 30 s).

    """

    def __init__(
        self,
        api: BotApi,
        pipeline: TelegramPipeline,
        store: DeliveryStore,
        workspace: str,
        *,
        timeout_s: int = 30,
        backoff_s: float = 1.0,
    ) -> None:
        self.api = api
        self.pipeline = pipeline
        self.store = store
        self.workspace = workspace
        self.timeout_s = timeout_s
        self.backoff_s = backoff_s

    def offset(self) -> int:
        """Return the stored offset (0: none yet)."""
        value = self.store.cursor(SURFACE, self.workspace, OFFSET)
        return int(value) if value and value.isdigit() else 0

    def poll_once(self) -> int:
        """Run one ``getUpdates`` round; return how many updates it took.

        Raises:
            ProviderError: Telegram could not be reached or refused the call.

        """
        offset = self.offset()
        params: dict[str, Any] = {"timeout": self.timeout_s, "allowed_updates": ALLOWED}
        if offset:
            params["offset"] = offset
        updates = self.api.call("getUpdates", **params) or []
        last = offset - 1
        for update in updates:
            if not isinstance(update, dict) or not isinstance(update.get("update_id"), int):
                continue
            self.pipeline.take(update)
            last = max(last, int(update["update_id"]))
        if last + 1 > offset:
            self.store.set_cursor(SURFACE, self.workspace, OFFSET, str(last + 1))
        return len(updates)

    def run(self, stop: threading.Event) -> None:
        """Poll until ``stop`` is set; failed rounds back off (1 s doubling to 30 s)."""
        self.api.call("deleteWebhook", drop_pending_updates=False)
        pause = self.backoff_s
        while not stop.is_set():
            try:
                self.poll_once()
                pause = self.backoff_s
            except ProviderError as exc:
                log.warning("telegram getUpdates failed (%s); again in %.0f s", exc.message, pause)
                stop.wait(pause)
                pause = min(pause * 2, 30.0)
