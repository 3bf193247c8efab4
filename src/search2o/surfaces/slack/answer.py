"""The jobs of the Slack surface: answer a question in its thread, store a rating.

``slack.answer`` (payload ``{"delivery": id}``), idempotent through the delivery record:

1. a delivery already ``posted`` or ``failed`` is done; otherwise it becomes ``answering`` and
   the question gets a 👀 reaction (always removed at the end);
2. who it acts as: in a direct message the linked user (linked on the way by the Slack email,
   ``users.info``, when the account is not linked yet); in a channel, or for an unlinked user,
   the shared-channel principal (documents open to everyone), said in a footer with a one-line
   hint how to link (``slack.unlinked = "link_only"``: only the hint). ``link CODE`` in a
   direct message links the account;
3. the thread's conversation (:meth:`search2o.client.Client.conversation_for_thread`), or a new
   one (started by ``slack.agent`` when set) remembered for the thread; a follow-up in the
   thread continues it, and answers its agent's waiting ``ask``. The answer's run id is
   stored as soon as the answer names it: an attempt after a crash follows that run from its
   first event (the finished answer replayed, or the live one) and never asks again;
4. the answer in the thread: natively streamed (``chat.startStream`` / ``appendStream`` /
   ``stopStream`` with ``recipient_team_id`` and ``recipient_user_id``, buffered to one append
   per ``slack.update_every_s``), or, when streaming is off or refused, ``chat.postMessage`` and
   ``chat.update`` at most every ``update_every_s`` within the workspace's
   :class:`~search2o.surfaces.slack.webapi.UpdateBudget`. The answer's ``ts`` is stored as soon
   as the message exists, so an attempt after a crash edits that message and never posts a
   second one; the message carries metadata naming its delivery, so an attempt that died
   before storing the ``ts`` is found in the thread (``conversations.replies``) and edited.
   The final text (citations, Sources, footer, thumbs buttons) always lands: it
   waits for budget and for ``Retry-After``;
5. ``posted`` with the answer's message id; the question's text is dropped.

An attempt that fails is retried by the queue (backoff). Once the job is given up — its last
attempt raised, or the worker running it died and its lease expired — the kind's final-failure
hook (:meth:`SlackAnswerer.final_failure`, run once by the queue) posts a short visible error
in the thread (editing the answer if it exists), clears the 👀 and ends the delivery
``failed``: never a silent end.

``slack.rate`` (payload ``{"delivery", "rating"}``) stores a click of the thumbs buttons as the
answer's rating (:meth:`search2o.client.Client.rate`), acting as the principal that asked.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
import time
from collections.abc import Callable
from typing import Any

from search2o.client import Client
from search2o.errors import InputError, ProviderError
from search2o.jobs.context import JobContext
from search2o.surfaces.answering import AnswerJob
from search2o.surfaces.deliveries import Delivery, DeliveryStore
from search2o.surfaces.slack.events import SURFACE
from search2o.surfaces.slack.render import Rendered, escape, render_answer, render_notice
from search2o.surfaces.slack.settings import SlackSettings
from search2o.surfaces.slack.webapi import SlackApi, SlackCallError, UpdateBudget
from search2o.surfaces.turns import chat_turn

__all__ = ["CHANNEL_FOOTER", "LINK_HINT", "METADATA_EVENT", "SlackAnswerer", "answer_metadata"]

CHANNEL_FOOTER = "Answered from documents open to everyone in this workspace."
LINK_HINT = (
    "Link your account for answers with your own access: DM me `link CODE` "
    "(get a code in the search2o Web App)."
)
REACTION = "eyes"
METADATA_EVENT = "search2o_answer"
_LINK = re.compile(r"link\s+([0-9A-Za-z][0-9A-Za-z\- ]{4,40})", re.IGNORECASE)
log = logging.getLogger("search2o.slack")


class SlackAnswerer(AnswerJob):
    """The handlers of ``slack.answer`` and ``slack.rate`` (module docstring).

    The answer job's shape is :class:`~search2o.surfaces.answering.AnswerJob`'s; Slack
    supplies the delivery, the 👀 status and the notice.

    Args:
        settings: the ``slack`` section.
        store: the delivery records.
        api: the Slack Web API with the bot token.
        budget: this process's ``chat.update`` budget per workspace.
        connect: returns the process's :class:`~search2o.client.Client` of our API with the
            surface token (shared by every answer: it is thread-safe, and one connection pool
            spares each job a new TLS context).

    """

    surface = SURFACE
    result_key = "ts"
    footer = CHANNEL_FOOTER
    hint = LINK_HINT
    link = _LINK

    def __init__(
        self,
        settings: SlackSettings,
        store: DeliveryStore,
        api: SlackApi,
        budget: UpdateBudget,
        connect: Callable[[], Client],
    ) -> None:
        super().__init__(settings, store, connect)
        self.settings: SlackSettings = settings
        self.api = api
        self.budget = budget

    # --- slack.answer -------------------------------------------------------------------------

    def before(self, delivery: Delivery) -> Delivery:
        """Find the answer an attempt that died posted before storing its ``ts``."""
        if delivery.state == "answering" and delivery.reply_key is None:
            return self._adopt(delivery)
        return delivery

    def after(self, delivery: Delivery) -> None:
        """Remove the 👀 status reaction."""
        self._react("reactions.remove", delivery)

    def notice(self, delivery: Delivery, text: str) -> str:
        """Post ``text`` in the thread (editing the answer's message if it exists)."""
        return self._final(delivery, render_notice(text))

    def _adopt(self, delivery: Delivery) -> Delivery:
        """Return ``delivery`` with the ``ts`` of an answer an earlier attempt posted, if any.

        An attempt may die after ``chat.postMessage`` returned and before its ``ts`` was
        stored. Every first message of an answer carries metadata naming its delivery
        (:func:`answer_metadata`), so the thread is read (``conversations.replies`` with
        ``include_all_metadata``; scopes ``channels:history``, ``groups:history``,
        ``im:history``) for our bot's message with that id; its ``ts`` is stored and edited
        instead of posting a second message. A lookup that fails posts as before.
        """
        question = delivery.inbound
        try:
            me = str(self.api.call("auth.test").get("user_id") or "")
            cursor: str | None = None
            while True:
                params: dict[str, Any] = {"channel": question.channel, "ts": question.thread_key}
                params.update(include_all_metadata="true", limit=200)
                if cursor:
                    params["cursor"] = cursor
                page = self.api.call("conversations.replies", **params)
                for message in page.get("messages") or []:
                    if _ours(message, me, delivery.id):
                        ts = str(message["ts"])
                        self.store.set(delivery.id, reply_key=ts)
                        return dataclasses.replace(delivery, reply_key=ts)
                cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
                if not page.get("has_more") or cursor is None:
                    return delivery
        except ProviderError as exc:  # refused or unreachable: posting beats not answering
            log.warning("slack: looking for an earlier answer failed: %s", exc.message)
            return delivery

    def deliver(self, client: Client, delivery: Delivery) -> str:
        """Answer in the thread (module docstring, steps 2-5); return the answer's ``ts``."""
        self._react("reactions.add", delivery)
        linked = self.linked(client, delivery)
        if linked is not None:
            return linked
        question = delivery.inbound
        act_as, footer = self.speaker(client, delivery, email=lambda: self._email(question.user))
        if act_as is None:
            return self.notice(delivery, LINK_HINT)
        writer = _Writer(self, delivery)
        # A new thread starts slack.agent (if set); a follow-up continues the conversation,
        # and answers its agent's waiting `ask` when there is one.
        done = chat_turn(
            client.acting_as(act_as),
            (question.workspace, question.channel, question.thread_key),
            question.text,
            writer.add,
            start_agent=self.settings.agent,
            run_id=delivery.run_id,
            on_run=functools.partial(self.store.set_run, delivery.id),
        )
        if done.message_id:
            self.store.set(delivery.id, answer_message_id=done.message_id)
        rendered = render_answer(
            done.text, done.citations, footer=footer, feedback=str(delivery.id)
        )
        return writer.finish(rendered)

    def _email(self, user: str) -> str | None:
        """Return the user's email (``users.info``, scope ``users:read.email``), or None."""
        try:
            found = self.api.call("users.info", user=user)
        except SlackCallError as exc:
            log.warning("slack users.info failed: %s", exc.error)
            return None
        email = ((found.get("user") or {}).get("profile") or {}).get("email")
        return str(email) if isinstance(email, str) and email else None

    def _react(self, method: str, delivery: Delivery) -> None:
        """Add or remove the 👀 status reaction; its failure never stops the answer."""
        question = delivery.inbound
        try:
            self.api.call(
                method, channel=question.channel, timestamp=question.message_key, name=REACTION
            )
        except ProviderError as exc:
            log.info("slack %s: %s", method, exc.message)

    def _final(self, delivery: Delivery, rendered: Rendered) -> str:
        return _Writer(self, delivery, stream=False).finish(rendered)

    # --- slack.rate ---------------------------------------------------------------------------

    def rate(self, ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
        """Store a thumbs click as the answer's rating; return ``{"message", "rating"}``.

        Raises:
            InputError: the delivery, its answer or the rating is missing (nothing to retry).

        """
        delivery = self.load(payload)
        rating = payload.get("rating")
        if delivery is None or delivery.answer_message_id is None or delivery.act_as is None:
            raise InputError("payload.delivery", "names no answered Slack delivery")
        if rating not in ("up", "down"):
            raise InputError("payload.rating", "must be up or down")
        self.connect().acting_as(delivery.act_as).rate(delivery.answer_message_id, str(rating))
        return {"message": delivery.answer_message_id, "rating": rating}


def answer_metadata(delivery_id: int) -> dict[str, Any]:
    """Return the metadata of an answer's first message: its delivery id.

    Slack API docs, "Message metadata" (``event_type``, ``event_payload``); sending it needs
    no extra scope, reading it back needs the ``*:history`` scopes.
    """
    return {"event_type": METADATA_EVENT, "event_payload": {"delivery": delivery_id}}


def _ours(message: dict[str, Any], bot_user: str, delivery_id: int) -> bool:
    """Whether a ``conversations.replies`` message is our bot's answer to ``delivery_id``."""
    metadata = message.get("metadata") or {}
    payload = metadata.get("event_payload") or {}
    return (
        bool(bot_user)
        and message.get("user") == bot_user
        and metadata.get("event_type") == METADATA_EVENT
        and payload.get("delivery") == delivery_id
        and isinstance(message.get("ts"), str)
    )


class _Writer:
    """One answer's message in its thread: created once, then appended to or edited."""

    def __init__(self, owner: SlackAnswerer, delivery: Delivery, stream: bool = True) -> None:
        self.owner = owner
        self.delivery = delivery
        self.question = delivery.inbound
        self.ts = delivery.reply_key
        # A message from an earlier attempt is edited, never streamed into again.
        self.streaming = stream and owner.settings.stream and self.ts is None
        self.text = ""
        self.sent = 0
        self.last = 0.0

    def _created(self, ts: str) -> None:
        self.ts = ts
        self.owner.store.set(self.delivery.id, reply_key=ts)

    def _start(self) -> None:
        """Create the message: a native stream, or (refused, or off) a posted placeholder."""
        q, api = self.question, self.owner.api
        if self.streaming:
            try:
                started = api.call(
                    "chat.startStream",
                    channel=q.channel,
                    thread_ts=q.thread_key,
                    recipient_team_id=q.workspace,
                    recipient_user_id=q.user,
                    metadata=answer_metadata(self.delivery.id),
                )
                self._created(str(started["ts"]))
                return
            except SlackCallError as exc:
                log.info("slack streaming refused (%s): posting and editing", exc.error)
                self.streaming = False
        posted = api.call(
            "chat.postMessage",
            channel=q.channel,
            thread_ts=q.thread_key,
            text="_Searching…_",
            metadata=answer_metadata(self.delivery.id),
        )
        self._created(str(posted["ts"]))

    def add(self, piece: str) -> None:
        """Take a piece of the answer; show what is new at most every ``update_every_s``."""
        self.text += piece
        if self.ts is None:
            self._start()
        now = time.monotonic()
        if now - self.last < self.owner.settings.update_every_s:
            return
        q, api = self.question, self.owner.api
        try:
            if self.streaming:
                api.call(
                    "chat.appendStream",
                    max_waits=0,
                    channel=q.channel,
                    ts=self.ts,
                    markdown_text=escape(self.text[self.sent :]),
                )
                self.sent = len(self.text)
            else:
                # an intermediate edit: skipped when rate limited or out of budget; the final
                # one waits
                text = escape(self.text) + " …"
                api.call(
                    "chat.update",
                    max_waits=0,
                    budget=(self.owner.budget, q.workspace),
                    channel=q.channel,
                    ts=self.ts,
                    text=text,
                )
        except SlackCallError as exc:
            log.info("slack intermediate %s skipped: %s", exc.method, exc.error)
        self.last = now

    def finish(self, rendered: Rendered) -> str:
        """Make the message say ``rendered``; return its ``ts``. Always lands (waits)."""
        q, api = self.question, self.owner.api
        if self.ts is None:
            posted = api.call(
                "chat.postMessage",
                channel=q.channel,
                thread_ts=q.thread_key,
                text=rendered.text,
                blocks=rendered.blocks,
                metadata=answer_metadata(self.delivery.id),
            )
            self._created(str(posted["ts"]))
            return str(self.ts)
        if self.streaming:
            try:
                api.call("chat.stopStream", channel=q.channel, ts=self.ts)
            except SlackCallError as exc:
                log.info("slack chat.stopStream: %s", exc.error)
        try:
            self._update(rendered)
        except SlackCallError as exc:
            if exc.error != "msg_too_long":
                raise
            self._update(rendered.shortened())  # the final text lands, cut
        return str(self.ts)

    def _update(self, rendered: Rendered) -> None:
        q = self.question
        self.owner.api.call(
            "chat.update",
            budget=(self.owner.budget, q.workspace),
            channel=q.channel,
            ts=self.ts,
            text=rendered.text,
            blocks=rendered.blocks,
        )
