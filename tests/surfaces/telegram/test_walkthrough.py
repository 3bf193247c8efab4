"""The handbook walk-through of the Web App, in a Telegram private chat, with the built-in
model: 20 days, the elliptical follow-up (27), thanks without a search, and a not-found."""

from __future__ import annotations

import pytest

from search2o import accounts
from search2o.providers.builtin_chat import NOT_FOUND
from search2o.storage.models import Conversation
from search2o.surfaces.identity import issue_link_code
from tests.surfaces.telegram.conftest import TelegramEnv, TelegramFactory
from tests.surfaces.telegram.fake_telegram import message_update

pytestmark = pytest.mark.slow  # the handbook ingested per backend: about 35 s each

LINES = [
    "How many vacation days do we get each year?",
    "and how many of them can roll over?",
    "thanks!",
    "What is the company's policy on bringing dogs to the office in Tokyo?",
]


def ask(env: TelegramEnv, number: int, text: str) -> dict[str, object]:
    """Send message ``number`` and wait for its answer; return the bot's message."""
    assert env.webhook(message_update(number, text, message_id=number)) == [200]
    env.settled(number)
    (answer,) = [m for m in env.fake.in_chat(501) if m["reply_parameters"]["message_id"] == number]
    return answer


def sources(message: dict[str, object]) -> list[str]:
    entities = message.get("entities") or []
    assert isinstance(entities, list)
    return [e["type"] for e in entities if e["type"] == "expandable_blockquote"]


def test_the_handbook_walkthrough_in_a_private_chat(telegram_env: TelegramFactory) -> None:
    env = telegram_env(builtin=True)
    with env.runtime.database.session() as session:
        dana = accounts.create_user(session, "dana@example.com")
        code = issue_link_code(session, dana.id, surface="telegram").code
    assert ask(env, 1, f"/start {code}")["text"] == "Linked to dana@example.com. Ask me anything."

    first, follow_up, thanks, unknown = (ask(env, n, t) for n, t in enumerate(LINES, start=2))
    assert "20 days of vacation" in str(first["text"])
    assert "Benefits & Perks" in str(first["text"]) and sources(first)
    assert "27 days" in str(follow_up["text"]) and sources(follow_up)
    assert "You're welcome!" in str(thanks["text"])
    assert not sources(thanks) and "[1]" not in str(thanks["text"])
    assert NOT_FOUND in str(unknown["text"]) and "[1]" not in str(unknown["text"])
    rows = env.deliveries()
    assert {r.act_as for r in rows[1:]} == {"user:7000001:501"}
    with env.runtime.database.session() as session:
        (conversation,) = session.query(Conversation).filter(Conversation.user_id == dana.id)
        assert conversation.message_count == 8  # one conversation for the chat
