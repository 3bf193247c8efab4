"""Normalising what Slack sends into a :class:`Question`, or nothing to answer.

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
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from search2o.textrules import text_problem

__all__ = ["Question", "bot_user_of", "normalise_event"]

SLACKBOT = "USLACKBOT"
CONTENT_SUBTYPES = frozenset({"thread_broadcast", "file_share"})
_TS = re.compile(r"[0-9]{1,20}\.[0-9]{1,10}")
_ID = re.compile(r"[A-Za-z0-9._@+=-]{1,100}")


@dataclass(frozen=True)
class Question:
    """A message to answer: where it is, who wrote it, its text and the event that brought it.

    ``thread_ts`` is the parent's ``ts`` (the message's own for a top-level message), so the
    answer goes in that thread; ``channel_type`` is Slack's (``im``, ``channel``, ``group``,
    ``mpim``; ``app_mention`` carries none and counts as a channel).
    """

    event_id: str
    team: str
    channel: str
    channel_type: str
    user: str
    ts: str
    thread_ts: str
    text: str

    @property
    def direct(self) -> bool:
        """Whether the question is a direct message (answered with the user's own rights)."""
        return self.channel_type == "im"


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
) -> Question | None:
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
    if kind == "message" and channel_type != "im" and not known_thread(
        str(team), str(event["channel"]), str(thread_ts)
    ):
        return None
    text = _without_mention(str(event.get("text") or ""), bot)
    if not text or text_problem(text) is not None:
        return None
    return Question(
        event_id=str(envelope["event_id"]),
        team=str(team),
        channel=str(event["channel"]),
        channel_type=channel_type[:16],
        user=user,
        ts=str(ts),
        thread_ts=str(thread_ts),
        text=text[:max_chars],
    )


def _without_mention(text: str, bot: str | None) -> str:
    """Return the text with the mentions of our bot (``<@UBOT>``) removed, stripped."""
    if bot is not None:
        text = re.sub(rf"<@{re.escape(bot)}(\|[^>]*)?>", " ", text)
    return " ".join(text.split())
