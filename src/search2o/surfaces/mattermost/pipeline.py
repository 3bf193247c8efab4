"""The one pipeline every Mattermost post goes through: the WebSocket, its backfill, the command.

normalise (:mod:`~search2o.surfaces.mattermost.posts`) → dedupe and record
(:class:`~search2o.surfaces.deliveries.DeliveryStore`, on ``post.id``) → enqueue
``mattermost.answer`` → acknowledge, and advance the ``since`` cursor (``surface_cursors``:
the newest ``create_at`` taken, in Unix milliseconds) that a reconnect backfills from.
Nothing slow happens before the acknowledgement: no model, no search, no Mattermost call.

The record and its job are one transaction, shared with a burst's other posts
(:class:`~search2o.surfaces.groupcommit.GroupCommit`): a failure to enqueue leaves no record.
A post recorded before is ignored, but its job is enqueued again with the same dedupe key (a
no-op when the job exists), so no record is left without its job. A genuine button click
becomes a ``mattermost.rate`` job.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from search2o.jobs.queue import JobQueue
from search2o.surfaces.answering import Outcome
from search2o.surfaces.deliveries import DeliveryStore, Inbound
from search2o.surfaces.groupcommit import GroupCommit
from search2o.surfaces.mattermost.posts import SURFACE, Bot, normalise_post
from search2o.surfaces.mattermost.settings import MattermostSettings

__all__ = ["ANSWER", "RATE", "SINCE", "MattermostPipeline", "Outcome"]

ANSWER = "mattermost.answer"
RATE = "mattermost.rate"
SINCE = "since"
log = logging.getLogger("search2o.mattermost")


class MattermostPipeline:
    """Take posts and clicks: dedupe, record, enqueue (module docstring).

    Args:
        settings: the ``mattermost`` section.
        store: the delivery records.
        queue: the job queue (``mattermost.answer`` and ``mattermost.rate`` registered).
        bot: returns who the bot is (cached by the caller).

    """

    def __init__(
        self,
        settings: MattermostSettings,
        store: DeliveryStore,
        queue: JobQueue,
        bot: Callable[[], Bot],
    ) -> None:
        self.settings = settings
        self.store = store
        self.queue = queue
        # the burst's records and jobs, many per transaction (search2o.surfaces.groupcommit)
        self.questions = GroupCommit(store, queue, ANSWER)
        self.bot = bot

    def take_post(self, post: dict[str, Any], channel_type: str, mentions: list[str]) -> Outcome:
        """Take one decoded post (from the WebSocket or a backfill)."""
        bot = self.bot()

        def known(channel: str, root: str) -> bool:
            return self.store.knows_thread(SURFACE, bot.id, channel, root)

        inbound = normalise_post(
            post, channel_type, mentions, bot, known, max_chars=self.settings.max_question_chars
        )
        outcome = Outcome("ignored") if inbound is None else self.take(inbound)
        self.advance(int(post.get("create_at") or 0))
        return outcome

    def take(self, inbound: Inbound) -> Outcome:
        """Record a normalised question once and enqueue its answer."""
        return self.questions.take(inbound)

    def since(self) -> int | None:
        """Return the newest ``create_at`` taken (Unix ms), or ``None`` before the first."""
        value = self.store.cursor(SURFACE, self.bot().id, SINCE)
        return int(value) if value and value.isdigit() else None

    def advance(self, create_at_ms: int) -> None:
        """Move the ``since`` cursor forward to ``create_at_ms`` (never back)."""
        if create_at_ms > (self.since() or 0):
            self.store.set_cursor(SURFACE, self.bot().id, SINCE, str(create_at_ms))

    def take_click(self, delivery_id: int, rating: str, channel: str, trigger: str) -> None:
        """Enqueue the rating of a verified click (``trigger``: Mattermost's ``trigger_id``)."""
        self.queue.enqueue(
            RATE,
            {"delivery": delivery_id, "rating": rating, "channel": channel},
            dedupe_key=f"{RATE}:{trigger}" if trigger else None,
        )
