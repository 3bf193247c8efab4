"""No terminal control character from stored content reaches the terminal.

Document text and titles, upload and file names, user emails, token names, memories, agent
descriptions and conversation titles are untrusted: a stored ``ESC [2J`` must not clear the
operator's screen, ``ESC ]0;...BEL`` must not retitle their window, C1 ``CSI`` (U+009B) must
not start a sequence on terminals that read 8-bit controls (ECMA-48). Every printer of the
CLI goes through one sanitiser; this test feeds hostile content through every command that
shows stored content, in tables and in JSON.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from search2o.knowledge.access import AccessList
from search2o.runtime import Runtime
from search2o.storage.models import ApiToken, User
from tests.agents.registry_samples import travel
from tests.test_cli import Cli, error_line

CLEAR = "\x1b[2J"
TITLE = "\x1b]0;pwned\x07"
CSI = "\x9b31m"
HOSTILE = f"{CLEAR}{TITLE}{CSI}\x08\r"
# C0 controls but tab and newline, DEL, C1: what the sanitiser must never let through.
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
CLI_SOURCES = Path(__file__).resolve().parents[1] / "src" / "search2o" / "cli"


def _seed(runtime: Runtime, tmp_path: Path) -> tuple[int, str]:
    """Store hostile content of every kind; return a document id and a conversation id."""
    folder = tmp_path / "hostile"
    folder.mkdir()
    (folder / f"pay{CLEAR}{CSI}.md").write_text(
        f"# Salary {HOSTILE} bands\n\nSalary bands {HOSTILE} are reviewed every March.\n"
    )
    runtime.knowledge.ingest_paths([folder], AccessList())
    upload = f"# Upload {HOSTILE}\n\nThe parking garage {HOSTILE} opens at six.\n".encode()
    name = f"park{TITLE}.md"
    runtime.knowledge.ingest_bytes(f"upload:{name}", name, upload, AccessList())
    with runtime.database.session() as session:
        # Users and tokens stored before names were checked, or written by another tool.
        evil = User(
            email=f"eve{CLEAR}@example.com",
            display_name=f"Eve {TITLE}",
            groups=[],
            plan="free",
            is_admin=False,
        )
        session.add(evil)
        session.flush()
        hostile_token = ApiToken(
            user_id=evil.id, name=f"ci {CSI}", prefix="s2o_hostile0", token_hash="f" * 64
        )
        session.add(hostile_token)
    local = runtime.local_principal()
    runtime.memory.store(local, "travel", {"preferred_airline": f"Flies {HOSTILE} Lufthansa"})
    runtime.agents.put(travel(description=f"Travel {HOSTILE} helper"), admin=local)
    events = list(runtime.turns.run_sync(runtime.turns.prepare(local, f"When {HOSTILE} salary?")))
    conversation = next(e.data["conversation_id"] for e in events if e.kind == "conversation")
    return min(d.id for d in runtime.knowledge.list_documents(local)), conversation


@pytest.mark.slow
@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_no_stored_control_character_reaches_the_terminal(
    cli: Cli, same_runtime: Runtime, tmp_path: Path
) -> None:
    document_id, conversation = _seed(same_runtime, tmp_path)
    commands: list[tuple[tuple[str, ...], str | None]] = [
        (("search", "salary bands"), None),
        (("search", "salary bands", "--json"), None),
        (("documents", "list"), None),
        (("documents", "list", "--json"), None),
        (("users", "list"), None),
        (("users", "list", "--json"), None),
        (("tokens", "list"), None),
        (("tokens", "list", "--json"), None),
        (("memory", "list"), None),
        (("memory", "list", "--json"), None),
        (("memory", "search", "which airline"), None),
        (("memory", "search", "which airline", "--json"), None),
        (("agents", "list"), None),
        (("agents", "list", "--json"), None),
        (("agents", "show", "travel"), None),
        (("ask", "when are salary bands reviewed?"), None),
        (("ask", "when are salary bands reviewed?", "--json"), None),
        (("chat",), f"/list\n/open {conversation}\n"),
        (("chat", "--new"), f"where does the parking garage open?\n/open {conversation}\n"),
        (("documents", "delete", str(document_id)), None),
    ]
    shown = []
    for args, given in commands:
        result = cli.ok(*args, input=given)
        for stream in (result.stdout, result.stderr):
            found = sorted(set(RAW_CONTROL.findall(stream)))
            assert not found, (args, found, stream)
        shown.append(result.stdout)
    # The content itself is shown, with the controls made visible as U+FFFD.
    everything = "\n".join(shown)
    for visible in ("Salary", "bands", "eve", "Eve", "ci ", "Lufthansa", "Travel", "park"):
        assert visible in everything, visible
    assert "\ufffd" in everything
    # JSON keeps the text exactly (escaped), so scripts read what was stored.
    users = json.loads(shown[5])
    assert f"eve{CLEAR}@example.com" in [u["email"] for u in users]
    memories = json.loads(shown[9])
    assert [m["text"] for m in memories] == [f"Flies {HOSTILE} Lufthansa"]


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_an_error_naming_hostile_input_is_printed_inert(cli: Cli, tmp_path: Path) -> None:
    line = error_line(cli("ingest", str(tmp_path / f"gone{CLEAR}{CSI}")), 2)
    assert not RAW_CONTROL.search(line) and "gone" in line


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("users", "add", f"eve{CLEAR}@example.com"), "email"),
        (("users", "add", f"eve@exa{CSI}mple.com"), "email"),
        (("users", "add", "eve@example.com", "--group", f"hr{CLEAR}"), "group"),
        (("users", "add", "eve@example.com", "--name", f"Eve {TITLE}"), "name"),
    ],
)
def test_users_add_refuses_control_characters(cli: Cli, args: tuple[str, ...], field: str) -> None:
    line = error_line(cli(*args), 2)
    assert line.startswith(f"error: {field}: ") and not RAW_CONTROL.search(line)
    assert json.loads(cli.ok("users", "list", "--json").stdout) == []


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_tokens_issue_refuses_control_characters_in_the_name(cli: Cli) -> None:
    cli.ok("users", "add", "ann@example.com")
    line = error_line(cli("tokens", "issue", "ann@example.com", "--name", f"ci{CLEAR}"), 2)
    assert line.startswith("error: name: ")
    assert len(json.loads(cli.ok("tokens", "list", "--json").stdout)) == 1


def test_cli_modules_print_only_through_the_sanitising_helpers() -> None:
    """Nothing in ``search2o.cli`` writes to the terminal but through ``cli/common.py``."""
    raw_writers = {
        ("typer", "echo"),
        ("typer", "secho"),
        ("typer", "confirm"),
        ("typer", "prompt"),
        ("click", "echo"),
        ("click", "secho"),
        ("sys", "stdout"),
        ("sys", "stderr"),
        ("rich", "print"),
    }
    found = []
    for path in sorted(CLI_SOURCES.glob("*.py")):
        if path.name == "common.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                if (node.value.id, node.attr) in raw_writers:
                    found.append(f"{path.name}:{node.lineno} {node.value.id}.{node.attr}")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if node.func.id in ("print", "Console", "input"):
                    found.append(f"{path.name}:{node.lineno} {node.func.id}()")
            elif isinstance(node, ast.ImportFrom) and node.module in ("rich.console", "sys"):
                found.append(f"{path.name}:{node.lineno} from {node.module} import ...")
    assert found == []


def test_the_shared_consoles_sanitise_whatever_they_are_given() -> None:
    from rich.table import Table
    from rich.text import Text

    from search2o.cli.common import console

    table = Table("name")
    table.add_row(f"a{CLEAR}b")
    table.add_row(Text(f"c{TITLE}d"))
    with console.capture() as captured:
        console.print(f"x{CSI}y", Text(f"z{HOSTILE}"), table)
    assert not RAW_CONTROL.search(captured.get())
    assert "x\ufffd" in captured.get()


def test_plain_text_log_lines_are_inert() -> None:
    import logging

    from search2o.logs import JsonFormatter, TextFormatter

    try:
        raise ValueError(f"bad {TITLE}")
    except ValueError as exc:
        record = logging.LogRecord(
            "search2o",
            logging.WARNING,
            __file__,
            1,
            "skipped %s",
            (f"x{CLEAR}.md",),
            (type(exc), exc, exc.__traceback__),
        )
    for line in (TextFormatter().format(record), JsonFormatter().format(record)):
        assert not RAW_CONTROL.search(line), line
        assert "skipped x" in line and "bad " in line
