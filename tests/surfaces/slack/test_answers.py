"""Answers in Slack threads on a real server against the fake Slack, on both backends.

A crashed attempt's answer is edited, never posted twice; a final failure is visible; five
answers at once stay within the workspace's ``chat.update`` budget through 429s and
``ok:false ratelimited``; a direct message reads what its linked user may read, a channel only
what is open to everyone; the thumbs buttons store the rating; native streaming names the
recipient in channels.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from sqlalchemy import select

from search2o import accounts
from search2o.jobs.ledger import FINAL_FAILURE
from search2o.providers.chat import ChatMessage, ToolSpec
from search2o.storage.models import Message
from search2o.storage.run_models import Run
from tests.api.test_api import add_user
from tests.jobs.conftest import wait_until
from tests.query.doubles import (
    DOCS,
    SALARIES,
    Step,
    answering,
    ingest,
    last_user,
    passages,
    pieces,
    searching,
)
from tests.surfaces.slack.conftest import SlackEnv, SlackFactory
from tests.surfaces.slack.fake_slack import BOT_USER, message_event
from tests.surfaces.surface_worker import hook_ran_once, kill_on_last_attempt, surface_worker

SALARY_Q = "What is the salary band for level 3 engineers?"


def mention(text: str, ts: str, **kw: Any) -> dict[str, Any]:
    return message_event(f"<@{BOT_USER}> {text}", ts, kind="app_mention", **kw)


class DiesOnce:
    """A model whose first answer writes a few words and then dies (or hangs for ``hang_s``);
    later ones answer."""

    def __init__(self, answer: str, hang_s: float = 0.0) -> None:
        self.answer = answer
        self.hang_s = hang_s
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, messages: list[ChatMessage], tools: list[ToolSpec]) -> Iterable[Step]:
        with self.lock:
            self.calls += 1
            first = self.calls == 1
        if first and self.hang_s:
            return [*pieces("Half an answer", pause=0.05), self.hang_s]
        if first:
            return [*pieces("Half an answer", pause=0.05), 0.3, RuntimeError("the model died")]
        return pieces(self.answer, pause=0.01)


def test_an_attempt_that_dies_mid_answer_runs_again_and_the_thread_holds_one_answer(
    slack_env: SlackFactory,
) -> None:
    env = slack_env(DiesOnce("Twenty-five days of paid vacation."))
    ts = "1700000101.000100"
    env.event(mention("How many vacation days?", ts), "EvC")
    (row,) = env.settled(1)
    assert row.state == "posted"
    (job,) = env.jobs()
    assert job.attempts == 2 and job.state == "done"
    replies = env.fake.replies("C1", ts)
    assert len(replies) == 1, replies  # the second attempt edited the first one's message
    assert replies[0]["ts"] == row.reply_key
    assert "Twenty-five days" in replies[0]["text"] and "Half" not in replies[0]["text"]
    assert len(env.fake.of("chat.postMessage")) == 1
    # the 👀 status was cleared after each attempt
    assert len(env.fake.of("reactions.remove")) == len(env.fake.of("reactions.add")) == 2


def test_a_final_failure_posts_a_short_visible_error_in_the_thread(
    slack_env: SlackFactory,
) -> None:
    def broken(messages: list[ChatMessage], tools: list[ToolSpec]) -> Iterable[Step]:
        return [RuntimeError("model down")]

    env = slack_env(broken)
    ts = "1700000102.000100"
    env.event(mention("Anyone there?", ts), "EvF")
    (row,) = env.settled(1, timeout_s=40)
    assert row.state == "failed"
    (job,) = env.jobs()
    assert job.state == "failed" and job.attempts == job.max_attempts
    (reply,) = env.fake.replies("C1", ts)
    assert reply["text"].startswith("Sorry, I could not answer this")
    assert row.sealed_text is None  # the question's text is dropped at the end


def test_slack_down_through_every_attempt_still_ends_the_delivery_failed(
    slack_env: SlackFactory,
) -> None:
    env = slack_env()
    env.fake.fail("chat.postMessage", error="fatal_error", times=1000)  # ok:false every time
    ts = "1700000103.000100"
    env.event(mention("Anyone there?", ts), "EvDown")
    (row,) = env.settled(1, timeout_s=60)
    assert row.state == "failed"  # not `answering` for an answer nobody writes any more
    assert row.sealed_text is None
    (job,) = env.jobs()
    assert job.state == "failed" and job.attempts == job.max_attempts

    def hook_given_up() -> bool | None:
        hooks = env.jobs(FINAL_FAILURE)
        return (len(hooks) == 1 and hooks[0].state == "failed") or None

    wait_until(hook_given_up, 30, "the hook job given up")
    assert env.fake.replies("C1", ts) == []  # nothing could be shown, nothing was


def test_five_answers_at_once_stay_within_the_update_budget_and_all_land(
    slack_env: SlackFactory,
) -> None:
    budget, window = 6, 1.0
    text = " ".join(f"word{i}" for i in range(40))
    env = slack_env(
        lambda m, t: pieces(text, pause=0.02),
        update_budget=budget,
        update_window_s=window,
        update_every_s=0.0,
    )
    env.fake.fail("chat.update", status=429, retry_after=1, times=2)
    env.fake.fail("chat.update", error="ratelimited", times=2)
    stamps = [f"17000002{i:02d}.000100" for i in range(5)]
    for i, ts in enumerate(stamps):
        env.event(mention(f"question {i}", ts, user=f"U{i}"), f"EvB{i}")
    rows = env.settled(5, timeout_s=60)
    assert {r.state for r in rows} == {"posted"}
    for ts in stamps:
        (reply,) = env.fake.replies("C1", ts)
        assert "word39" in reply["text"] and reply["blocks"], reply  # every final text landed
    updates = [c for c in env.fake.calls if c.method == "chat.update"]
    assert len([c for c in updates if c.status == 429]) == 2
    ok_false = [c for c in updates if c.status == 200 and c.answer.get("error") == "ratelimited"]
    assert len(ok_false) == 2
    times = sorted(c.at for c in updates)
    worst = max(sum(1 for t in times if start <= t < start + window) for start in times)
    assert worst <= budget, f"{worst} chat.update calls within {window} s"
    # Retry-After was honoured: after a 429 (and calls already on their way, 0.1 s), nothing
    # reached chat.update for the rest of that second
    for limited in (c for c in updates if c.status == 429):
        assert not [c for c in updates if limited.at + 0.1 < c.at < limited.at + 0.95]


def _cite_all(messages: list[ChatMessage]) -> list[Step]:
    found = passages(messages)
    cites = "".join(f" [{p.number}]" for p in found)
    return pieces(f"About {last_user(messages)}:{cites}")


@pytest.mark.slow  # embeds the documents with the real model
def test_a_channel_answer_never_cites_an_hr_document_and_the_dm_answer_does(
    slack_env: SlackFactory,
) -> None:
    env = slack_env(searching(_cite_all))
    ingest(env.runtime, DOCS)
    ingest(env.runtime, {"salaries.md": SALARIES}, groups=["hr"])
    with env.runtime.database.session() as session:
        accounts.create_user(session, "ann@example.com", groups=["hr"])
    env.fake.add_user("U1", "ann@example.com")

    env.event(mention(SALARY_Q, "1700000301.000100"), "EvCh")
    env.event(message_event(SALARY_Q, "1700000302.000100", channel="D1", channel_type="im"), "EvDm")
    channel, dm = env.settled(2)
    assert channel.act_as == "shared:T1" and dm.act_as == "user:T1:U1"
    (in_channel,) = env.fake.replies("C1", "1700000301.000100")
    (in_dm,) = env.fake.replies("D1", "1700000302.000100")
    assert "Salary bands" not in json.dumps(in_channel["blocks"])
    assert "open to everyone" in json.dumps(in_channel["blocks"])  # the footer says so
    assert "Salary bands" in json.dumps(in_dm["blocks"])
    assert "open to everyone" not in json.dumps(in_dm["blocks"])


@pytest.mark.slow  # embeds the documents with the real model
def test_an_unlinked_dm_user_gets_the_channel_scope_and_a_link_hint(
    slack_env: SlackFactory,
) -> None:
    env = slack_env(searching(_cite_all))
    ingest(env.runtime, {"salaries.md": SALARIES}, groups=["hr"])
    env.fake.add_user("U7", "nobody@example.com")
    env.event(
        message_event(SALARY_Q, "1700000401.000100", channel="D7", channel_type="im", user="U7"),
        "EvUn",
    )
    (row,) = env.settled(1)
    assert row.act_as == "shared:T1"
    (reply,) = env.fake.replies("D7", "1700000401.000100")
    blocks = json.dumps(reply["blocks"])
    assert "link CODE" in blocks and "Salary bands" not in blocks


def click(env: SlackEnv, reply: dict[str, Any], rating: str, channel: str = "C1") -> None:
    actions = reply["blocks"][-1]["elements"]
    button = next(b for b in actions if b["value"].endswith(f":{rating}"))
    payload = {
        "type": "block_actions",
        "team": {"id": "T1"},
        "user": {"id": "U1"},
        "channel": {"id": channel},
        "container": {"type": "message", "message_ts": reply["ts"], "channel_id": channel},
        "actions": [{**button, "action_ts": "1700000999.1", "type": "button"}],
    }
    body = urlencode({"payload": json.dumps(payload)}).encode()
    response = env.post(
        body, path="/slack/interactions", content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 200, response.text


def test_a_feedback_click_stores_the_rating_on_the_right_message(
    slack_env: SlackFactory,
) -> None:
    env = slack_env()
    env.event(mention("first question", "1700000501.000100"), "EvR1")
    env.event(mention("second question", "1700000502.000100"), "EvR2")
    first, second = env.settled(2)
    (reply,) = env.fake.replies("C1", "1700000502.000100")
    click(env, reply, "down")
    wait_until(
        lambda: [j for j in env.jobs("slack.rate") if j.state == "done"], 20, "the rating job"
    )
    with env.runtime.database.session() as session:
        rated = {m.id: m.rating for m in session.query(Message).filter(Message.role == "assistant")}
    assert rated[second.answer_message_id] == "down"
    assert rated[first.answer_message_id] is None


def test_an_agents_ask_in_a_thread_is_answered_by_the_next_message_there(
    slack_env: SlackFactory,
) -> None:
    env = slack_env(agent="asker")
    admin = add_user(env.runtime, "admin@example.com", admin=True)
    main = {"ask": {"question": "Which office?"}, "end": {"output": "{ 'Booked: ' + result }"}}
    doc = {"name": "asker", "description": "books a desk", "functions": {"main": main}}
    assert env.http.put("/v1/agents/asker", json=doc, headers=admin).status_code == 201
    ts = "1700000601.000100"
    env.event(mention("Book me a desk", ts), "EvAsk1")
    env.settled(1)
    (asked,) = env.fake.replies("C1", ts)
    assert "Which office?" in asked["text"]
    # the answer to the question: a plain message in the thread, no new mention
    env.event(message_event("Berlin", "1700000602.000100", thread_ts=ts), "EvAsk2")
    env.settled(2)
    first, second = env.fake.replies("C1", ts)
    assert first["ts"] == asked["ts"] and "Booked: Berlin" in second["text"]


def test_native_streaming_in_a_channel_names_the_recipient(slack_env: SlackFactory) -> None:
    text = " ".join(f"part{i}" for i in range(30))
    env = slack_env(lambda m, t: pieces(text, pause=0.01), stream=True, update_every_s=0.05)
    ts = "1700000701.000100"
    env.event(mention("stream it", ts, user="U5"), "EvSt")
    env.settled(1)
    (start,) = env.fake.of("chat.startStream")
    assert start.params["recipient_team_id"] == "T1" and start.params["recipient_user_id"] == "U5"
    assert start.params["thread_ts"] == ts
    assert env.fake.of("chat.appendStream"), "the answer streamed in pieces"
    assert len(env.fake.of("chat.stopStream")) == 1
    (reply,) = env.fake.replies("C1", ts)
    assert "part29" in reply["text"] and reply["blocks"][-1]["type"] == "actions"
    assert env.fake.of("chat.postMessage") == []


def test_a_refused_stream_falls_back_to_post_and_edit(slack_env: SlackFactory) -> None:
    env = slack_env(stream=True)
    env.fake.fail("chat.startStream", error="missing_recipient_team_id")
    ts = "1700000801.000100"
    env.event(mention("stream it", ts), "EvSf")
    (row,) = env.settled(1)
    assert row.state == "posted"
    (reply,) = env.fake.replies("C1", ts)
    assert "Twenty-five days" in reply["text"]
    assert len(env.fake.of("chat.postMessage")) == 1


def test_a_worker_killed_mid_answer_leaves_one_answer_after_the_job_runs_again(
    slack_env: SlackFactory, tmp_path: Path
) -> None:
    # the server's model writes a few words, pauses (the worker dies then) and finishes: the
    # run goes on without the worker, and the next attempt follows it instead of asking again
    def slow(messages: list[ChatMessage], tools: list[ToolSpec]) -> Iterable[Step]:
        return [*pieces("Twenty-five days", pause=0.05), 2.0, *pieces(" of paid vacation.")]

    env = slack_env(slow, jobs_in_server=False)
    ts = "1700001001.000100"
    with answer_worker(env) as worker:
        env.event(mention("How many vacation days?", ts), "EvKill")
        wait_until(
            lambda: any("Twenty" in c.params.get("text", "") for c in env.fake.of("chat.update")),
            30,
            "the first attempt's partial answer",
        )
        worker.kill()  # SIGKILL in the middle of the answer
        worker.wait(timeout=10)
    (row,) = env.deliveries()
    assert row.state == "answering" and row.reply_key is not None and row.run_id is not None
    env.runtime.jobs.start_consumer(1)  # another worker: it takes the job once its lease ends
    (row,) = env.settled(1, timeout_s=40)
    (job,) = env.jobs()
    assert job.attempts == 2 and row.state == "posted"
    (reply,) = env.fake.replies("C1", ts)  # the thread holds exactly one answer
    assert reply["ts"] == row.reply_key
    assert "Twenty-five days of paid vacation." in reply["text"]
    assert len(env.fake.of("chat.postMessage")) == 1
    # the question was asked once: one run, one question and one answer, one model call
    assert asked_once(env) == (["assistant", "user"], 1)
    assert len(env.model.calls) == 1


def test_a_worker_killed_right_after_posting_leaves_one_answer_found_by_its_metadata(
    slack_env: SlackFactory,
) -> None:
    answer = answering("Twenty-five days of paid vacation.", pause=0.05)
    env = slack_env(answer, jobs_in_server=False)
    # the first post takes effect, but its answer comes late: the worker dies before the ts
    # reaches our database
    env.fake.hold("chat.postMessage", 20)
    ts = "1700001101.000100"
    with answer_worker(env) as worker:
        env.event(mention("How many vacation days?", ts), "EvPosted")
        wait_until(lambda: env.fake.of("chat.postMessage"), 30, "the first attempt's post")
        worker.kill()
        worker.wait(timeout=10)
    (row,) = env.deliveries()
    assert row.state == "answering" and row.reply_key is None
    (posted,) = env.fake.replies("C1", ts)
    assert posted["metadata"] == {
        "event_type": "search2o_answer",
        "event_payload": {"delivery": row.id},
    }
    env.runtime.jobs.start_consumer(1)  # the retry looks the thread up before posting
    (row,) = env.settled(1, timeout_s=40)
    assert row.state == "posted"
    (reply,) = env.fake.replies("C1", ts)  # exactly one answer: the first post, edited
    assert reply["ts"] == posted["ts"] == row.reply_key
    assert "Twenty-five days of paid vacation." in reply["text"]
    assert len(env.fake.of("chat.postMessage")) == 1
    (lookup,) = env.fake.of("conversations.replies")
    assert lookup.params["include_all_metadata"] == "true" and lookup.params["ts"] == ts
    assert asked_once(env) == (["assistant", "user"], 1)


def answer_worker(env: SlackEnv) -> contextlib.AbstractContextManager[subprocess.Popen[str]]:
    """A real worker process running the Slack jobs, ready to be killed."""
    return surface_worker(env.runtime.settings, "slack")


def asked_once(env: SlackEnv) -> tuple[list[str], int]:
    """The roles of every stored message (sorted) and the number of runs."""
    with env.runtime.database.session() as session:
        roles = sorted(session.scalars(select(Message.role)))
        runs = len(list(session.scalars(select(Run.id))))
    return roles, runs


def test_a_link_code_links_the_account_by_slash_command_and_by_dm(
    slack_env: SlackFactory,
) -> None:
    env = slack_env()
    ann = add_user(env.runtime, "ann@example.com")
    bob = add_user(env.runtime, "bob@example.com")

    def code(user: dict[str, str]) -> str:
        minted = env.http.post("/v1/surfaces/link-codes", json={"surface": "slack"}, headers=user)
        assert minted.status_code == 201, minted.text
        return str(minted.json()["code"])

    form = {"command": "/search2o", "team_id": "T1", "user_id": "U1", "text": "link NOPE-NOPE-NOP"}
    wrong = env.post(urlencode(form).encode(), content_type="application/x-www-form-urlencoded")
    assert wrong.status_code == 200 and wrong.json()["text"].startswith("That did not work")
    form["text"] = f"link {code(ann)}"
    linked = env.post(urlencode(form).encode(), content_type="application/x-www-form-urlencoded")
    assert linked.json() == {"response_type": "ephemeral", "text": "Linked to ann@example.com."}
    # in a DM: `link CODE` links, and the next question acts as the linked user
    dm = message_event(
        f"link {code(bob)}", "1700001101.000100", channel="D2", channel_type="im", user="U2"
    )
    env.event(dm, "EvLink")
    env.settled(1)
    (reply,) = env.fake.replies("D2", "1700001101.000100")
    assert reply["text"] == "Linked to bob@example.com. Ask me anything."
    env.event(
        message_event("vacation?", "1700001102.000100", channel="D2", channel_type="im", user="U2"),
        "EvLink2",
    )
    rows = env.settled(2)
    assert rows[1].act_as == "user:T1:U2"


def test_a_final_message_refused_as_too_long_lands_cut(slack_env: SlackFactory) -> None:
    env = slack_env()
    env.fake.fail("chat.update", error="msg_too_long", when=lambda params: "blocks" in params)
    ts = "1700001201.000100"
    env.event(mention("vacation?", ts), "EvLong")
    (row,) = env.settled(1)
    assert row.state == "posted"
    (reply,) = env.fake.replies("C1", ts)
    assert "Twenty-five days" in reply["text"]
    assert reply["blocks"][0]["text"]["text"].endswith("_(answer cut)_")
    refused = [c for c in env.fake.calls if c.answer.get("error") == "msg_too_long"]
    assert len(refused) == 1


def test_a_worker_killed_on_the_last_attempt_ends_the_thread_with_one_visible_error(
    slack_env: SlackFactory,
) -> None:
    def hangs(messages: list[ChatMessage], tools: list[ToolSpec]) -> Iterable[Step]:
        return [*pieces("Twenty-five", pause=0.05), 3.0, *pieces(" days.")]

    env = slack_env(hangs, jobs_in_server=False)
    ts = "1700001201.000100"
    kill_on_last_attempt(
        env.runtime,
        "slack",
        lambda: env.event(mention("How many vacation days?", ts), "EvLast"),
        lambda: any("Twenty" in c.params.get("text", "") for c in env.fake.of("chat.update")),
    )
    (row,) = env.settled(1, timeout_s=40)
    assert row.state == "failed"
    hook_ran_once(env.runtime)
    (reply,) = env.fake.replies("C1", ts)  # the partial answer, edited into the error
    assert reply["ts"] == row.reply_key
    assert reply["text"].startswith("Sorry, I could not answer this")
    assert "lease expired" in reply["text"]
    assert len(env.fake.of("chat.postMessage")) == 1
    assert len([c for c in env.fake.of("chat.update") if "Sorry" in c.params["text"]]) == 1
    # the 👀 the dead attempt added is cleared
    assert len(env.fake.of("reactions.add")) == len(env.fake.of("reactions.remove")) == 1
