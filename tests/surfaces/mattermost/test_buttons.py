"""The rating buttons: a forged click is refused and stores nothing, a real one stores the rating.

Mattermost does not sign callbacks; the context carries our HMAC. On SQLite and PostgreSQL.
"""

from __future__ import annotations

from search2o.storage.models import Message
from search2o.surfaces.mattermost.buttons import button_key, keyboard, verify_context
from tests.jobs.conftest import wait_until
from tests.surfaces.mattermost.conftest import MattermostEnv, MattermostFactory, listening
from tests.surfaces.mattermost.fake_mattermost import BOT_TOKEN, DM_ID


def ratings(env: MattermostEnv) -> dict[str, str | None]:
    with env.runtime.database.session() as session:
        return {m.id: m.rating for m in session.query(Message).filter(Message.role == "assistant")}


def test_a_forged_click_is_refused_and_a_real_one_stores_the_rating(
    mattermost_env: MattermostFactory,
) -> None:
    env = mattermost_env()
    with listening(env):
        env.fake.user_post("How many vacation days?")
        (row,) = env.settled(1)
    (answer,) = env.fake.bot_posts(DM_ID)
    real = answer["props"]["attachments"][0]["actions"][1]["integration"]["context"]
    forged = [
        {**real, "rating": "up"},  # the down button's signature on "up"
        {**real, "delivery": row.id + 1},
        {**real, "sig": "0" * 64},
        {"delivery": row.id, "rating": "up"},
        {},
    ]
    for context in forged:
        refused = env.fake.click(answer, 1, context=context)
        assert refused.status_code == 401, context
        assert refused.json()["detail"]["error"] == "AuthenticationError"
    assert env.jobs("mattermost.rate") == []
    assert ratings(env)[str(row.answer_message_id)] is None
    clicked = env.fake.click(answer, 1)
    assert clicked.status_code == 200 and clicked.json()["ephemeral_text"].startswith("Thanks")
    wait_until(
        lambda: [j for j in env.jobs("mattermost.rate") if j.state == "done"], 20, "the rating"
    )
    assert ratings(env)[str(row.answer_message_id)] == "down"


def test_a_context_verifies_only_under_its_own_key() -> None:
    key = button_key(BOT_TOKEN)
    props = keyboard(key, "https://search.example/mattermost/actions", 7)
    up, down = (a["integration"]["context"] for a in props["attachments"][0]["actions"])
    assert verify_context(key, up) == (7, "up") and verify_context(key, down) == (7, "down")
    assert verify_context(button_key("another-bot-token"), up) is None
    assert verify_context(key, {**up, "delivery": True}) is None
    assert verify_context(key, "not a dict") is None


def test_a_click_body_nested_too_deep_is_400(mattermost_env: MattermostFactory) -> None:
    # Callbacks are unsigned (the context carries our HMAC): 1,100 levels were a 500, before.
    env = mattermost_env()
    deep = b"[" * 1100 + b"]" * 1100
    response = env.http.post("/mattermost/actions", content=deep)
    assert response.status_code == 400
    assert env.jobs("mattermost.rate") == []
