"""The jobs of the Telegram surface: answer a question in its chat, store a rating.

``telegram.answer`` (payload ``{"delivery": id}``), idempotent through the delivery record:

1. a delivery already ``posted`` or ``failed`` is done; otherwise it becomes ``answering``;
2. ``/start CODE`` (the deep link ``t.me/<bot>?start=CODE``) or ``/link CODE`` in a private
   chat links the account with a one-time code;
3. who it acts as: in a private chat the linked user; in a group, or for an unlinked user, the
   shared-channel principal (documents open to everyone), said in a footer with a one-line hint
   how to link (``telegram.unlinked = "link_only"``: only the hint). Telegram exposes no
   email, so linking is by code only;
4. the chat's conversation (:meth:`search2o.client.Client.conversation_for_thread`; the thread
   is the forum topic, or ``main``), or a new one remembered for it; ``/agent NAME message``
   runs the agent ``NAME`` there instead of a chat turn. The answer's run id is stored as
   soon as the answer names it: an attempt after a crash follows that run from its first event
   and never asks the question again;
5. the answer: in a private chat streamed as a draft (``sendMessageDraft``, Bot API 9.3) and
   finished with ``sendMessage``; in a group sent once as a reply, then edited
   (``editMessageText``) at most every ``telegram.update_every_s``, an unchanged text never
   sent again and "message is not modified" taken as done. An intermediate edit during a
   chat's ``retry_after`` is skipped; the final text waits for it and always lands. The ids of
   the answer's messages are stored as soon as each exists, so an attempt after a crash edits
   them and never sends a second answer. The final message carries 👍/👎 buttons, or — when an
   agent asks a question (``done`` with ``status: paused``) — a ``ForceReply``, whose reply
   continues the conversation and so resumes the run;
6. ``posted`` with the answer's message id; the question's text is dropped.

An attempt that fails is retried by the queue. Once the job is given up — its last attempt
raised, or the worker running it died and its lease expired — the kind's final-failure hook
(:meth:`TelegramAnswerer.final_failure`, run once by the queue) shows a short error in the
chat (editing the answer if it exists) and ends the delivery ``failed``: never a silent end.

``telegram.rate`` (payload ``{"query", "chat", "data"}``) stores a 👍/👎 click as the answer's
rating, acting as the principal that asked, and always answers the click
(``answerCallbackQuery``) so the button stops spinning.
"""

from __future__ import annotations

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
from search2o.surfaces.telegram.botapi import BotApi, TelegramCallError
from search2o.surfaces.telegram.render import MAX_UNITS, Part, render_answer, render_notice, split
from search2o.surfaces.telegram.settings import TelegramSettings
from search2o.surfaces.turns import chat_turn

__all__ = ["CHANNEL_FOOTER", "LINK_HINT", "TelegramAnswerer", "rating_data"]

CHANNEL_FOOTER = "Answered from documents open to everyone."
LINK_HINT = (
    "Link your account for answers with your own access: open the link from the search2o "
    "Web App, or send /link CODE here."
)
GREETING = "Hello! Ask me anything about our documents."
_LINK = re.compile(r"/(?:start|link)(?:@\w+)?\s+([0-9A-Za-z][0-9A-Za-z\- ]{4,40})", re.I)
_START = re.compile(r"/start(?:@\w+)?", re.I)
_AGENT = re.compile(r"/agent(?:@\w+)?\s+(\S{1,100})(?:\s+(.+))?", re.I | re.S)
_RATING = re.compile(r"rate:(\d{1,12}):(up|down)")
log = logging.getLogger("search2o.telegram")


def rating_data(delivery_id: int, rating: str) -> str:
    """Return the ``callback_data`` of a rating button (at most 64 bytes, Bot API limit)."""
    return f"rate:{delivery_id}:{rating}"


def _keyboard(delivery_id: int) -> dict[str, Any]:
    return {
        "inline_keyboard": [
            [
                {"text": "👍", "callback_data": rating_data(delivery_id, "up")},
                {"text": "👎", "callback_data": rating_data(delivery_id, "down")},
            ]
        ]
    }


FORCE_REPLY = {"force_reply": True, "selective": True, "input_field_placeholder": "Your answer"}


class TelegramAnswerer(AnswerJob):
    """The handlers of ``telegram.answer`` and ``telegram.rate`` (module docstring).

    The answer job's shape is :class:`~search2o.surfaces.answering.AnswerJob`'s; Telegram
    supplies the delivery (with ``/start`` and ``/agent``) and the notice.

    Args:
        settings: the ``telegram`` section.
        store: the delivery records.
        api: the Bot API with the bot token.
        connect: returns the process's :class:`~search2o.client.Client` of our API with the
            surface token (:func:`search2o.surfaces.connect.shared_client`; not closed here).

    """

    surface = "telegram"
    result_key = "messages"
    footer = CHANNEL_FOOTER
    hint = LINK_HINT
    link = _LINK

    def __init__(
        self,
        settings: TelegramSettings,
        store: DeliveryStore,
        api: BotApi,
        connect: Callable[[], Client],
    ) -> None:
        super().__init__(settings, store, connect)
        self.settings: TelegramSettings = settings
        self.api = api

    # --- telegram.answer ----------------------------------------------------------------------

    def notice(self, delivery: Delivery, text: str) -> str:
        """Send ``text`` (editing the answer's messages if they exist); return their ids."""
        return _Writer(self, delivery, stream=False).finish(render_notice(text), None)

    def deliver(self, client: Client, delivery: Delivery) -> str:
        """Answer in the chat (module docstring, steps 2-5); return the messages' ids."""
        inbound = delivery.inbound
        linked = self.linked(client, delivery)
        if linked is not None:
            return linked
        if inbound.direct and _START.fullmatch(inbound.text.strip()):
            return self.notice(delivery, self._greeting(client, delivery))
        # Telegram exposes no email: an account is linked by code only.
        act_as, footer = self.speaker(client, delivery)
        if act_as is None:
            return self.notice(delivery, LINK_HINT)
        me = client.acting_as(act_as)
        where = (inbound.workspace, inbound.channel, inbound.thread_key)
        text, agent = inbound.text, None
        started = _AGENT.fullmatch(text.strip())
        if started is not None:  # /agent NAME [message]: the server checks the name
            agent, text = started.group(1), started.group(2) or "start"
        writer = _Writer(self, delivery)
        done = chat_turn(
            me,
            where,
            text,
            writer.add,
            agent=agent,
            run_id=delivery.run_id,
            on_run=functools.partial(self.store.set_run, delivery.id),
        )
        if done.message_id:
            self.store.set(delivery.id, answer_message_id=done.message_id)
        parts = render_answer(done.text, done.citations, footer=footer)
        if done.status == "paused":  # an agent's ask: the reply resumes the run
            markup: dict[str, Any] | None = FORCE_REPLY
        else:
            markup = _keyboard(delivery.id) if done.message_id else None
        return writer.finish(parts, markup)

    def _greeting(self, client: Client, delivery: Delivery) -> str:
        inbound = delivery.inbound
        if client.identity(inbound.workspace, inbound.user) is None:
            return f"{GREETING} {LINK_HINT}"
        return GREETING

    # --- telegram.rate ------------------------------------------------------------------------

    def rate(self, ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
        """Store a 👍/👎 click as the answer's rating; return ``{"message", "rating"}``.

        The click is always answered (``answerCallbackQuery``), stored or not.

        Raises:
            InputError: the data names no answered delivery of this chat (nothing to retry).

        """
        said = "This button has expired."
        try:
            found = _RATING.fullmatch(str(payload.get("data") or ""))
            delivery = self.store.load(int(found.group(1))) if found else None
            if (
                found is None
                or delivery is None
                or delivery.inbound.surface != "telegram"
                or delivery.inbound.channel != str(payload.get("chat"))
                or delivery.answer_message_id is None
                or delivery.act_as is None
            ):
                raise InputError("payload.data", "names no answered Telegram delivery here")
            rating = found.group(2)
            self.connect().acting_as(delivery.act_as).rate(delivery.answer_message_id, rating)
            said = "Thanks for the feedback!"
            return {"message": delivery.answer_message_id, "rating": rating}
        finally:
            try:
                self.api.call(
                    "answerCallbackQuery", callback_query_id=payload.get("query"), text=said
                )
            except ProviderError as exc:  # an old query (over 15 min) cannot be answered
                log.info("telegram answerCallbackQuery: %s", exc.message)


class _Writer:
    """One answer's messages in its chat: a draft or a sent message, edited, then final."""

    def __init__(self, owner: TelegramAnswerer, delivery: Delivery, stream: bool = True) -> None:
        self.owner = owner
        self.delivery = delivery
        self.chat = int(delivery.inbound.channel)
        self.ids = [int(i) for i in (delivery.reply_key or "").split(",") if i]
        # A private chat streams a draft; a message from an earlier attempt is edited instead.
        self.drafting = (
            stream and owner.settings.stream and delivery.inbound.direct and not self.ids
        )
        self.editing = stream and not delivery.inbound.direct
        self.text = ""
        self.shown = ""
        self.last = 0.0

    def _store_ids(self) -> None:
        self.owner.store.set(self.delivery.id, reply_key=",".join(str(i) for i in self.ids))

    def _send(self, part: Part, markup: dict[str, Any] | None, max_waits: int | None) -> None:
        params: dict[str, Any] = {"chat_id": self.chat, "text": part.text}
        if part.entities:
            params["entities"] = part.entities
        if markup is not None:
            params["reply_markup"] = markup
        if not self.ids:  # the first message replies to the question
            params["reply_parameters"] = {
                "message_id": int(self.delivery.inbound.message_key),
                "allow_sending_without_reply": True,
            }
        sent = self.owner.api.call("sendMessage", max_waits=max_waits, **params)
        self.ids.append(int(sent["message_id"]))
        self._store_ids()

    def _edit(
        self, message_id: int, part: Part, markup: dict[str, Any] | None, max_waits: int | None
    ) -> None:
        params: dict[str, Any] = {"chat_id": self.chat, "message_id": message_id, "text": part.text}
        params["entities"] = part.entities
        if markup is not None:
            params["reply_markup"] = markup
        try:
            self.owner.api.call("editMessageText", max_waits=max_waits, **params)
        except TelegramCallError as exc:
            if not exc.not_modified:  # the text is there already: that is success
                raise

    def add(self, piece: str) -> None:
        """Take a piece of the answer; show what is new at most every ``update_every_s``."""
        self.text += piece
        if not (self.drafting or self.editing):
            return
        now = time.monotonic()
        if now - self.last < self.owner.settings.update_every_s:
            return
        shown = split(self.text.strip() + " …", [], MAX_UNITS)[0]
        if shown.text == self.shown:  # never send an unchanged text again
            return
        try:
            if self.drafting:
                self.owner.api.call(
                    "sendMessageDraft",
                    max_waits=0,
                    chat_id=self.chat,
                    draft_id=self.delivery.id,
                    text=shown.text,
                )
            elif not self.ids:
                self._send(shown, None, max_waits=0)
            else:
                self._edit(self.ids[0], shown, None, max_waits=0)
            self.shown = shown.text
        except TelegramCallError as exc:
            # an intermediate update: skipped when limited; a refused draft stops drafting
            log.info("telegram intermediate %s skipped: %s", exc.method, exc.description)
            if exc.method == "sendMessageDraft" and exc.error_code != 429:
                self.drafting = False
        self.last = now

    def finish(self, parts: list[Part], markup: dict[str, Any] | None) -> str:
        """Make the messages say ``parts`` (``markup`` on the last); return their ids.

        Always lands: waits for ``retry_after``; a message an earlier attempt sent is edited.
        """
        for index, part in enumerate(parts):
            last = markup if index == len(parts) - 1 else None
            if index < len(self.ids):
                self._edit(self.ids[index], part, last, max_waits=None)
            else:
                self._send(part, last, max_waits=None)
        return ",".join(str(i) for i in self.ids)
