"""The shape every messenger's answer job shares: take a question, answer it once, never silently.

The pipelines' side (:func:`take_question`): record a normalised question once in the shared
delivery store and enqueue its one answer job (dedupe key ``<kind>:<delivery id>``) in one
transaction, so the record and its job are committed together or not at all; a question seen
before is enqueued again with the same key, a no-op when its job exists, so no record is left
without its job (one written before both were one transaction included).

The jobs' side (:class:`AnswerJob`), whatever the messenger:

1. load the payload's delivery (``{"delivery": id}``), refusing another surface's (the store is
   shared); a delivery already ``posted`` or ``failed`` is done;
2. mark it ``answering``, let the surface :meth:`~AnswerJob.deliver` the answer, and mark it
   ``posted`` (its question's text dropped);
3. an attempt that raises is retried by the queue; once the job is given up — the last attempt
   raised, or the worker running it died and its lease expired — the queue calls
   :meth:`~AnswerJob.final_failure` once (the kind's final-failure hook,
   :mod:`search2o.jobs.registry`): the surface shows a short visible error in the thread,
   editing its partial answer where one exists, and the delivery ends ``failed``.

A surface supplies only its parts: how it delivers (:meth:`~AnswerJob.deliver`), how it shows
a notice in place of the answer (:meth:`~AnswerJob.notice`), and optional steps around an
attempt (:meth:`~AnswerJob.before`, :meth:`~AnswerJob.after`, :meth:`~AnswerJob.clear`).
"""

from __future__ import annotations

import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from sqlalchemy.orm import Session

from search2o.client import Client
from search2o.errors import ConfigError, InputError
from search2o.jobs.context import JobContext
from search2o.jobs.info import JobInfo, JobRequest
from search2o.jobs.queue import JobQueue
from search2o.surfaces.deliveries import Delivery, DeliveryStore, Inbound, failure_notice
from search2o.surfaces.settings import MessengerSettings
from search2o.surfaces.turns import link_reply, speaker

__all__ = [
    "AnswerJob",
    "Outcome",
    "answer_dedupe_key",
    "check_shared_database",
    "log_taken",
    "record_questions",
    "take_question",
]

log = logging.getLogger("search2o.surfaces")


@dataclass(frozen=True)
class Outcome:
    """What a pipeline did with one delivery.

    ``status``: ``answered`` (recorded, job enqueued), ``duplicate`` (seen before),
    ``ignored`` (nothing to answer), or a surface's click (``rated``, ``clicked``).
    """

    status: str
    delivery: int | None = None


def answer_dedupe_key(kind: str, delivery_id: int) -> str:
    """Return the dedupe key of the one answer job of a delivery: ``<kind>:<delivery id>``."""
    return f"{kind}:{delivery_id}"


def take_question(store: DeliveryStore, queue: JobQueue, kind: str, inbound: Inbound) -> Outcome:
    """Record ``inbound`` once and enqueue its answer job ``kind``, in one transaction.

    One commit for both rows: the acknowledgement that follows waits for one write lock, not
    two, and a failure to enqueue rolls the record back, so the messenger's retry is taken
    as new (module docstring). ``store`` and ``queue`` must share one database.

    Raises:
        ConfigError: ``store`` and ``queue`` are on different databases.
        StorageError: the database failed; nothing was recorded.

    """
    check_shared_database(store, queue)
    # Urgent: the messenger waits for the acknowledgement; the answers' writes can wait.
    with store.database.session(urgent=True) as session:
        outcome = record_questions(session, store, queue, kind, [inbound])[0]
    log_taken(inbound, outcome)
    return outcome


def check_shared_database(store: DeliveryStore, queue: JobQueue) -> None:
    """Raise ``ConfigError`` unless ``store`` and ``queue`` are on one database (one commit)."""
    if store.database is not queue.database:
        raise ConfigError("a surface's delivery store and job queue must share one database")


def record_questions(
    session: Session,
    store: DeliveryStore,
    queue: JobQueue,
    kind: str,
    inbounds: Sequence[Inbound],
    sends: list[JobInfo] | None = None,
) -> list[Outcome]:
    """Write ``inbounds``' records and their answer jobs ``kind`` in ``session`` (not committed).

    A handful of statements whatever the count (:meth:`DeliveryStore.record_many`,
    :meth:`JobQueue.enqueue_many`). ``sends``: as :meth:`JobQueue.enqueue`'s (the new jobs are
    appended there instead of having their messages sent at the commit). Returns, per
    question in order, ``answered`` or ``duplicate`` with the delivery id.

    Raises:
        InputError: the jobs were refused (an unregistered kind).
        StorageError: the database failed.

    """
    recorded = store.record_many(inbounds, session)
    requests = [
        JobRequest(kind, {"delivery": delivery}, answer_dedupe_key(kind, delivery))
        for delivery, _ in recorded
    ]
    queue.enqueue_many(requests, session=session, sends=sends)
    return [Outcome("answered" if new else "duplicate", delivery) for delivery, new in recorded]


def log_taken(inbound: Inbound, outcome: Outcome) -> None:
    """Log a committed question: recorded or duplicate, its event and delivery (no text)."""
    log.info(
        "%s question %s",
        inbound.surface,
        "recorded" if outcome.status == "answered" else "duplicate",
        extra={"fields": {"event": inbound.event_key, "delivery": outcome.delivery}},
    )


class AnswerJob(ABC):
    """The handler and final-failure hook of one messenger's answer kind (module docstring).

    Args:
        settings: the surface's section.
        store: the delivery records.
        connect: returns the process's :class:`~search2o.client.Client` of our API with the
            surface token (:func:`search2o.surfaces.connect.shared_client`; not closed here).

    Class attributes a surface sets: ``surface`` (its name in the store), ``result_key`` (the
    name of the reply's ids in the job's result), ``footer`` and ``hint`` (the shared-scope
    footer and the one-line link hint), ``link`` (the link command in a direct message, its
    code as group 1).
    """

    surface: ClassVar[str]
    result_key: ClassVar[str]
    footer: ClassVar[str]
    hint: ClassVar[str]
    link: ClassVar[re.Pattern[str]]

    def __init__(
        self, settings: MessengerSettings, store: DeliveryStore, connect: Callable[[], Client]
    ) -> None:
        self.settings = settings
        self.store = store
        self.connect = connect

    # --- what a surface supplies ----------------------------------------------------------

    @abstractmethod
    def deliver(self, client: Client, delivery: Delivery) -> str:
        """Answer ``delivery`` in its thread; return the reply's ids (stored as ``reply_key``).

        Raises:
            ProviderError, Search2oError: this attempt failed; the queue retries it.

        """

    @abstractmethod
    def notice(self, delivery: Delivery, text: str) -> str:
        """Show ``text`` as the reply (editing the answer's message if one exists); its ids."""

    def before(self, delivery: Delivery) -> Delivery:
        """Prepare an attempt (e.g. find an earlier attempt's reply); return the delivery."""
        return delivery

    def after(self, delivery: Delivery) -> None:  # noqa: B027 - optional, empty by default
        """Tidy up after an attempt, whatever its outcome (e.g. clear a status)."""

    def clear(self, delivery: Delivery) -> None:
        """Clear what an attempt that died left showing (called by :meth:`final_failure`)."""
        self.after(delivery)

    # --- the shape ------------------------------------------------------------------------

    def load(self, payload: dict[str, Any]) -> Delivery | None:
        """Return the payload's delivery, or ``None`` when it is missing or another surface's."""
        delivery = self.store.load(int(payload.get("delivery") or 0))
        if delivery is None or delivery.inbound.surface != self.surface:
            return None
        return delivery

    def answer(self, ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
        """Answer one delivery; return ``{"state", <result_key>}``.

        Raises:
            InputError: the payload names no delivery of this surface (nothing to retry).
            ProviderError, Search2oError: this attempt failed; the queue retries it.

        """
        delivery = self.load(payload)
        if delivery is None:
            raise InputError("payload.delivery", f"names no {self.surface} delivery")
        if delivery.state in ("posted", "failed"):
            return {"state": delivery.state, self.result_key: delivery.reply_key}
        delivery = self.before(delivery)
        self.store.set(delivery.id, state="answering")
        try:
            replies = self.deliver(self.connect(), delivery)
            self.store.finish(delivery.id, "posted")
            return {"state": "posted", self.result_key: replies}
        finally:
            self.after(delivery)
            log.info(
                "%s answer attempt %s",
                self.surface,
                ctx.attempt,
                extra={"fields": {"delivery": delivery.id}},
            )

    def final_failure(self, payload: dict[str, Any], reason: str) -> None:
        """End the thread visibly, once: the final-failure hook of the answer kind.

        Shows a short error (:func:`~search2o.surfaces.deliveries.failure_notice`) in place of
        the answer, clears what the dead attempt left showing and marks the delivery
        ``failed``. A delivery already ``posted`` is left alone.

        When the messenger cannot be reached (the outage that failed the answer often lasts),
        the delivery is marked ``failed`` all the same before the error is raised, so its
        state never says ``answering`` for an answer nobody is writing; the hook job retries
        the notice (a retry finds it ``failed`` and still shows it: the hook runs once per
        failed answer job, so a ``failed`` delivery it sees has shown no notice yet).

        Raises:
            ProviderError, Search2oError: the error could not be shown (the hook job retries).

        """
        delivery = self.load(payload)
        if delivery is None or delivery.state == "posted":
            return
        delivery = self.before(delivery)
        try:
            self.notice(delivery, failure_notice(reason))
        except Exception:
            self.store.finish(delivery.id, "failed")
            raise
        self.clear(delivery)
        self.store.finish(delivery.id, "failed")

    # --- parts the surfaces share ---------------------------------------------------------

    def linked(self, client: Client, delivery: Delivery) -> str | None:
        """Link the account when a direct message is the link command; the reply's ids."""
        inbound = delivery.inbound
        found = self.link.fullmatch(inbound.text.strip()) if inbound.direct else None
        if found is None:
            return None
        said = link_reply(client, inbound.workspace, inbound.user, found.group(1))
        return self.notice(delivery, said)

    def speaker(
        self,
        client: Client,
        delivery: Delivery,
        email: Callable[[], str | None] | None = None,
    ) -> tuple[str | None, str | None]:
        """Return ``(act-as value, footer)`` (:func:`search2o.surfaces.turns.speaker`).

        ``None`` as the act-as value: only the link hint may be shown (``unlinked =
        "link_only"``). The act-as value is stored with the delivery (ratings act as it).
        """
        inbound = delivery.inbound
        act_as, footer = speaker(
            client,
            inbound.workspace,
            inbound.user,
            direct=inbound.direct,
            unlinked=self.settings.unlinked,
            footer=self.footer,
            hint=self.hint,
            email=email,
        )
        if act_as is not None:
            self.store.set(delivery.id, act_as=act_as)
        return act_as, footer
