"""The one pipeline every Slack delivery goes through, from HTTP and from Socket Mode alike.

verify (HTTP: :mod:`search2o.signing`; Socket Mode: the connection is the app token's) →
normalise (:mod:`~search2o.surfaces.slack.events`) → dedupe and record
(:class:`~search2o.surfaces.deliveries.DeliveryStore`, shared with the other messenger
surfaces: ``event_id`` and ``(team, channel, ts)``) → enqueue a job → acknowledge.
Nothing slow happens before the acknowledgement: no model, no search, no Slack Web API call;
only one short, urgent database transaction holding the record and its job, shared with the
questions of a burst that arrive meanwhile (:class:`~search2o.surfaces.groupcommit.
GroupCommit`): a failure to enqueue leaves no record, so Slack's retry is taken as new.

A question recorded before is acknowledged and ignored, but its job is enqueued again with
the same dedupe key (a no-op when the job exists), so no record is ever left without its job.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from search2o.jobs.queue import JobQueue
from search2o.surfaces.answering import Outcome
from search2o.surfaces.answering import answer_dedupe_key as _dedupe_key
from search2o.surfaces.deliveries import DeliveryStore
from search2o.surfaces.groupcommit import GroupCommit
from search2o.surfaces.slack.events import SURFACE, normalise_event
from search2o.surfaces.slack.render import FEEDBACK_ACTIONS
from search2o.surfaces.slack.settings import SlackSettings

__all__ = ["ANSWER", "RATE", "Outcome", "SlackPipeline", "answer_dedupe_key"]

ANSWER = "slack.answer"
RATE = "slack.rate"
log = logging.getLogger("search2o.slack")


def answer_dedupe_key(delivery_id: int) -> str:
    """Return the dedupe key of the one answer job of a delivery."""
    return _dedupe_key(ANSWER, delivery_id)


class SlackPipeline:
    """Take Slack events and interactions: dedupe, record, enqueue (module docstring).

    Args:
        settings: the ``slack`` section.
        store: the delivery records.
        queue: the job queue (``slack.answer`` and ``slack.rate`` registered).

    """

    def __init__(self, settings: SlackSettings, store: DeliveryStore, queue: JobQueue) -> None:
        self.settings = settings
        self.store = store
        self.queue = queue
        # the burst's records and jobs, many per transaction (search2o.surfaces.groupcommit)
        self.questions = GroupCommit(store, queue, ANSWER)

    def take_event(self, envelope: dict[str, Any]) -> Outcome:
        """Take one ``event_callback`` (already verified)."""
        question = normalise_event(
            envelope,
            allow_bots=self.settings.allow_bots,
            known_thread=partial(self.store.knows_thread, SURFACE),
            max_chars=self.settings.max_question_chars,
        )
        if question is None:
            return Outcome("ignored")
        return self.questions.take(question)

    def take_interaction(self, payload: dict[str, Any]) -> Outcome:
        """Take one interactivity payload (a ``block_actions`` click on the thumbs buttons).

        The rating is stored by a job (``slack.rate``) so the click is acknowledged at once; a
        value that names another workspace's or channel's answer is ignored.
        """
        if payload.get("type") != "block_actions":
            return Outcome("ignored")
        team, channel = _object_id(payload, "team"), _object_id(payload, "channel")
        actions = payload.get("actions")
        for action in actions if isinstance(actions, list) else []:
            if not isinstance(action, dict) or action.get("action_id") not in FEEDBACK_ACTIONS:
                continue
            number, _, rating = str(action.get("value") or "").partition(":")
            if not number.isdigit() or rating not in ("up", "down"):
                continue
            delivery = self.store.load(int(number))
            # the store is shared: the value must name a Slack answer of this channel
            if delivery is None or (
                delivery.inbound.surface,
                delivery.inbound.workspace,
                delivery.inbound.channel,
            ) != (SURFACE, team, channel):
                continue
            stamp = str(action.get("action_ts") or "")[:32]
            self.queue.enqueue(
                RATE,
                {"delivery": delivery.id, "rating": rating},
                dedupe_key=f"{RATE}:{delivery.id}:{stamp}",
            )
            return Outcome("rated", delivery.id)
        return Outcome("ignored")


def _object_id(payload: dict[str, Any], key: str) -> str:
    """Return ``payload[key]["id"]`` as text, or ``""`` when ``payload[key]`` is not an object.

    Slack sends ``team`` and ``channel`` as objects (``{"id": "T…", …}``, "Interactivity:
    block_actions payloads"); a signed body holding anything else is ignored, not a 500.
    """
    value = payload.get(key)
    return str(value.get("id") or "") if isinstance(value, dict) else ""
