"""Normalising a Mattermost post into a question, or nothing to answer.

Pure functions over a decoded post (Mattermost API v4 "Post": ``id``, ``user_id``,
``channel_id``, ``root_id``, ``message``, ``type``, ``create_at`` in Unix milliseconds,
``edit_at``, ``delete_at``, ``props``), from a WebSocket ``posted`` event — whose ``data.post``
and ``data.mentions`` are JSON *strings* (Mattermost API v4, "WebSocket events") — or from a
backfill. No I/O: this runs before the acknowledgement.

What is answered: a user's post in a direct channel (``channel_type`` ``D``); in any other
channel, a post that mentions the bot (its id in ``mentions``, or ``@username`` in the text)
or replies in a thread the surface answered before. Everything else is ignored: our own posts,
other bots' and webhooks' posts (``props.from_bot`` / ``from_webhook``), system posts (a
``type``), edited or deleted posts, and a mention with no question left once it is removed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from search2o.surfaces.deliveries import Inbound
from search2o.textrules import text_problem

__all__ = ["DIRECT_TYPES", "SURFACE", "Bot", "decode_posted", "normalise_post"]

SURFACE = "mattermost"
DIRECT_TYPES = frozenset({"D"})
_TYPES = frozenset({"D", "G", "O", "P"})
_ID = re.compile(r"[a-z0-9]{26}")


@dataclass(frozen=True)
class Bot:
    """Who the bot is: its user id (26 characters) and its username."""

    id: str
    username: str


def decode_posted(event: dict[str, Any]) -> tuple[dict[str, Any], str, list[str]] | None:
    """Return ``(post, channel_type, mentions)`` of a ``posted`` event, or ``None``.

    ``data.post`` and ``data.mentions`` arrive as JSON strings; anything malformed is ``None``.
    """
    if event.get("event") != "posted":
        return None
    data = event.get("data")
    if not isinstance(data, dict):
        return None
    try:
        post = json.loads(str(data.get("post") or ""))
        mentions = json.loads(str(data.get("mentions") or "[]"))
    except ValueError:
        return None
    if not isinstance(post, dict) or not isinstance(mentions, list):
        return None
    return post, str(data.get("channel_type") or ""), [str(m) for m in mentions]


def normalise_post(
    post: dict[str, Any],
    channel_type: str,
    mentions: list[str],
    bot: Bot,
    known_thread: Callable[[str, str], bool],
    *,
    max_chars: int = 16_383,
) -> Inbound | None:
    """Return the question ``post`` holds, or ``None`` to ignore it (module docstring).

    Args:
        post: the decoded post.
        channel_type: ``D`` direct, ``G`` group, ``O`` open, ``P`` private.
        mentions: the user ids the post mentions (the event's ``mentions``; ``[]`` in a
            backfill, where ``@username`` in the text counts).
        bot: our bot.
        known_thread: ``(channel, root id) -> bool``, whether we answered in that thread.
        max_chars: longer texts are cut to this many characters.

    """
    ids = [post.get(k) for k in ("id", "user_id", "channel_id")]
    if not all(isinstance(v, str) and _ID.fullmatch(v) for v in ids):
        return None
    post_id, user, channel = (str(v) for v in ids)
    props = post.get("props") if isinstance(post.get("props"), dict) else {}
    assert isinstance(props, dict)
    if (
        user == bot.id
        or channel_type not in _TYPES
        or post.get("type")
        or post.get("edit_at")
        or post.get("delete_at")
        or str(props.get("from_bot")) == "true"
        or str(props.get("from_webhook")) == "true"
    ):
        return None
    text, root = post.get("message"), str(post.get("root_id") or "")
    if not isinstance(text, str) or (root and not _ID.fullmatch(root)):
        return None
    mention = re.compile(rf"(?<![\w@])@{re.escape(bot.username)}\b", re.I)
    if channel_type not in DIRECT_TYPES:
        named = bot.id in mentions or mention.search(text) is not None
        if not named and not (root and known_thread(channel, root)):
            return None
        text = mention.sub(" ", text)
    text = " ".join(text.split())
    if not text or text_problem(text) is not None:
        return None
    return Inbound(
        surface=SURFACE,
        workspace=bot.id,
        channel=channel,
        channel_type=channel_type,
        user=user,
        message_key=post_id,
        event_key=post_id,
        thread_key=root or post_id,
        text=text[:max_chars],
        direct=channel_type in DIRECT_TYPES,
    )
