"""The delivery records of Slack questions: dedupe, record, and the state of each answer.

One row of ``slack_deliveries`` per question (:mod:`search2o.storage.slack_models`). The
question's text is sealed under a data key of its own wrapped by the KEK (envelope
encryption, :mod:`search2o.crypto.envelope`), because the job payload may hold ids only and
conversation content is never stored in plain text.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import exists, select, update
from sqlalchemy.exc import IntegrityError

from search2o.crypto.envelope import associated_data, new_data_key, open_json, seal_json
from search2o.crypto.keys import KeyProvider, WrappedKey
from search2o.storage.db import Database
from search2o.storage.slack_models import SlackDelivery
from search2o.surfaces.slack.events import Question

__all__ = ["Delivery", "DeliveryStore"]

_KIND = "slack.question"


@dataclass(frozen=True)
class Delivery:
    """A delivery record as the answer job reads it (the text opened)."""

    id: int
    question: Question
    state: str
    reply_ts: str | None
    act_as: str | None
    answer_message_id: str | None


class DeliveryStore:
    """Reads and writes ``slack_deliveries``.

    Args:
        database: our database.
        keys: the KEK provider that wraps each question's data key.

    """

    def __init__(self, database: Database, keys: KeyProvider) -> None:
        self.database = database
        self.keys = keys

    def record(self, question: Question) -> tuple[int, bool]:
        """Record ``question`` once; return ``(delivery id, whether it is new)``.

        A question seen before, by its ``event_id`` or by its message (``team, channel, ts``:
        one post arrives as ``app_mention`` and as ``message``), is not recorded again; its
        first row's id is returned. Two deliveries racing are settled by the unique constraints.
        """
        found = self._find(question)
        if found is not None:
            return found, False
        key = new_data_key()
        wrapped = self.keys.wrap(key)
        row = SlackDelivery(
            event_id=question.event_id,
            team=question.team,
            channel=question.channel,
            channel_type=question.channel_type,
            message_ts=question.ts,
            thread_ts=question.thread_ts,
            user=question.user,
            state="pending",
            kek_id=wrapped.key_id,
            kek_version=wrapped.version,
            wrapped_key=wrapped.blob,
            sealed_text=seal_json(key, question.text, self._aad(question)),
        )
        try:
            with self.database.session() as session:
                session.add(row)
                session.flush()
                return row.id, True
        except IntegrityError:
            again = self._find(question)
            if again is None:
                raise
            return again, False

    def _find(self, question: Question) -> int | None:
        with self.database.session() as session:
            found = session.scalar(
                select(SlackDelivery.id).where(
                    (SlackDelivery.event_id == question.event_id)
                    | (
                        (SlackDelivery.team == question.team)
                        & (SlackDelivery.channel == question.channel)
                        & (SlackDelivery.message_ts == question.ts)
                    )
                )
            )
            return int(found) if found is not None else None

    def knows_thread(self, team: str, channel: str, thread_ts: str) -> bool:
        """Whether we answer in this thread (some question of it was recorded)."""
        with self.database.session() as session:
            return bool(
                session.scalar(
                    select(
                        exists().where(
                            SlackDelivery.team == team,
                            SlackDelivery.channel == channel,
                            SlackDelivery.thread_ts == thread_ts,
                        )
                    )
                )
            )

    def load(self, delivery_id: int) -> Delivery | None:
        """Return a delivery with its text opened (``""`` once dropped), or ``None``."""
        with self.database.session() as session:
            row = session.get(SlackDelivery, delivery_id)
            if row is None:
                return None
            question = Question(
                event_id=row.event_id,
                team=row.team,
                channel=row.channel,
                channel_type=row.channel_type,
                user=row.user,
                ts=row.message_ts,
                thread_ts=row.thread_ts,
                text="",
            )
            if row.sealed_text is not None and row.wrapped_key is not None:
                key = self.keys.unwrap(
                    WrappedKey(str(row.kek_id), int(row.kek_version or 0), bytes(row.wrapped_key))
                )
                text = open_json(
                    key, bytes(row.sealed_text), self._aad(question), f"slack question {row.id}"
                )
                question = Question(**{**question.__dict__, "text": str(text)})
            return Delivery(
                row.id, question, row.state, row.reply_ts, row.act_as, row.answer_message_id
            )

    def set(self, delivery_id: int, **values: object) -> None:
        """Update columns of one delivery (``state``, ``reply_ts``, ``act_as`` …)."""
        with self.database.session() as session:
            session.execute(
                update(SlackDelivery).where(SlackDelivery.id == delivery_id).values(**values)
            )

    def finish(self, delivery_id: int, state: str, **values: object) -> None:
        """Set the final ``state`` (``posted`` or ``failed``) and drop the question's text."""
        self.set(delivery_id, state=state, sealed_text=None, wrapped_key=None, **values)

    @staticmethod
    def _aad(question: Question) -> bytes:
        return associated_data(_KIND, f"{question.team}/{question.channel}", question.ts)
