"""Normalising a Telegram ``Update`` into a question, a button click, or nothing to answer.

Pure functions over the decoded update (Bot API "Update", "Message", "MessageEntity",
"CallbackQuery"); no I/O: this runs before the acknowledgement.

What is answered: a text message in a private chat; in a group or supergroup, a message that
mentions the bot (a ``mention`` entity ``@<bot username>``, a ``text_mention`` of the bot, or a
``/command@<bot username>``) or replies to one of the bot's messages. Everything else is
ignored: other bots, edits (``edited_message``), channel posts, service messages, messages
without text, and a mention with no question left once the mention is removed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from search2o.surfaces.deliveries import Inbound
from search2o.textrules import text_problem

__all__ = ["DIRECT_TYPES", "SURFACE", "Bot", "Click", "normalise_callback", "normalise_message"]

SURFACE = "telegram"
DIRECT_TYPES = frozenset({"private"})
_GROUPS = frozenset({"group", "supergroup"})


@dataclass(frozen=True)
class Bot:
    """Who the bot is: its user id (the digits of its token) and its ``@username``."""

    id: int
    username: str


@dataclass(frozen=True)
class Click:
    """A click on an inline button: the query to answer, where, by whom, its ``data``."""

    query_id: str
    chat: str
    user: str
    message_id: int
    data: str


def _units_to_index(text: str, units: int) -> int:
    """Return the code point index of UTF-16 offset ``units`` of ``text``."""
    count = 0
    for index, char in enumerate(text):
        if count >= units:
            return index
        count += 2 if ord(char) > 0xFFFF else 1
    return len(text)


def _mentions(message: dict[str, Any], bot: Bot) -> list[tuple[int, int]]:
    """Return the code point ranges of the text that address the bot."""
    text = str(message.get("text") or "")
    found: list[tuple[int, int]] = []
    for entity in message.get("entities") or []:
        if not isinstance(entity, dict):
            continue
        try:
            start = _units_to_index(text, int(entity.get("offset", 0)))
            end = _units_to_index(text, int(entity.get("offset", 0)) + int(entity.get("length", 0)))
        except (TypeError, ValueError):
            continue
        word = text[start:end]
        kind = entity.get("type")
        named = kind == "mention" and word[1:].lower() == bot.username.lower()
        if named or (kind == "text_mention" and (entity.get("user") or {}).get("id") == bot.id):
            found.append((start, end))
        elif kind == "bot_command" and word.lower().endswith(f"@{bot.username.lower()}"):
            found.append((end - len(bot.username) - 1, end))  # keep the /command itself
    return found


def normalise_message(update: dict[str, Any], bot: Bot, *, max_chars: int = 4096) -> Inbound | None:
    """Return the question an update holds, or ``None`` to ignore it (module docstring).

    Args:
        update: the decoded ``Update`` (webhook body or one item of ``getUpdates``).
        bot: our bot.
        max_chars: longer texts are cut to this many characters.

    """
    message = update.get("message")
    update_id = update.get("update_id")
    if not isinstance(message, dict) or not isinstance(update_id, int):
        return None
    sender, chat = message.get("from"), message.get("chat")
    if not isinstance(sender, dict) or not isinstance(chat, dict) or sender.get("is_bot"):
        return None
    text, kind = message.get("text"), chat.get("type")
    if not isinstance(text, str) or kind not in DIRECT_TYPES | _GROUPS:
        return None
    ids = (sender.get("id"), chat.get("id"), message.get("message_id"))
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in ids):
        return None
    if kind in _GROUPS:
        replied = message.get("reply_to_message")
        to_bot = isinstance(replied, dict) and (replied.get("from") or {}).get("id") == bot.id
        ranges = _mentions(message, bot)
        if not ranges and not to_bot:
            return None
        for start, end in sorted(ranges, reverse=True):
            text = text[:start] + " " + text[end:]
    text = " ".join(text.split())
    if not text or text_problem(text) is not None:
        return None
    topic = message.get("message_thread_id") if message.get("is_topic_message") else None
    return Inbound(
        surface=SURFACE,
        workspace=str(bot.id),
        channel=str(chat["id"]),
        channel_type=str(kind),
        user=str(sender["id"]),
        message_key=str(message["message_id"]),
        event_key=str(update_id),
        thread_key=str(topic) if isinstance(topic, int) else "main",
        text=text[:max_chars],
        direct=kind in DIRECT_TYPES,
    )


def normalise_callback(update: dict[str, Any]) -> Click | None:
    """Return the button click an update holds (``callback_query`` with ``data``), or ``None``."""
    query = update.get("callback_query")
    if not isinstance(query, dict) or not isinstance(query.get("id"), str):
        return None
    message = query.get("message") or {}
    chat = (message.get("chat") or {}).get("id")
    sender = (query.get("from") or {}).get("id")
    if not isinstance(chat, int) or not isinstance(sender, int):
        return None
    return Click(
        query_id=query["id"][:64],
        chat=str(chat),
        user=str(sender),
        message_id=int(message.get("message_id") or 0),
        data=str(query.get("data") or "")[:64],
    )
