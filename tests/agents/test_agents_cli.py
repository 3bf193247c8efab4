"""``search2o agents push|list|show|delete`` end to end, on both backends."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from search2o.runtime import Runtime
from tests.agents.registry_samples import (
    BROKEN,
    BROKEN_PATHS,
    TRAVEL,
    TRAVEL_YAML,
    add_user,
    travel,
)
from tests.test_cli import Cli, error_line, out

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _write(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_push_list_show_and_delete(cli: Cli, tmp_path: Path) -> None:
    assert "no agents" in out(cli.ok("agents", "list"))
    assert json.loads(cli.ok("agents", "list", "--json").stdout) == []

    pushed = out(cli.ok("agents", "push", _write(tmp_path, "travel.json", json.dumps(TRAVEL))))
    assert pushed.splitlines() == [
        "created agent travel",
        "memory labels: last_question",
        "functions: main",
    ]
    yaml_file = _write(
        tmp_path, "kitchen.yml", TRAVEL_YAML.replace("name: travel", "name: kitchen")
    )
    assert out(cli.ok("agents", "push", yaml_file)).startswith("created agent kitchen\n")
    replaced = cli.ok(
        "agents",
        "push",
        _write(tmp_path, "travel.txt", json.dumps(travel(description="Airlines and seats"))),
        "--json",
    )
    assert json.loads(replaced.stdout) == {
        "name": "travel",
        "description": "Airlines and seats",
        "created": False,
        "memory_labels": ["last_question"],
        "functions": ["main"],
    }

    listed = json.loads(cli.ok("agents", "list", "--json").stdout)
    assert [(a["name"], a["description"]) for a in listed] == [
        ("kitchen", "Se souvient de la compagnie aérienne que vous préférez"),
        ("travel", "Airlines and seats"),
    ]
    assert listed[0]["updated_at"].endswith("+00:00")
    table = out(cli.ok("agents", "list"))
    assert "kitchen" in table and "Airlines and seats" in table

    shown = json.loads(cli.ok("agents", "show", "travel").stdout)
    assert shown == travel(description="Airlines and seats")
    assert list(shown["functions"]["main"]) == list(TRAVEL["functions"]["main"])

    kept = cli("agents", "delete", "travel", input="n\n")
    assert kept.exit_code == 1 and "every memory it stored" in kept.stdout
    assert len(json.loads(cli.ok("agents", "list", "--json").stdout)) == 2
    assert out(cli.ok("agents", "delete", "travel", "--yes")).strip() == (
        "deleted agent travel and 0 memories"
    )
    assert "agent 'travel' not found" in error_line(cli("agents", "delete", "travel", "--yes"), 1)
    assert "agent 'travel' not found" in error_line(cli("agents", "show", "travel"), 1)
    assert [a["name"] for a in json.loads(cli.ok("agents", "list", "--json").stdout)] == ["kitchen"]


def test_a_bad_file_prints_every_problem_exits_2_and_changes_nothing(
    cli: Cli, tmp_path: Path
) -> None:
    cli.ok("agents", "push", _write(tmp_path, "travel.json", json.dumps(TRAVEL)))

    result = cli("agents", "push", _write(tmp_path, "broken.json", json.dumps(BROKEN)))
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = [line for line in _ANSI.sub("", result.stderr).splitlines() if line.strip()]
    assert lines[0] == f"error: {tmp_path / 'broken.json'}: 3 problems:"
    assert [line.split(": ", 1)[0] for line in lines[1:]] == BROKEN_PATHS
    assert "$.functions.main.llm.profile: unknown model profile 'gpt9'" in lines[2]
    assert result.stdout == ""

    malformed = cli("agents", "push", _write(tmp_path, "bad.yaml", "name: [travel\n"))
    assert malformed.exit_code == 2
    assert "$: is not valid YAML" in malformed.stderr

    truncated = cli("agents", "push", _write(tmp_path, "trip.json", "{"), "--json")
    assert truncated.exit_code == 2 and "$: is not valid JSON" in truncated.stderr
    assert cli("agents", "push", str(tmp_path / "missing.json")).exit_code == 2

    assert json.loads(cli.ok("agents", "show", "travel").stdout) == TRAVEL
    assert [a["name"] for a in json.loads(cli.ok("agents", "list", "--json").stdout)] == ["travel"]


@pytest.mark.slow
def test_delete_reports_the_memories_it_deleted(
    cli: Cli, same_runtime: Runtime, tmp_path: Path
) -> None:
    cli.ok("agents", "push", _write(tmp_path, "travel.json", json.dumps(TRAVEL)))
    ann, _ = add_user(same_runtime, "ann@example.com")
    local = same_runtime.local_principal()
    same_runtime.memory.store(ann, "travel", {"preferred_airline": "Ann flies KLM"})
    same_runtime.memory.store(local, "travel", {"preferred_airline": "I fly SAS", "seat": "aisle"})
    same_runtime.memory.store(ann, "kitchen", {"coffee": "Ann drinks it black"})

    deleted = cli.ok("agents", "delete", "travel", input="y\n")
    assert "deleted agent travel and 3 memories" in out(deleted)
    assert [(m.agent, m.label) for m in same_runtime.memory.list(ann)] == [("kitchen", "coffee")]
    assert same_runtime.memory.count(local) == 0


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "agents"


@pytest.mark.slow
def test_search2o_chat_answers_the_question_an_agent_run_asked(cli: Cli) -> None:
    """`agents run` asks; `search2o chat`, continuing that conversation, answers it."""
    assert "created agent travel" in out(cli.ok("agents", "push", str(EXAMPLES / "travel.json")))
    asked = out(cli.ok("agents", "run", "travel", "Book me a flight"))
    assert "Which airline do you prefer to fly?" in asked
    conversation = re.search(r"--conversation ([0-9a-f]{32})", asked)
    assert conversation is not None
    chatted = out(cli.ok("chat", input="KLM\n"))
    assert "continuing: travel: Book me a flight" in chatted
    assert "Noted: you prefer to fly KLM" in chatted  # the agent's answer, not a chat turn
    shown = json.loads(cli.ok("agents", "run", "travel", "Book me a flight", "--json").stdout)
    assert shown["event"] == "done" and shown["status"] == "completed"
    assert "KLM" in shown["text"]  # a later conversation answers from the stored memory
