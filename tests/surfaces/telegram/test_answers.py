"""Answers in Telegram chats on a real server against the fake Bot API, on both backends.

A private chat streams a draft and ends with one message; a group answer is sent once and
edited on a throttle, skips unchanged text, waits out ``retry_after`` and always lands; a
group answer never cites an ``hr`` document, a linked user's private answer does; deep-link
linking; the 👍/👎 buttons store ratings and every click is answered; long answers are split.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from sqlalchemy import select

from search2o import accounts
from search2o.storage.models import Message
from search2o.storage.run_models import Run
from search2o.surfaces.identity import issue_link_code
from tests.jobs.conftest import wait_until
from tests.query.doubles import (
    DOCS,
    SALARIES,
    answering,
    ingest,
    last_user,
    passages,
    pieces,
    searching,
)
from tests.surfaces.surface_worker import hook_ran_once, kill_on_last_attempt
from tests.surfaces.telegram.conftest import TelegramEnv, TelegramFactory
from tests.surfaces.telegram.fake_telegram import (
    NOT_MODIFIED,
    callback_update,
    mention_update,
    message_update,
    utf16_len,
)

SALARY_Q = "What is the salary band for level 3 engineers?"
GROUP = -1001


def _cite_all(messages: Any) -> list[Any]:
    found = passages(messages)
    cites = "".join(f" [{p.number}]" for p in found)
    return pieces(f"About {last_user(messages)}:{cites}")


def test_a_private_chat_streams_a_draft_and_ends_with_one_message(
    telegram_env: TelegramFactory,
) -> None:
    env = telegram_env(answering("Twenty-five days of paid vacation every year.", pause=0.1))
    assert env.webhook(message_update(1, "How many vacation days?")) == [200]
    (row,) = env.settled(1)
    drafts = env.fake.of("sendMessageDraft")
    assert len(drafts) >= 2  # the text grew in the draft
    assert {d.params["draft_id"] for d in drafts} == {row.id}
    assert env.fake.of("editMessageText") == []
    (sent,) = env.fake.of("sendMessage")
    assert sent.params["text"].startswith("Twenty-five days of paid vacation every year.")
    (message,) = env.fake.in_chat(501)
    assert row.reply_key == str(message["message_id"])
    buttons = message["reply_markup"]["inline_keyboard"][0]
    assert [b["text"] for b in buttons] == ["👍", "👎"]
    assert all(len(b["callback_data"].encode()) <= 64 for b in buttons)


def test_group_edits_keep_the_throttle_skip_unchanged_text_and_land_after_429s(
    telegram_env: TelegramFactory,
) -> None:
    words = " ".join(f"w{i}" for i in range(40))
    env = telegram_env(answering(words, pause=0.03), update_every_s=0.25)
    env.fake.fail("editMessageText", 429, retry_after=1, times=3)
    assert env.webhook(mention_update(2, "Tell me everything.", message_id=20)) == [200]
    (row,) = env.settled(1)
    assert row.state == "posted"
    (message,) = env.fake.in_chat(GROUP)
    assert message["text"].startswith(words) and "…" not in message["text"].split("\n")[0]
    assert len(env.fake.of("sendMessage")) == 1  # sent once, then edited
    edits = [c for c in env.fake.calls if c.method == "editMessageText"]
    assert any(c.status == 429 for c in edits)
    sent = [c for c in edits if c.status == 200]
    gaps = [b.at - a.at for a, b in itertools.pairwise(sent)]
    assert all(gap >= 0.25 - 0.02 for gap in gaps[:-1]), gaps  # the final edit never waits
    texts = [c.params["text"] for c in sent]
    assert all(a != b for a, b in itertools.pairwise(texts))  # nothing sent twice
    assert not [c for c in edits if c.status == 400]  # never an unchanged edit
    first_ok = min(c.at for c in sent)
    limited = max(c.at for c in edits if c.status == 429)
    assert first_ok >= limited  # nothing went out while the chat was told to wait


def test_five_answers_at_once_in_one_group_stay_within_its_budget_and_all_land(
    telegram_env: TelegramFactory,
) -> None:
    budget, window = 6, 1.0
    words = " ".join(f"w{i}" for i in range(40))
    env = telegram_env(
        lambda m, t: pieces(words, pause=0.02),
        group_budget=budget,
        group_window_s=window,
        update_every_s=0.0,
    )
    env.fake.fail("editMessageText", 429, retry_after=1, times=2)
    for i in range(5):
        update = mention_update(300 + i, f"question {i}", message_id=300 + i, user_id=600 + i)
        assert env.webhook(update) == [200]
    rows = env.settled(5, timeout_s=90)
    assert {r.state for r in rows} == {"posted"}
    answers = env.fake.in_chat(GROUP)
    assert len(answers) == 5
    assert {m["reply_parameters"]["message_id"] for m in answers} == set(range(300, 305))
    assert all(m["text"].startswith(words) for m in answers)  # every final text landed
    sends = [c for c in env.fake.calls if c.method in ("sendMessage", "editMessageText")]
    assert len([c for c in sends if c.status == 429]) == 2
    times = sorted(c.at for c in sends)
    worst = max(sum(1 for t in times if start <= t < start + window) for start in times)
    assert worst <= budget, f"{worst} sends to the group within {window} s"


def test_message_is_not_modified_on_the_final_edit_counts_as_delivered(
    telegram_env: TelegramFactory,
) -> None:
    env = telegram_env(answering("Twenty-five days a year.", pause=0.1))
    env.fake.fail("editMessageText", 400, description=NOT_MODIFIED, times=50)
    assert env.webhook(mention_update(3, "How many vacation days?", message_id=21)) == [200]
    (row,) = env.settled(1)
    assert row.state == "posted"
    (job,) = env.jobs()
    assert job.state == "done" and job.attempts == 1


def test_an_attempt_lost_after_the_run_started_follows_that_run_and_never_asks_again(
    telegram_env: TelegramFactory,
) -> None:
    # the only edit is the final one (the throttle holds the rest back), and it fails once:
    # the attempt is lost after the run started; the next one follows that run
    env = telegram_env(answering("Twenty-five days a year.", pause=0.05), update_every_s=60)
    env.fake.fail("editMessageText", 502, description="Bad Gateway")
    assert env.webhook(mention_update(4, "How many vacation days?", message_id=22)) == [200]
    (row,) = env.settled(1)
    (job,) = env.jobs()
    assert row.state == "posted" and job.attempts == 2 and row.run_id is not None
    (message,) = env.fake.in_chat(GROUP)  # one answer, edited into its final text
    assert message["text"].startswith("Twenty-five days a year.")
    assert len(env.fake.of("sendMessage")) == 1
    with env.runtime.database.session() as session:
        roles = sorted(session.scalars(select(Message.role)))
        runs = list(session.scalars(select(Run.id)))
    assert roles == ["assistant", "user"] and runs == [row.run_id]  # the question once
    assert len(env.model.calls) == 1


def test_a_group_answer_never_cites_an_hr_document_and_the_linked_private_one_does(
    telegram_env: TelegramFactory,
) -> None:
    env = telegram_env(searching(_cite_all))
    ingest(env.runtime, DOCS)
    ingest(env.runtime, {"salaries.md": SALARIES}, groups=["hr"])
    with env.runtime.database.session() as session:
        ann = accounts.create_user(session, "ann@example.com", groups=["hr"])
        code = issue_link_code(session, ann.id, surface="telegram").code
    assert env.webhook(message_update(40, f"/start {code}", message_id=40)) == [200]
    env.settled(1)
    (linked,) = env.fake.in_chat(501)
    assert linked["text"] == "Linked to ann@example.com. Ask me anything."
    assert env.webhook(mention_update(41, SALARY_Q, message_id=41, user_id=501)) == [200]
    assert env.webhook(message_update(42, SALARY_Q, message_id=42)) == [200]
    _, group, private = env.settled(3)
    assert group.act_as == "shared:7000001" and private.act_as == "user:7000001:501"
    (in_group,) = env.fake.in_chat(GROUP)
    in_private = env.fake.in_chat(501)[-1]
    assert "Salary bands" not in json.dumps(in_group)
    assert "open to everyone" in in_group["text"]
    assert "Salary bands" in json.dumps(in_private)
    assert "open to everyone" not in in_private["text"]
    (quote,) = [e for e in in_private["entities"] if e["type"] == "expandable_blockquote"]
    sources = in_private["text"].encode("utf-16-le")[2 * quote["offset"] :].decode("utf-16-le")
    assert sources.startswith("Sources\n[1] ") and "Salary" in sources


def test_an_unlinked_user_gets_the_shared_scope_and_a_hint_or_only_the_hint(
    telegram_env: TelegramFactory,
) -> None:
    env = telegram_env(searching(_cite_all))
    ingest(env.runtime, {"salaries.md": SALARIES}, groups=["hr"])
    assert env.webhook(message_update(50, SALARY_Q, message_id=50)) == [200]
    (row,) = env.settled(1)
    assert row.act_as == "shared:7000001"
    (reply,) = env.fake.in_chat(501)
    assert "/link CODE" in reply["text"] and "Salary bands" not in json.dumps(reply)


def test_link_only_answers_an_unlinked_user_with_the_hint_alone(
    telegram_env: TelegramFactory,
) -> None:
    env = telegram_env(unlinked="link_only")
    assert env.webhook(message_update(51, "How many vacation days?", message_id=51)) == [200]
    (row,) = env.settled(1)
    assert row.act_as is None
    (reply,) = env.fake.in_chat(501)
    assert reply["text"].startswith("Link your account") and "Twenty-five" not in reply["text"]
    assert env.model.calls == []


def click(env: TelegramEnv, update_id: int, message: dict[str, Any], data: str) -> None:
    assert env.webhook(callback_update(update_id, data, message)) == [200]


def test_a_rating_click_stores_the_rating_and_every_click_is_answered(
    telegram_env: TelegramFactory,
) -> None:
    env = telegram_env()
    assert env.webhook(message_update(60, "first question", message_id=60)) == [200]
    assert env.webhook(message_update(61, "second question", message_id=61)) == [200]
    first, second = env.settled(2)
    # the two answers may be sent in either order: take the one replying to the second
    (message,) = [m for m in env.fake.in_chat(501) if m["reply_parameters"]["message_id"] == 61]
    down = message["reply_markup"]["inline_keyboard"][0][1]["callback_data"]
    click(env, 62, message, down)
    click(env, 63, message, "rate:999999:up")  # names no answer
    click(env, 64, {**message, "chat": {"id": 777}}, down)  # another chat's click
    wait_until(
        lambda: len([j for j in env.jobs("telegram.rate") if j.state in ("done", "failed")]) == 3,
        20,
        "the rating jobs",
    )
    with env.runtime.database.session() as session:
        rated = {m.id: m.rating for m in session.query(Message).filter(Message.role == "assistant")}
    assert rated[second.answer_message_id] == "down"
    assert rated[first.answer_message_id] is None
    answered = env.fake.of("answerCallbackQuery")
    assert sorted(c.params["callback_query_id"] for c in answered) == ["cb62", "cb63", "cb64"]
    said = {c.params["callback_query_id"]: c.params["text"] for c in answered}
    assert said["cb62"].startswith("Thanks") and said["cb63"] == said["cb64"]


def test_a_long_answer_is_split_in_messages_of_at_most_4096_units(
    telegram_env: TelegramFactory,
) -> None:
    long = " ".join(["休暇 🎉 vacation"] * 700)  # about 9,800 UTF-16 units
    env = telegram_env(answering(long))
    assert env.webhook(message_update(70, "Tell me at length.", message_id=70)) == [200]
    (row,) = env.settled(1)
    messages = env.fake.in_chat(501)
    assert len(messages) == 3 and row.reply_key == ",".join(str(m["message_id"]) for m in messages)
    assert all(utf16_len(m["text"]) <= 4096 for m in messages)
    words = "".join(m["text"] + " " for m in messages).split()
    assert words[: len(long.split())] == long.split()  # then the footer
    assert [m["reply_markup"] is not None for m in messages] == [False, False, True]


ASKER = {
    "name": "travel",
    "description": "Asks for the airline",
    "functions": {
        "main": {
            "ask": {"question": "Which airline do you prefer?"},
            "end": {"output": "{ 'Noted: ' + result }"},
        }
    },
}


def test_an_agents_ask_comes_with_force_reply_and_the_reply_resumes_the_run(
    telegram_env: TelegramFactory,
) -> None:
    env = telegram_env()
    with env.runtime.database.session() as session:
        admin = accounts.create_user(session, "root@example.com", is_admin=True)
        token = accounts.issue_token(session, admin)
    put = env.http.put(
        "/v1/agents/travel", json=ASKER, headers={"Authorization": f"Bearer {token}"}
    )
    assert put.status_code == 201, put.text
    group = {"chat_id": GROUP, "chat_type": "supergroup"}
    assert env.webhook(mention_update(80, "/agent travel book a flight", message_id=80)) == [200]
    env.settled(1)
    (asked,) = env.fake.in_chat(GROUP)
    assert asked["text"].startswith("Which airline do you prefer?")
    assert asked["reply_markup"]["force_reply"] is True
    reply_to = {"message_id": asked["message_id"], "from": asked["from"], "chat": asked["chat"]}
    # a reply to the bot's message needs no mention in a group
    assert env.webhook(message_update(81, "KLM", message_id=81, reply_to=reply_to, **group)) == [
        200
    ]
    env.settled(2)
    done = env.fake.in_chat(GROUP)[-1]
    assert done["text"].startswith("Noted: KLM")
    assert "inline_keyboard" in done["reply_markup"]


def test_a_final_failure_shows_a_short_error_in_the_chat(telegram_env: TelegramFactory) -> None:
    def broken(messages: Any, tools: Any) -> list[Any]:
        return [RuntimeError("model down")]

    env = telegram_env(broken)
    assert env.webhook(mention_update(90, "Anyone there?", message_id=90)) == [200]
    (row,) = env.settled(1, timeout_s=40)
    assert row.state == "failed"
    (job,) = env.jobs()
    assert job.state == "failed" and job.attempts == job.max_attempts
    (notice,) = env.fake.in_chat(GROUP)
    assert notice["text"].startswith("Sorry, I could not answer this")
    assert notice["reply_parameters"]["message_id"] == 90


def test_a_worker_killed_on_the_last_attempt_ends_the_chat_with_one_visible_error(
    telegram_env: TelegramFactory,
) -> None:
    env = telegram_env(
        lambda m, t: [*pieces("Twenty-five", pause=0.05), 3.0, *pieces(" days.")],
        jobs_in_server=False,
    )
    kill_on_last_attempt(
        env.runtime,
        "telegram",
        lambda: env.webhook(mention_update(95, "How many vacation days?", message_id=95)),
        lambda: any("Twenty" in m["text"] for m in env.fake.in_chat(GROUP)),
    )
    (row,) = env.settled(1, timeout_s=40)
    assert row.state == "failed"
    hook_ran_once(env.runtime)
    (notice,) = env.fake.in_chat(GROUP)  # the partial answer, edited into the error
    assert str(notice["message_id"]) == row.reply_key
    assert notice["text"].startswith("Sorry, I could not answer this")
    assert len(env.fake.of("sendMessage")) == 1
