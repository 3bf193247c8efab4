"""The handbook walk-through of the Web App, in a Mattermost DM, with the built-in model: 20 days,
the elliptical follow-up (27), thanks without a search, and a not-found."""

from __future__ import annotations

import pytest

from search2o import accounts
from search2o.providers.builtin_chat import NOT_FOUND
from search2o.storage.models import Conversation
from tests.surfaces.mattermost.conftest import MattermostEnv, MattermostFactory, listening
from tests.surfaces.mattermost.fake_mattermost import ANN_ID, BOT_ID, DM_ID

pytestmark = pytest.mark.slow  # the handbook ingested per backend

LINES = [
    "How many vacation days do we get each year?",
    "and how many of them can roll over?",
    "thanks!",
    "What is the company's policy on bringing dogs to the office in Tokyo?",
]


def ask(env: MattermostEnv, number: int, text: str, root: str) -> tuple[str, str]:
    """Post ``text`` in the DM's thread ``root`` ("" starts it); return the answer's text."""
    question = env.fake.user_post(text, channel=DM_ID, root_id=root)
    env.settled(number)
    (answer,) = [
        p
        for p in env.fake.bot_posts(DM_ID)
        if p["message"]
        and p["root_id"] in (question["id"], root)
        and p["create_at"] > question["create_at"]
    ]
    return str(answer["message"]), question["id"]


def test_the_handbook_walkthrough_in_a_direct_message(mattermost_env: MattermostFactory) -> None:
    env = mattermost_env(builtin=True)
    with env.runtime.database.session() as session:
        ann = accounts.create_user(session, "ann@example.com")
    with listening(env):
        first, root = ask(env, 1, LINES[0], "")
        follow_up, _ = ask(env, 2, LINES[1], root)
        thanks, _ = ask(env, 3, LINES[2], root)
        unknown, _ = ask(env, 4, LINES[3], root)
    assert "20 days of vacation" in first and "**Sources**" in first
    assert "Benefits & Perks" in first
    assert "27 days" in follow_up and "**Sources**" in follow_up
    assert "You're welcome!" in thanks and "**Sources**" not in thanks
    assert NOT_FOUND in unknown and "**Sources**" not in unknown
    rows = env.deliveries()
    assert {r.act_as for r in rows} == {f"user:{BOT_ID}:{ANN_ID}"}  # linked by email
    assert {r.thread_key for r in rows} == {root}
    with env.runtime.database.session() as session:
        (conversation,) = session.query(Conversation).filter(Conversation.user_id == ann.id)
        assert conversation.message_count == 8  # one conversation for the thread
