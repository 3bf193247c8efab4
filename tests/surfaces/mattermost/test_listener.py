"""The WebSocket listener against the fake: after a drop or a silent stall it reconnects and
backfills over REST, with no lost and no duplicate answer. On SQLite and PostgreSQL."""

from __future__ import annotations

from collections import Counter

from tests.jobs.conftest import wait_until
from tests.surfaces.mattermost.conftest import MattermostEnv, MattermostFactory, listening
from tests.surfaces.mattermost.fake_mattermost import DM_ID


def answered_once(env: MattermostEnv, questions: list[dict[str, object]]) -> None:
    rows = env.settled(len(questions))
    assert sorted(r.event_key for r in rows) == sorted(str(q["id"]) for q in questions)
    roots = Counter(p["root_id"] for p in env.fake.bot_posts(DM_ID))
    assert roots == Counter({str(q["id"]): 1 for q in questions})  # one answer each
    assert all(r.state == "posted" for r in rows)


def test_after_a_drop_it_reconnects_and_backfills_the_gap(
    mattermost_env: MattermostFactory,
) -> None:
    env = mattermost_env()
    with listening(env) as listener:
        first = env.fake.user_post("How many vacation days?")
        env.settled(1)
        # posted as the connection died: its event never arrives
        lost = env.fake.user_post("And sick days?", broadcast=False)
        env.fake.drop()
        wait_until(lambda: listener.connections == 2, 10, "the reconnect")
        answered_once(env, [first, lost])
        after = env.fake.user_post("And parental leave?")
        answered_once(env, [first, lost, after])
    assert env.fake.authenticated >= 2


def test_after_a_silent_stall_the_watchdog_reconnects_and_backfills(
    mattermost_env: MattermostFactory,
) -> None:
    env = mattermost_env()
    with listening(env, watchdog_s=1.0) as listener:
        first = env.fake.user_post("How many vacation days?")
        env.settled(1)
        env.fake.stall()  # the socket stays open; events and pongs stop
        unseen = env.fake.user_post("And sick days?")  # its event is lost in the stall
        wait_until(lambda: listener.connections == 2, 10, "the watchdog's reconnect")
        answered_once(env, [first, unseen])
    # the first hello stores "now" (no history); the reconnect's hello backfills over REST
    assert len(env.fake.of("GET", "/api/v4/users/me/channels")) >= 1
    assert env.fake.of("GET", f"/api/v4/channels/{DM_ID}/posts")
