"""Normalising what Slack sends into a question to answer (an ``Inbound``), or nothing.

Pure functions over the decoded payloads (Slack API docs, "Events API": the ``event_callback``
envelope; the ``message`` and ``app_mention`` event types and ``message`` subtypes). No I/O:
this runs before the acknowledgement.

What is answered:

* an ``app_mention`` anywhere;
* a ``message`` in a direct message (``channel_type`` ``im``);
* a ``message`` in a channel thread the surface already answers in (``known_thread``): a
  follow-up needs no new mention.

What is ignored: our own bot (``authorizations[].user_id``), ``USLACKBOT``, other bots unless
``allow_bots``, every subtype but ``thread_broadcast`` and ``file_share`` (edits, deletions,
joins, topic changes …), hidden messages, and messages with no text left once the mention of
the bot is removed.

Slack's ids map onto the shared record (:class:`~search2o.surfaces.deliveries.Inbound`):
``team`` → ``workspace``, the message's ``ts`` →
``message_key``, ``event_id`` → ``event_key``, ``thread_ts`` (the parent's ``ts``, the
message's own for a top-level message, so the answer goes in that thread) → ``thread_key``.
``channel_type`` is Slack's (``im``, ``channel``, ``group``, ``mpim``; ``app_mention`` carries
none and counts as a channel); only ``im`` is a direct message (:data:`DIRECT_TYPES`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from search2o.surfaces.deliveries import Inbound
from search2o.textrules import text_problem

__all__ = ["DIRECT_TYPES", "SURFACE", "bot_user_of", "normalise_event"]

SURFACE = "slack"
DIRECT_TYPES = frozenset({"im"})
SLACKBOT = "USLACKBOT"
CONTENT_SUBTYPES = frozenset({"thread_broadcast", "file_share"})
_TS = re.compile(r"[0-9]{1,20}\.[0-9]{1,10}")
_ID = re.compile(r"[A-Za-z0-9._@+=-]{1,100}")


def bot_user_of(envelope: dict[str, Any]) -> str | None:
    """Return our bot's user id from an envelope's ``authorizations`` (no API call needed)."""
    for entry in envelope.get("authorizations") or []:
        user = entry.get("user_id") if isinstance(entry, dict) else None
        if isinstance(user, str) and entry.get("is_bot"):
            return user
    return None


def normalise_event(
    envelope: dict[str, Any],
    *,
    allow_bots: bool = False,
    known_thread: Callable[[str, str, str], bool] = lambda team, channel, thread: False,
    max_chars: int = 8000,
) -> Inbound | None:
    """Return the question an ``event_callback`` envelope holds, or ``None`` to ignore it.

    Args:
        envelope: the decoded JSON body (HTTP) or the Socket Mode envelope's ``payload``.
        allow_bots: answer messages of other bots (never our own, never ``USLACKBOT``).
        known_thread: ``(team, channel, thread_ts) -> bool``: whether we answer in that thread.
        max_chars: longer texts are cut to this many characters.

    """
    event = envelope.get("event")
    if envelope.get("type") != "event_callback" or not isinstance(event, dict):
        return None
    kind = event.get("type")
    if kind not in ("message", "app_mention"):
        return None
    if event.get("subtype") is not None and event.get("subtype") not in CONTENT_SUBTYPES:
        return None
    if event.get("hidden"):
        return None
    bot = bot_user_of(envelope)
    user = event.get("user")
    if not isinstance(user, str) or user in (SLACKBOT, bot):
        return None
    if event.get("bot_id") is not None and not allow_bots:
        return None
    team = event.get("team") or envelope.get("team_id")
    fields = (envelope.get("event_id"), team, event.get("channel"), user)
    if not all(isinstance(v, str) and _ID.fullmatch(v) for v in fields):
        return None
    ts, thread_ts = event.get("ts"), event.get("thread_ts") or event.get("ts")
    if not all(isinstance(v, str) and _TS.fullmatch(v) for v in (ts, thread_ts)):
        return None
    channel_type = str(event.get("channel_type") or "channel")
    if (
        kind == "message"
        and channel_type not in DIRECT_TYPES
        and not known_thread(str(team), str(event["channel"]), str(thread_ts))
    ):
        return None
    text = _without_mention(str(event.get("text") or ""), bot)
    if not text or text_problem(text) is not None:
        return None
    return Inbound(
        surface=SURFACE,
        workspace=str(team),
        channel=str(event["channel"]),
        channel_type=channel_type[:16],
        user=user,
        message_key=str(ts),
        event_key=str(envelope["event_id"]),
        thread_key=str(thread_ts),
        text=text[:max_chars],
        direct=channel_type in DIRECT_TYPES,
    )


def _without_mention(text: str, bot: str | None) -> str:
    """Return the text with the mentions of our bot (``<@UBOT>``) removed, stripped."""
    if bot is not None:
        text = re.sub(rf"<@{re.escape(bot)}(\|[^>]*)?>", " ", text)
    return " ".join(text.split())
