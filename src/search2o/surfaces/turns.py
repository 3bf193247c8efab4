"""One question of a messenger surface, answered through the client: who speaks, and the turn.

Every surface that answers through jobs (Slack, Telegram) does the same three things per
question (docs/surfaces.md, sections 2 and 3); they live here once:

* :func:`speaker` — whom the answer acts as: in a direct chat the linked user (linking by the
  platform's verified email first when the surface can read it), else the shared-channel
  principal of the workspace (documents open to everyone), said in a footer; an unlinked user
  gets the channel scope with a hint how to link, or only the hint (``unlinked = "link_only"``);
* :func:`link_reply` — the answer to a one-time link code typed in a direct chat;
* :func:`chat_turn` — the thread's conversation (or a new one, remembered for the thread; the
  first mapping wins), the answer's events each once (the client resumes a broken stream),
  every delta handed to the surface's writer, and the final ``done`` returned. The answer's
  run id is handed to the surface as soon as the first event names it; an attempt after a
  crash passes it back and follows that run from its first event instead of asking again.

The surfaces keep only what is theirs: the platform's calls, rendering, and throttling.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Literal

from search2o.client import ChatEventItem, Client, act_as_shared, act_as_user
from search2o.errors import ConflictError, InputError, NotFoundError, ProviderError
from search2o.events import ConversationEvent, DeltaEvent, DoneEvent, ErrorEvent

__all__ = ["chat_turn", "link_reply", "speaker"]


def speaker(
    client: Client,
    workspace: str,
    user: str,
    *,
    direct: bool,
    unlinked: Literal["channel", "link_only"],
    footer: str,
    hint: str,
    email: Callable[[], str | None] | None = None,
) -> tuple[str | None, str | None]:
    """Return ``(act-as header value, footer)`` for a question; ``(None, None)``: only a hint.

    Args:
        client: the surface's client (its service token, acting for no one).
        workspace, user: the platform's workspace and user ids.
        direct: a direct (one-to-one) chat; anything else is a channel.
        unlinked: what an unlinked user in a direct chat gets: the channel scope with ``hint``
            appended to the footer, or (``link_only``) nothing but the hint.
        footer: the sentence saying an answer used only documents open to everyone.
        hint: the one line saying how to link.
        email: reads the user's verified email from the platform (None where it cannot); an
            unlinked user with an email some user has is linked by it first.

    Raises:
        Search2oError: the server refused or could not be reached (the job retries).

    """
    shared = act_as_shared(workspace)
    if not direct:
        return shared, footer
    if client.identity(workspace, user) is None:
        address = email() if email is not None else None
        if address is None or client.link_by_email(workspace, user, address) is None:
            if unlinked == "link_only":
                return None, None
            return shared, f"{footer} {hint}"
    return act_as_user(workspace, user), None


def link_reply(client: Client, workspace: str, user: str, code: str) -> str:
    """Link the account with a one-time ``code``; return the sentence to answer with.

    A wrong, used, expired or mistyped code is answered with the server's reason (one 422 for
    all of them), never raised.

    Raises:
        Search2oError: anything but a refused code (the job retries).

    """
    try:
        linked = client.link(workspace, user, code)
    except InputError as exc:
        return f"That code did not work: {exc.reason}."
    return f"Linked to {linked.email}. Ask me anything."


def chat_turn(
    me: Client,
    where: tuple[str, str, str],
    text: str,
    on_delta: Callable[[str], None],
    *,
    agent: str | None = None,
    start_agent: str | None = None,
    run_id: str | None = None,
    on_run: Callable[[str], None] | None = None,
) -> DoneEvent:
    """Answer ``text`` in the conversation of the thread ``where``; return the ``done`` event.

    Args:
        me: the client acting for the speaker (:func:`speaker`).
        where: ``(workspace, channel, thread)`` as the thread mapping names it.
        text: the question.
        on_delta: called with each piece of the answer's text, in order, once.
        agent: run this agent for the question (a chat turn when None).
        start_agent: the agent a thread without a conversation starts (a follow-up then
            continues the conversation and answers the agent's waiting ``ask``).
        run_id: the run an earlier attempt of this question started (``None``: none did).
            A run still going or complete is followed from its first event
            (:meth:`~search2o.client.Client.follow` with ``after=0``: the finished answer
            replayed, or the live one), so the question is not asked twice; a run that
            ``failed`` or was ``interrupted`` never answered, and the question is asked again.
        on_run: called with the run id of a newly asked question as soon as its first event
            (``conversation``) names it, before any delta, so the caller can store it.

    Raises:
        ProviderError: the answer ended with an ``error`` event, or its stream ended without
            ``done`` after the client's reconnects, or ``run_id``'s run is gone (removed
            ``runs.keep_s`` after it ended): asking again would put the question twice.
        Search2oError: the server refused (e.g. an unknown agent: ``InputError``).

    """
    conversation = me.conversation_for_thread(*where)
    events = _earlier_run(me, run_id)
    if events is None:
        if conversation is None and agent is None:
            agent = start_agent
        events = me.chat(text, conversation_id=conversation, agent=agent)
    done: DoneEvent | None = None
    for item in events:
        event = item.event
        if isinstance(event, ConversationEvent):
            if on_run is not None and event.run_id and event.run_id != run_id:
                on_run(event.run_id)
            if conversation is None:
                conversation = event.conversation_id
                # The first mapping wins; this answer still lands where it was asked.
                with contextlib.suppress(ConflictError):
                    me.remember_thread(*where, conversation)
        elif isinstance(event, DeltaEvent):
            on_delta(event.text)
        elif isinstance(event, ErrorEvent):
            raise ProviderError(f"the answer failed: {event.message}")
        elif isinstance(event, DoneEvent):
            done = event
    if done is None:
        raise ProviderError("the answer's stream ended without its last event")
    return done


def _earlier_run(me: Client, run_id: str | None) -> Iterator[ChatEventItem] | None:
    """Return the events of an earlier attempt's run to follow, or ``None``: ask the question.

    Raises:
        ProviderError: the run is gone (the server removed it ``runs.keep_s`` after it ended).

    """
    if run_id is None:
        return None
    try:
        status = me.run(run_id).status
    except NotFoundError as exc:
        raise ProviderError(
            f"the answer's run {run_id} is gone (kept runs.keep_s after it ended); the "
            "question is not asked a second time"
        ) from exc
    if status in ("failed", "interrupted"):
        return None  # it never answered: this attempt asks again
    return me.follow(run_id, after=0)
