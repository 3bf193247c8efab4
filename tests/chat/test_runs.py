"""Resumable runs through the HTTP API: reconnect with Last-Event-ID, stop, owner checks, and a
second API process on the same database that follows and stops a run the first one writes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from search2o.api.app import create_app
from search2o.config import Settings
from tests.api.test_api import add_user, serve
from tests.api.test_chat_api import Frame, chat_api, frames, of
from tests.conftest import MemoEmbedder, free_port
from tests.ops.processes import stop
from tests.query.doubles import ScriptedChatModel, answering, open_runtime

WORDS = " ".join(f"word{i}" for i in range(40))


def stream(client: httpx.Client, method: str, path: str, **kwargs: object) -> Iterator[Frame]:
    with client.stream(method, path, **kwargs) as response:  # type: ignore[arg-type]
        assert response.status_code == 200, response.read()
        yield from (f for f in frames(response) if f.kind != ":")


def first_frames(client: httpx.Client, headers: dict[str, str], deltas: int) -> list[Frame]:
    """POST a message and leave after ``deltas`` delta events (the connection is cut)."""
    received: list[Frame] = []
    for frame in stream(client, "POST", "/v1/chat", json={"message": "Talk"}, headers=headers):
        received.append(frame)
        if len(of(received, "delta")) == deltas:
            break
    return received


def stored_answer(client: httpx.Client, conversation: str, headers: dict[str, str]) -> dict:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        messages = client.get(f"/v1/conversations/{conversation}", headers=headers).json()
        if len(messages["messages"]) == 2:
            return messages["messages"][1]
        time.sleep(0.05)
    raise AssertionError("the answer was not stored")


def check_resume(writer: httpx.Client, reader: httpx.Client, headers: dict[str, str]) -> None:
    before = first_frames(writer, headers, 3)
    run_id = before[0].data["run_id"]
    last_id = before[-1].id
    assert [f.id for f in before] == list(range(1, len(before) + 1))
    after = list(
        stream(
            reader,
            "GET",
            f"/v1/runs/{run_id}/events",
            headers={**headers, "Last-Event-ID": str(last_id)},
        )
    )
    ids = [f.id for f in after]
    assert ids == list(range(last_id + 1, last_id + 1 + len(after)))  # each once, in order
    assert after[-1].kind == "done"
    text = "".join(d["text"] for d in of(before, "delta") + of(after, "delta"))
    assert text == WORDS == after[-1].data["text"]
    answer = stored_answer(writer, before[0].data["conversation_id"], headers)
    assert answer["text"] == text and answer["status"] == "complete"
    # A reconnect after the end replays the rest again, and ?after= does the same.
    again = list(
        stream(reader, "GET", f"/v1/runs/{run_id}/events?after={last_id}", headers=headers)
    )
    assert [f.id for f in again] == ids


@pytest.fixture
def two_users(settings: Settings, embedder: MemoEmbedder) -> Iterator[tuple]:
    model = ScriptedChatModel(answering(WORDS, pause=0.02))
    with chat_api(settings, embedder, model, auth_mode="token") as (rt, client):
        ann = add_user(rt, "ann@example.com")
        bob = add_user(rt, "bob@example.com")
        yield rt, client, ann, bob, model


def test_a_cut_connection_resumes_with_every_remaining_event_once(two_users: tuple) -> None:
    _, client, ann, _, _ = two_users
    check_resume(client, client, ann)


def test_another_user_gets_404_for_a_run_on_every_endpoint(two_users: tuple) -> None:
    _, client, ann, bob, _ = two_users
    run_id = first_frames(client, ann, 1)[0].data["run_id"]
    for method, path in (
        ("GET", f"/v1/runs/{run_id}"),
        ("GET", f"/v1/runs/{run_id}/events"),
        ("POST", f"/v1/runs/{run_id}/stop"),
    ):
        foreign = client.request(method, path, headers=bob)
        missing = client.request(method, path.replace(run_id, "0" * 32), headers=bob)
        assert foreign.status_code == missing.status_code == 404, foreign.text
        assert (
            foreign.json()["detail"]["message"].replace(run_id, "0" * 32)
            == (missing.json()["detail"]["message"])
        )
    assert client.get(f"/v1/runs/{run_id}", headers=ann).status_code == 200
    for value in ("x1", "9" * 23, "1" * 300):  # not a number; too large; far too long
        bad = client.get(f"/v1/runs/{run_id}/events", headers={**ann, "Last-Event-ID": value})
        assert bad.status_code == 422 and bad.json()["detail"]["field"] == "Last-Event-ID"


def test_a_stop_interrupts_the_answer_and_keeps_what_was_written(
    settings: Settings, embedder: MemoEmbedder
) -> None:
    words = " ".join(f"word{i}" for i in range(400))
    model = ScriptedChatModel(answering(words, pause=0.03))
    with chat_api(settings, embedder, model) as (_, client):
        received: list[Frame] = []
        for frame in stream(client, "POST", "/v1/chat", json={"message": "Talk"}):
            received.append(frame)
            if len(of(received, "delta")) == 3:
                run_id = received[0].data["run_id"]
                stopped = client.post(f"/v1/runs/{run_id}/stop")
                assert stopped.status_code == 200 and stopped.json()["stop_requested"]
        done = received[-1]
        assert done.kind == "done" and done.data["status"] == "interrupted"
        answer = stored_answer(client, received[0].data["conversation_id"], {})
        assert answer["status"] == "interrupted"
        assert (
            answer["text"] == done.data["text"] == "".join(d["text"] for d in of(received, "delta"))
        )
        assert model.yielded < 400
        status = client.get(f"/v1/runs/{run_id}").json()
        assert status["status"] == "interrupted"


def test_a_second_app_on_the_same_database_follows_and_stops(
    settings: Settings, embedder: MemoEmbedder
) -> None:
    """Two runtimes (no memory shared): the reader only has the database."""
    model = ScriptedChatModel(answering(WORDS, pause=0.02))
    with (
        chat_api(settings, embedder, model, auth_mode="token") as (rt, writer),
        open_runtime(settings, embedder, auth_mode="token") as other,
        serve(create_app(other.settings, runtime=other)) as reader,
    ):
        ann = add_user(rt, "ann@example.com")
        check_resume(writer, reader, ann)


@pytest.fixture
def second_process(settings: Settings) -> Iterator[httpx.Client]:
    """``search2o serve`` in its own OS process on the same data folder and database."""
    if not settings.resolved_database_url.startswith("postgresql"):
        pytest.skip("one process is enough on SQLite (the embedded default)")
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SEARCH2O_")},
        "SEARCH2O_DATA_DIR": str(settings.data_dir),
        "SEARCH2O_DATABASE_URL": settings.resolved_database_url,
        "SEARCH2O_AUTH_MODE": "token",
        "HF_HUB_OFFLINE": "1",
    }
    command = [str(Path(sys.executable).parent / "search2o"), "serve", "--port", str(port)]
    log = settings.data_dir / "second-process.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(command, env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            deadline = time.monotonic() + 120
            while True:
                try:
                    if client.get("/v1/health").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert proc.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, "the second process did not start"
                time.sleep(0.2)
            yield client
    finally:
        stop(proc, timeout_s=30)


@pytest.mark.slow
def test_a_second_api_process_follows_and_stops_a_run(
    settings: Settings, embedder: MemoEmbedder, second_process: httpx.Client
) -> None:
    model = ScriptedChatModel(answering(WORDS, pause=0.02))
    with chat_api(settings, embedder, model, auth_mode="token") as (rt, writer):
        ann = add_user(rt, "ann@example.com")
        check_resume(writer, second_process, ann)
        model.script = answering(" ".join(f"w{i}" for i in range(1000)), pause=0.02)
        before = first_frames(writer, ann, 2)
        run_id = before[0].data["run_id"]
        assert second_process.post(f"/v1/runs/{run_id}/stop", headers=ann).status_code == 200
        rest = list(stream(second_process, "GET", f"/v1/runs/{run_id}/events", headers=ann))
        assert rest[-1].kind == "done" and rest[-1].data["status"] == "interrupted"
        answer = stored_answer(writer, before[0].data["conversation_id"], ann)
        assert answer["status"] == "interrupted" and answer["text"] == rest[-1].data["text"]
