"""Answers in Mattermost threads on a real server against the fake, on both backends.

Patched on a throttle that obeys ``X-Ratelimit-*`` and 429, the final text always lands; a
channel answer never cites an ``hr`` document while a DM of a user linked by email does; long
answers are split; a final failure is shown.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from search2o import accounts
from search2o.surfaces.mattermost.render import MAX_CHARS
from tests.api.test_api import add_user
from tests.query.doubles import SALARIES, answering, ingest, last_user, passages, pieces, searching
from tests.surfaces.mattermost.conftest import MattermostFactory, listening
from tests.surfaces.mattermost.fake_mattermost import ANN_ID, BOT_ID, DM_ID, TOWN_ID, send_command
from tests.surfaces.surface_worker import hook_ran_once, kill_on_last_attempt

SALARY_Q = "What is the salary band for level 3 engineers?"


def _cite_all(messages: Any) -> list[Any]:
    found = passages(messages)
    cites = "".join(f" [{p.number}]" for p in found)
    return pieces(f"About {last_user(messages)}:{cites}")


def test_patches_keep_the_throttle_and_the_final_text_lands_after_429s(
    mattermost_env: MattermostFactory,
) -> None:
    words = " ".join(f"w{i}" for i in range(80))
    env = mattermost_env(answering(words, pause=0.05), update_every_s=0.25)  # 4 s of deltas
    env.fake.fail("patch", times=2, reset_s=1)
    with listening(env):
        question = env.fake.user_post("@search2o tell me everything", channel=TOWN_ID)
        (row,) = env.settled(1)
    assert row.state == "posted"
    (answer,) = env.fake.bot_posts(TOWN_ID)
    assert answer["root_id"] == question["id"]
    assert answer["message"].startswith(words) and " …" not in answer["message"]
    assert len(env.fake.of("POST", "/api/v4/posts")) == 1  # posted once, then patched
    patches = env.fake.of("PUT", "/patch")
    assert len([c for c in patches if c.status == 429]) == 2
    sent = [c for c in patches if c.status == 200]
    assert len(sent) >= 3  # the answer grew in place before its final text
    gaps = [b.at - a.at for a, b in itertools.pairwise(sent)]
    assert all(gap >= 0.25 - 0.02 for gap in gaps[:-1]), gaps  # the final patch never waits
    texts = [c.body["message"] for c in sent]
    assert all(a != b for a, b in itertools.pairwise(texts[:-1]))  # nothing sent twice
    for limited, after in itertools.pairwise(patches):  # nothing while the reset holds
        if limited.status == 429:
            assert after.at - limited.at >= 0.95, (limited, after)
    assert answer["props"]["attachments"][0]["actions"][0]["name"] == "👍"


@pytest.mark.slow  # the first search of a session loads the embedding model (about 10 s)
def test_a_channel_answer_never_cites_an_hr_document_and_a_dm_linked_by_email_does(
    mattermost_env: MattermostFactory,
) -> None:
    env = mattermost_env(searching(_cite_all))
    ingest(env.runtime, {"salaries.md": SALARIES}, groups=["hr"])
    with env.runtime.database.session() as session:
        accounts.create_user(session, "ann@example.com", groups=["hr"])
    with listening(env):
        env.fake.user_post(f"@search2o {SALARY_Q}", channel=TOWN_ID)
        env.settled(1)
        env.fake.user_post(SALARY_Q, channel=DM_ID)
        in_channel, in_dm = env.settled(2)
    assert in_channel.act_as == f"shared:{BOT_ID}"
    assert in_dm.act_as == f"user:{BOT_ID}:{ANN_ID}"  # linked by the verified email
    (channel_answer,) = env.fake.bot_posts(TOWN_ID)
    (dm_answer,) = env.fake.bot_posts(DM_ID)
    assert "Salary" not in json.dumps(channel_answer) and "open to everyone" in json.dumps(
        channel_answer
    )
    assert "**Sources**" in dm_answer["message"] and "Salary" in dm_answer["message"]
    assert "open to everyone" not in dm_answer["message"]


def test_with_emails_hidden_a_dm_gets_the_shared_scope_and_the_link_hint(
    mattermost_env: MattermostFactory,
) -> None:
    env = mattermost_env(searching(_cite_all))
    env.fake.show_email = False
    ingest(env.runtime, {"salaries.md": SALARIES}, groups=["hr"])
    with env.runtime.database.session() as session:
        accounts.create_user(session, "ann@example.com", groups=["hr"])
    with listening(env):
        env.fake.user_post(SALARY_Q, channel=DM_ID)
        (row,) = env.settled(1)
    assert row.act_as == f"shared:{BOT_ID}"
    (answer,) = env.fake.bot_posts(DM_ID)
    assert "/search2o link CODE" in answer["message"] and "Salary" not in answer["message"]


def test_a_long_answer_is_split_in_posts_of_the_thread(mattermost_env: MattermostFactory) -> None:
    long = " ".join(["vacation days"] * 1500)  # about 21,000 characters
    env = mattermost_env(answering(long))
    with listening(env):
        question = env.fake.user_post("Tell me at length.")
        (row,) = env.settled(1)
    posts = env.fake.bot_posts(DM_ID)
    assert len(posts) == 2 and row.reply_key == ",".join(p["id"] for p in posts)
    assert all(len(p["message"]) <= MAX_CHARS and p["root_id"] == question["id"] for p in posts)
    words = " ".join(p["message"] for p in posts).split()
    assert words[: len(long.split())] == long.split()
    assert ["attachments" in p["props"] for p in posts] == [False, True]


def test_a_final_failure_shows_a_short_error_in_the_thread(
    mattermost_env: MattermostFactory,
) -> None:
    def broken(messages: Any, tools: Any) -> list[Any]:
        return [RuntimeError("model down")]

    env = mattermost_env(broken)
    with listening(env):
        question = env.fake.user_post("Anyone there?")
        (row,) = env.settled(1, timeout_s=40)
    assert row.state == "failed"
    (notice,) = env.fake.bot_posts(DM_ID)
    assert notice["message"].startswith("Sorry, I could not answer this")
    assert notice["root_id"] == question["id"]


def test_a_worker_killed_on_the_last_attempt_ends_the_thread_with_one_visible_error(
    mattermost_env: MattermostFactory,
) -> None:
    env = mattermost_env(
        lambda m, t: [*pieces("Twenty-five", pause=0.05), 3.0, *pieces(" days.")],
        jobs_in_server=False,
    )
    asked: list[dict[str, Any]] = []
    with listening(env):
        kill_on_last_attempt(
            env.runtime,
            "mattermost",
            lambda: asked.append(env.fake.user_post("How many vacation days?")),
            lambda: any("Twenty" in p["message"] for p in env.fake.bot_posts(DM_ID)),
        )
        (row,) = env.settled(1, timeout_s=40)
    assert row.state == "failed"
    hook_ran_once(env.runtime)
    (notice,) = env.fake.bot_posts(DM_ID)  # the partial answer, patched into the error
    assert notice["id"] == row.reply_key and notice["root_id"] == asked[0]["id"]
    assert notice["message"].startswith("Sorry, I could not answer this")


def test_an_agent_started_by_the_command_asks_and_the_next_message_in_its_thread_answers(
    mattermost_env: MattermostFactory,
) -> None:
    env = mattermost_env()
    admin = add_user(env.runtime, "admin@example.com", admin=True)
    main = {"ask": {"question": "Which office?"}, "end": {"output": "{ 'Booked: ' + result }"}}
    doc = {"name": "asker", "description": "books a desk", "functions": {"main": main}}
    assert env.http.put("/v1/agents/asker", json=doc, headers=admin).status_code == 201
    with listening(env):
        started = send_command(f"{env.base}/mattermost/command", "agent asker Book me a desk")
        assert started.status_code == 200
        env.settled(1)
        (asked,) = env.fake.bot_posts(TOWN_ID)
        assert asked["message"].startswith("Which office?") and asked["root_id"] == ""
        assert "attachments" not in asked["props"]  # a question is not rated
        # the answer to it: a plain reply in the agent's thread, no mention, no command
        env.fake.user_post("Berlin", channel=TOWN_ID, root_id=asked["id"])
        env.settled(2)
    first, second = env.fake.bot_posts(TOWN_ID)
    assert first["id"] == asked["id"]
    assert second["message"].startswith("Booked: Berlin") and second["root_id"] == asked["id"]
    assert "attachments" in second["props"]  # the agent's answer is rated
