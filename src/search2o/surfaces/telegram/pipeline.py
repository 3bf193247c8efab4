"""The one pipeline every Telegram update goes through, from the webhook and from polling alike.

verify (webhook: the secret header; polling: the connection is the bot token's) → normalise
(:mod:`~search2o.surfaces.telegram.updates`) → dedupe and record
(:class:`~search2o.surfaces.deliveries.DeliveryStore`: ``update_id`` and ``(chat,
message_id)``) → enqueue a job → acknowledge. Nothing slow happens before the
acknowledgement: no model, no search, no Bot API call (but one ``getMe`` per process when the
bot's username is not configured); only one short database transaction holding the record
and its job, shared with a burst's other questions (:class:`~search2o.surfaces.groupcommit.
GroupCommit`: a failure to enqueue leaves no record, so the retry is taken as new).

A question recorded before is acknowledged and ignored, but its job is enqueued again with the
same dedupe key (a no-op when the job exists), so no record is left without its job. A button
click becomes a ``telegram.rate`` job that always answers the click (``answerCallbackQuery``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from search2o.jobs.queue import JobQueue
from search2o.surfaces.answering import Outcome
from search2o.surfaces.answering import answer_dedupe_key as _dedupe_key
from search2o.surfaces.deliveries import DeliveryStore
from search2o.surfaces.groupcommit import GroupCommit
from search2o.surfaces.telegram.settings import TelegramSettings
from search2o.surfaces.telegram.updates import Bot, normalise_callback, normalise_message

__all__ = ["ANSWER", "RATE", "Outcome", "TelegramPipeline", "answer_dedupe_key"]

ANSWER = "telegram.answer"
RATE = "telegram.rate"
log = logging.getLogger("search2o.telegram")


def answer_dedupe_key(delivery_id: int) -> str:
    """Return the dedupe key of the one answer job of a delivery."""
    return _dedupe_key(ANSWER, delivery_id)


class TelegramPipeline:
    """Take Telegram updates: dedupe, record, enqueue (module docstring).

    Args:
        settings: the ``telegram`` section.
        store: the delivery records.
        queue: the job queue (``telegram.answer`` and ``telegram.rate`` registered).
        bot: returns who the bot is (cached by the caller).

    """

    def __init__(
        self,
        settings: TelegramSettings,
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

    def take(self, update: dict[str, Any]) -> Outcome:
        """Take one decoded ``Update`` (already verified)."""
        update_id = update.get("update_id")
        click = normalise_callback(update)
        if click is not None and isinstance(update_id, int):
            self.queue.enqueue(
                RATE,
                {"query": click.query_id, "chat": click.chat, "data": click.data},
                dedupe_key=f"{RATE}:{update_id}",
            )
            return Outcome("clicked")
        inbound = normalise_message(update, self.bot(), max_chars=self.settings.max_question_chars)
        if inbound is None:
            return Outcome("ignored")
        return self.questions.take(inbound)
