"""The jobs of the Mattermost surface: answer a question in its thread, store a rating.

``mattermost.answer`` (payload ``{"delivery": id}``), idempotent through the delivery record:

1. a delivery already ``posted`` or ``failed`` is done; otherwise it becomes ``answering``;
2. ``link CODE`` in a direct channel links the account with a one-time code;
3. who it acts as (:func:`search2o.surfaces.turns.speaker`): in a direct channel the linked
   user — an unlinked one is linked first by the email ``GET /api/v4/users/{id}`` shows, when
   the server exposes it and marks it verified (``email_verified``) — else, and in any other
   channel, the shared-channel principal (documents open to everyone), said in a footer;
4. the thread's conversation (:func:`search2o.surfaces.turns.chat_turn`; the thread is the
   post's ``root_id``, or the post itself). A slash command's answer starts a thread of its
   own: its first post is made before the turn and becomes the thread (the delivery's
   ``thread_key``), so a reply in that thread continues the conversation.
   ``/search2o agent NAME question`` runs the agent ``NAME`` there instead of a chat turn;
   when the agent asks (``done`` with ``status: paused``), its question is posted without
   rating buttons, and the next message in the thread answers it (the conversation's waiting
   ``ask``), as in Slack and Telegram;
5. the answer, in the thread: posted once, then patched (``PUT /posts/{id}/patch``) at most
   every ``mattermost.update_every_s``, an unchanged text never sent again; an intermediate
   patch while the rate limit holds is skipped, the final one waits for it and always lands.
   Past 16,383 characters the rest follows in more posts of the thread. The ids are stored as
   soon as each post exists (``reply_key``), so an attempt after a crash patches them and never
   posts a second answer. The last post carries the 👍/👎 buttons;
6. ``posted``; the question's text is dropped.

An attempt that fails is retried by the queue. Once the job is given up — its last attempt
raised, or the worker running it died and its lease expired — the kind's final-failure hook
(:meth:`MattermostAnswerer.final_failure`, run once by the queue) shows a short error in the
thread (patching the answer if it exists) and ends the delivery ``failed``: never a silent end.

``mattermost.rate`` (payload ``{"delivery", "rating", "channel"}``, from a click whose HMAC was
verified) stores the rating of the delivery's answer, acting as the principal that asked.
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
from search2o.surfaces.mattermost.buttons import keyboard
from search2o.surfaces.mattermost.posts import SURFACE
from search2o.surfaces.mattermost.render import MAX_CHARS, render_answer, render_notice, split
from search2o.surfaces.mattermost.restapi import MattermostApi
from search2o.surfaces.mattermost.settings import MattermostSettings
from search2o.surfaces.turns import chat_turn

__all__ = ["CHANNEL_FOOTER", "LINK_HINT", "MattermostAnswerer"]

CHANNEL_FOOTER = "Answered from documents open to everyone."
LINK_HINT = "Link your account for answers with your own access: `/search2o link CODE`."
_LINK = re.compile(r"/?link\s+([0-9A-Za-z][0-9A-Za-z\- ]{4,40})", re.I)
_AGENT = re.compile(r"agent\s+(\S{1,100})(?:\s+(.+))?", re.I | re.S)
COMMAND_THREAD = "command:"
"""The ``message_key`` prefix of a slash command's question (its ``thread_key`` too, until its
answer's thread exists)."""
log = logging.getLogger("search2o.mattermost")


class MattermostAnswerer(AnswerJob):
    """The handlers of ``mattermost.answer`` and ``mattermost.rate`` (module docstring).

    The answer job's shape is :class:`~search2o.surfaces.answering.AnswerJob`'s; Mattermost
    supplies the delivery and the notice.

    Args:
        settings: the ``mattermost`` section.
        store: the delivery records.
        api: the REST API with the bot token.
        connect: gives the process's one client of our API (surface token; not closed here).
        key: the HMAC key of button contexts.
        actions_url: where the buttons call back (``<public URL>/mattermost/actions``).

    """

    surface = SURFACE
    result_key = "posts"
    footer = CHANNEL_FOOTER
    hint = LINK_HINT
    link = _LINK

    def __init__(
        self,
        settings: MattermostSettings,
        store: DeliveryStore,
        api: MattermostApi,
        connect: Callable[[], Client],
        key: str,
        actions_url: str,
    ) -> None:
        super().__init__(settings, store, connect)
        self.settings: MattermostSettings = settings
        self.api = api
        self.key = key
        self.actions_url = actions_url

    def notice(self, delivery: Delivery, text: str) -> str:
        """Post ``text`` in the thread (patching the answer's posts if they exist)."""
        return _Writer(self, delivery, stream=False).finish(render_notice(text), None)

    def deliver(self, client: Client, delivery: Delivery) -> str:
        """Answer in the thread (module docstring, steps 2-5); return the posts' ids."""
        linked = self.linked(client, delivery)
        if linked is not None:
            return linked
        inbound = delivery.inbound
        act_as, footer = self.speaker(client, delivery, email=lambda: self._email(inbound.user))
        if act_as is None:
            return self.notice(delivery, LINK_HINT)
        me = client.acting_as(act_as)
        writer = _Writer(self, delivery)
        text, agent, thread = inbound.text, None, inbound.thread_key
        if inbound.message_key.startswith(COMMAND_THREAD):  # also once its thread exists
            started = _AGENT.fullmatch(text.strip())
            if started is not None:  # agent NAME [question]: the server checks the name
                agent, text = started.group(1), started.group(2) or "start"
            thread = writer.open_thread()
        done = chat_turn(
            me,
            (inbound.workspace, inbound.channel, thread),
            text,
            writer.add,
            agent=agent,
            run_id=delivery.run_id,  # a retry follows the run it started, never asks again
            on_run=functools.partial(self.store.set_run, delivery.id),
        )
        if done.message_id:
            self.store.set(delivery.id, answer_message_id=done.message_id)
        rate = done.message_id and done.status != "paused"  # an agent's question is not rated
        props = keyboard(self.key, self.actions_url, delivery.id) if rate else None
        return writer.finish(render_answer(done.text, done.citations, footer=footer), props)

    def _email(self, user: str) -> str | None:
        """Return the user's email when Mattermost shows it as verified, else ``None``."""
        found = self.api.user(user)
        email = str(found.get("email") or "")
        return email if email and found.get("email_verified") is True else None

    def rate(self, ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
        """Store a verified click as the answer's rating; return ``{"message", "rating"}``.

        Raises:
            InputError: the click names no answered delivery of its channel (nothing to retry).

        """
        delivery = self.load(payload)
        rating = str(payload.get("rating") or "")
        if (
            delivery is None
            or delivery.inbound.channel != str(payload.get("channel"))
            or delivery.answer_message_id is None
            or delivery.act_as is None
            or rating not in ("up", "down")
        ):
            raise InputError("payload.delivery", "names no answered Mattermost delivery here")
        self.connect().acting_as(delivery.act_as).rate(delivery.answer_message_id, rating)
        return {"message": delivery.answer_message_id, "rating": rating}


class _Writer:
    """One answer's posts in its thread: posted, patched on a throttle, then final."""

    def __init__(self, owner: MattermostAnswerer, delivery: Delivery, stream: bool = True) -> None:
        self.owner = owner
        self.delivery = delivery
        inbound = delivery.inbound
        # A slash command's answer starts a thread of its own (see open_thread).
        self.root = "" if inbound.thread_key.startswith(COMMAND_THREAD) else inbound.thread_key
        self.ids = [i for i in (delivery.reply_key or "").split(",") if i]
        self.stream = stream
        self.text = ""
        self.shown = ""
        self.last = 0.0

    def _post(self, message: str, props: dict[str, Any] | None, max_waits: int | None) -> None:
        api = self.owner.api
        self.ids.append(
            api.create_post(
                self.delivery.inbound.channel,
                message,
                root_id=self.root,
                props=props,
                max_waits=max_waits,
            )
        )
        self.owner.store.set(self.delivery.id, reply_key=",".join(self.ids))

    def open_thread(self) -> str:
        """Make the answer's first post now (unless an attempt did) and return it as the thread.

        The delivery's ``thread_key`` becomes that post's id, so a reply in its thread is a
        follow-up the surface answers (:meth:`DeliveryStore.knows_thread`) in the same
        conversation; later posts of the answer go in that thread.
        """
        if not self.ids:
            self._post("_Searching…_", None, max_waits=None)
        self.root = self.ids[0]
        self.owner.store.set(self.delivery.id, thread_key=self.root)
        return self.root

    def add(self, piece: str) -> None:
        """Take a piece of the answer; show what is new at most every ``update_every_s``."""
        self.text += piece
        now = time.monotonic()
        if not self.stream or now - self.last < self.owner.settings.update_every_s:
            return
        shown = split(self.text.strip() + " …", MAX_CHARS - 2)[0]
        if shown == self.shown:  # never send an unchanged text again
            return
        try:
            if not self.ids:
                self._post(shown, None, max_waits=0)
            else:
                self.owner.api.patch_post(self.ids[0], shown, max_waits=0)
            self.shown = shown
        except ProviderError as exc:  # an intermediate update: skipped while limited
            log.info("mattermost intermediate update skipped: %s", exc.message)
        self.last = now

    def finish(self, parts: list[str], props: dict[str, Any] | None) -> str:
        """Make the posts say ``parts`` (``props`` on the last); return their ids.

        Always lands: waits out the rate limit; a post an earlier attempt made is patched.
        """
        for index, part in enumerate(parts):
            last = props if index == len(parts) - 1 else None
            if index < len(self.ids):
                self.owner.api.patch_post(self.ids[index], part, props=last or {})
            else:
                self._post(part, last, max_waits=None)
        return ",".join(self.ids)
