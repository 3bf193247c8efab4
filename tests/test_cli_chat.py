"""``search2o chat``, ``ask`` and ``serve --ingest``: as a user in a terminal would use them."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from search2o.providers.builtin_chat import NOT_FOUND
from tests.conftest import HANDBOOK, free_port
from tests.ops.processes import stop
from tests.test_cli import GOOD_MD, SCRIPT, Cli, error_line, out


@pytest.fixture
def parking(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "parking.md").write_text(GOOD_MD)
    return folder


@pytest.fixture
def cli(tmp_path: Path, parking: Path) -> Cli:
    runner = Cli(tmp_path / "data", None)
    runner.ok("ingest", str(parking))
    return runner


@pytest.mark.slow
def test_handbook_conversation_in_the_terminal(tmp_path: Path) -> None:
    """The issue's walk-through: answer, elliptical follow-up, thanks, and not found."""
    cli = Cli(tmp_path / "data", None)
    cli.ok("ingest", str(HANDBOOK))
    lines = [
        "How many vacation days do we get each year?",
        "and how many of them can roll over?",
        "thanks!",
        "What is the company's policy on bringing dogs to the office in Tokyo?",
    ]
    text = out(cli.ok("chat", input="\n".join(lines) + "\n"))
    turns = re.split(r"(?m)^> ", text)[1:]
    assert len(turns) == 5  # four answers, then the prompt that met the end of input
    first, follow_up, thanks, unknown = turns[:4]
    assert "search_knowledge: How many vacation days do we get each year?" in first
    assert "20 days of vacation" in first
    assert re.search(r"\[1\] Benefits & Perks — \S+benefits-and-perks\.md", first)
    assert "search_knowledge: how many of them can roll over? vacation days" in follow_up
    assert "27 days" in follow_up and "benefits-and-perks.md" in follow_up
    assert "search_knowledge" not in thanks and "[1]" not in thanks
    assert "You're welcome!" in thanks
    assert NOT_FOUND in unknown and "[1]" not in unknown


def test_ask_starts_and_continues_a_conversation(cli: Cli) -> None:
    first = out(cli.ok("ask", "where can I leave my bicycle?"))
    assert "Bicycles are parked in the basement garage next to the lockers. [1]" in first
    assert "[1] Parking — " in first
    conversation = re.search(r"conversation ([0-9a-f]{32})", first)
    assert conversation is not None
    again = out(cli.ok("ask", "thanks!", "--conversation", conversation.group(1)))
    assert "You're welcome!" in again and conversation.group(1) in again
    listed = out(cli.ok("chat", input="/list\n"))
    assert listed.count("where can I leave my bicycle?") == 2  # the greeting line and /list


def test_ask_json_prints_every_event(cli: Cli) -> None:
    events = json.loads(out(cli.ok("ask", "where can I leave my bicycle?", "--json")))
    kinds = [e["event"] for e in events]
    assert kinds[0] == "conversation" and kinds[1] == "tool_call" and kinds[-1] == "done"
    assert "citation" in kinds and "delta" in kinds
    done = events[-1]["data"]
    assert done["searched"] is True
    assert [c["title"] for c in done["citations"]] == ["Parking"]


def test_ask_json_is_valid_json_at_any_terminal_width(cli: Cli) -> None:
    cli.env["COLUMNS"] = "30"
    events = json.loads(out(cli.ok("ask", "where can I leave my bicycle?", "--json")))
    assert events[-1]["event"] == "done"


def test_ask_refuses_bad_input_with_one_line(cli: Cli) -> None:
    assert error_line(cli("ask", "   "), 2) == "error: message: must not be empty"
    missing = error_line(cli("ask", "hello?", "--conversation", "0" * 32), 1)
    assert missing == f"error: conversation '{'0' * 32}' not found"
    listed = out(cli.ok("chat", input="/list\n"))
    assert "no conversations yet" in listed  # nothing was created by the refused requests


def test_chat_commands_and_continuation_across_invocations(cli: Cli) -> None:
    session = "\n".join(
        [
            "/rate up",
            "where can I leave my bicycle?",
            "/rate up",
            "/rate sideways",
            "/open nope",
            "/help",
            "/quit",
        ]
    )
    result = cli.ok("chat", input=session + "\n")
    text = out(result)
    errors = result.stderr
    assert "new conversation" in text
    assert "error: rating: no answer to rate yet in this session" in errors
    assert "rated up" in text
    assert "error: rating: use /rate up, /rate down or /rate clear" in errors
    assert "error: conversation 'nope' not found" in errors
    assert "/new (start a new conversation)" in text
    # The next invocation continues the last conversation; /new leaves it.
    again = out(cli.ok("chat", input="/new\nthanks!\n"))
    assert again.startswith("continuing: where can I leave my bicycle?")
    assert "You're welcome!" in again
    third = out(cli.ok("chat", input="/list\n"))
    assert third.startswith("continuing: thanks!")
    ids = re.findall(r"([0-9a-f]{32})", third)
    assert len(ids) == 2
    opened = out(cli.ok("chat", input=f"/open {ids[1]}\n"))
    assert "opened: where can I leave my bicycle?" in opened
    assert "assistant: Bicycles are parked" in opened


def _serve_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEARCH2O_")}
    env.update(SEARCH2O_DATA_DIR=str(tmp_path / "data"), HF_HUB_OFFLINE="1", NO_COLOR="1")
    env.update(extra)
    return env


def _start(env: dict[str, str], *args: str) -> tuple[subprocess.Popen[str], list[str]]:
    """Start ``search2o serve ARGS`` and return the process and its first two lines."""
    proc = subprocess.Popen(
        [str(SCRIPT), "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    return proc, [proc.stdout.readline(), proc.stdout.readline()]


def _stop(proc: subprocess.Popen[str]) -> None:
    stop(proc, timeout_s=30)
    if proc.stdout is not None:
        proc.stdout.close()


def _wait_for(port: int, token: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    deadline = time.monotonic() + 60
    while True:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/v1/conversations", headers=headers)
        except httpx.ConnectError:
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.2)


@pytest.mark.slow
def test_token_mode_revokes_the_token_a_local_mode_start_printed(tmp_path: Path) -> None:
    port = free_port()
    proc, lines = _start(_serve_env(tmp_path), "--port", str(port))
    try:
        token = re.search(r"(s2o_\S+)", lines[1])
        assert token is not None
        assert _wait_for(port, token.group(1)).status_code == 200
    finally:
        _stop(proc)
    proc, lines = _start(_serve_env(tmp_path, SEARCH2O_AUTH_MODE="token"), "--port", str(port))
    try:
        assert lines[1].startswith("token mode: every request needs")
        assert lines[1].rstrip().endswith("1 local-mode serve token(s) revoked")
        assert _wait_for(port, token.group(1)).status_code == 401
    finally:
        _stop(proc)


@pytest.mark.slow
def test_token_mode_on_a_fresh_database_makes_no_local_admin(tmp_path: Path) -> None:
    """A tokenless local admin would count as an admin: the real last admin could be removed."""
    port = free_port()
    proc, lines = _start(_serve_env(tmp_path, SEARCH2O_AUTH_MODE="token"), "--port", str(port))
    try:
        assert lines[1].rstrip().endswith("(search2o users add EMAIL prints one)"), lines[1]
    finally:
        _stop(proc)
    listed = subprocess.run(
        [str(SCRIPT), "users", "list", "--json"],
        capture_output=True,
        text=True,
        env=_serve_env(tmp_path, SEARCH2O_AUTH_MODE="token"),
        check=True,
    )
    assert json.loads(listed.stdout) == []


def test_serve_refuses_a_busy_port_before_printing_a_url(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run(
            [str(SCRIPT), "serve", "--port", str(port)],
            capture_output=True,
            text=True,
            env=_serve_env(tmp_path),
            timeout=60,
            check=False,
        )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith(f"error: port: cannot listen on 127.0.0.1:{port}: ")


@pytest.mark.slow
def test_serve_ingests_prints_url_and_token_and_answers(tmp_path: Path, parking: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEARCH2O_")}
    env.update(SEARCH2O_DATA_DIR=str(tmp_path / "data"), HF_HUB_OFFLINE="1", NO_COLOR="1")
    port = free_port()
    proc = subprocess.Popen(
        [str(SCRIPT), "serve", "--ingest", str(parking), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        printed = [proc.stdout.readline() for _ in range(3)]
        assert printed[0].startswith("1 files: 1 added")
        assert printed[1].strip() == f"search2o at http://localhost:{port}  (API docs: /docs)"
        token = re.search(r"(s2o_\S+)", printed[2])
        assert token is not None and "no token needed" in printed[2]
        deadline = time.monotonic() + 60
        while True:
            try:
                response = httpx.post(
                    f"http://127.0.0.1:{port}/v1/chat",
                    json={"message": "where can I leave my bicycle?", "stream": False},
                    headers={"Authorization": f"Bearer {token.group(1)}"},
                    timeout=60,
                )
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.2)
        assert response.status_code == 200, response.text
        assert response.json()["text"].endswith("[1]")
    finally:
        stop(proc, timeout_s=30)
        if proc.stdout is not None:
            proc.stdout.close()
    missing = subprocess.run(
        [str(SCRIPT), "serve", "--ingest", str(tmp_path / "nowhere")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert missing.returncode == 2
    assert missing.stderr.splitlines() == [f"error: ingest: {tmp_path / 'nowhere'} does not exist"]


def test_terminal_control_characters_never_reach_the_terminal() -> None:
    from search2o.cli.common import printable

    assert printable("a\x1b[2Jb\x07c\x9bd\n\te") == "a\ufffd[2Jb\ufffdc\ufffdd\n\te"
