"""The ``search2o`` command: exit codes, one-line errors, output, on both backends."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from click.testing import Result
from sqlalchemy import text
from sqlalchemy.engine import make_url
from typer.testing import CliRunner

from search2o import accounts
from search2o.cli import app
from search2o.errors import AuthenticationError
from search2o.storage.db import Database

GOOD_MD = "# Parking\n\nBicycles are parked in the basement garage next to the lockers.\n"
BINARY = b"\x00\x01\x02\xff" * 50
SCRIPT = Path(sys.executable).parent / "search2o"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class Cli:
    """Runs the command in-process with its own data folder and database."""

    def __init__(self, data_dir: Path, database_url: str | None) -> None:
        self.database_url = database_url
        self.env: dict[str, str | None] = {
            "SEARCH2O_DATA_DIR": str(data_dir),
            "SEARCH2O_DATABASE_URL": database_url,
            "SEARCH2O_CONFIG": None,
            "SEARCH2O_AUTH_MODE": None,
            "SEARCH2O_LOG_LEVEL": None,
            "COLUMNS": "400",
            "NO_COLOR": "1",
        }
        self.runner = CliRunner()

    def __call__(self, *args: str, input: str | None = None) -> Result:
        return self.runner.invoke(
            app, list(args), env=self.env, catch_exceptions=False, input=input
        )

    def ok(self, *args: str, input: str | None = None) -> Result:
        result = self(*args, input=input)
        assert result.exit_code == 0, (result.stdout, result.stderr)
        return result

    def database(self) -> Database:
        assert self.database_url is not None
        return Database(self.database_url)


def out(result: Result) -> str:
    return _ANSI.sub("", result.stdout)


def error_line(result: Result, code: int) -> str:
    """Check the exit code and that stderr holds one ``error: ...`` line; return it.

    Blank lines are ignored here; the console-script tests check stderr byte for byte.
    """
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    lines = [line for line in _ANSI.sub("", result.stderr).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: "), lines
    return lines[0]


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    """A folder with one good Markdown file and one binary file named .txt."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.md").write_text(GOOD_MD)
    (folder / "binary.txt").write_bytes(BINARY)
    return folder


def users_json(cli: Cli) -> list[dict[str, object]]:
    return json.loads(cli.ok("users", "list", "--json").stdout)


# ---------------------------------------------------------------------------------------------
# help
# ---------------------------------------------------------------------------------------------


def test_help_lists_every_command(tmp_path: Path) -> None:
    result = Cli(tmp_path, None).ok("--help")
    listed = out(result)
    for command in ("ingest", "search", "documents", "users", "tokens", "db", "serve", "demo"):
        assert re.search(rf"\b{command}\b", listed), command


def _command_paths(command: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [prefix]
    if hasattr(command, "commands"):  # a group (Typer's own click)
        for name, sub in sorted(command.commands.items()):
            paths += _command_paths(sub, (*prefix, name))
    return paths


def test_no_help_cuts_a_word_at_80_columns(tmp_path: Path) -> None:
    # Rich cuts a word wider than its cell with "…"; environment variable names are in the
    # epilog, which spans the terminal, so each one is printed whole on one line.
    cli = Cli(tmp_path, None)
    cli.env["COLUMNS"] = "80"
    paths = _command_paths(typer.main.get_command(app))
    assert len(paths) > 40
    for path in paths:
        shown = out(cli.ok(*path, "--help"))
        assert "…" not in shown, (path, shown)
    root = out(cli.ok("--help"))
    serve = out(cli.ok("serve", "--help"))
    for name in ("SEARCH2O_DATA_DIR", "SEARCH2O_DATABASE_URL"):
        assert re.search(rf"\b{name}\b", root), name
    for name in ("SEARCH2O_SERVE__WORKERS", "SEARCH2O_INSECURE_LOCAL_MODE", "SEARCH2O_PORT"):
        assert re.search(rf"\b{name}\b", serve), name
    hook = out(cli.ok("state", "conformance", "--help"))
    assert re.search(r"\bSEARCH2O_STATE__HOOK_SECRET\b", hook)


def test_no_arguments_shows_help(tmp_path: Path) -> None:
    result = Cli(tmp_path, None)()
    assert result.exit_code == 2  # click's "missing command" code, with the usage shown
    assert "Usage" in _ANSI.sub("", result.output)


# ---------------------------------------------------------------------------------------------
# users and tokens
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_users_add_prints_a_token_stored_only_as_its_hash(cli: Cli) -> None:
    result = cli.ok("users", "add", "A@Example.com", "--group", "hr", "--admin")
    lines = out(result).strip().splitlines()
    assert lines[0] == "added a@example.com; API token (shown once):"
    token = lines[-1]
    assert token.startswith("s2o_") and len(token) > 40

    db = cli.database()
    try:
        with db.engine.connect() as conn:
            rows = conn.execute(text("SELECT * FROM api_tokens")).mappings().all()
        with db.session() as session:
            principal = accounts.authenticate(session, token)
    finally:
        db.close()
    assert len(rows) == 1
    assert all(token not in str(value) for value in rows[0].values())
    assert rows[0]["token_hash"] == hashlib.sha256(token.encode()).hexdigest()
    assert rows[0]["prefix"] == token[:12]
    assert (principal.email, principal.groups, principal.is_admin) == (
        "a@example.com",
        ("hr",),
        True,
    )

    assert users_json(cli) == [
        {"email": "a@example.com", "name": "a", "groups": ["hr"], "plan": "free", "admin": True}
    ]


@pytest.mark.slow
def test_users_add_refuses_bad_input_with_one_line(cli: Cli) -> None:
    cli.ok("users", "add", "a@example.com")
    duplicate = error_line(cli("users", "add", "A@example.com"), 1)
    assert "a@example.com already exists" in duplicate
    assert error_line(cli("users", "add", "not-an-email"), 2).startswith("error: email: ")
    assert error_line(cli("users", "add", "b@example.com", "--plan", "gold"), 2).startswith(
        "error: plan: "
    )
    assert error_line(cli("users", "add", "b@example.com", "-g", "h r"), 2).startswith(
        "error: group: "
    )
    assert [u["email"] for u in users_json(cli)] == ["a@example.com"]


@pytest.mark.slow
def test_users_set_changes_admin_groups_and_plan_and_guards_the_last_admin(cli: Cli) -> None:
    cli.ok("users", "add", "a@example.com", "--admin")
    token = out(cli.ok("users", "add", "b@example.com")).strip().splitlines()[-1]
    shown = out(cli.ok("users", "set", "B@example.com", "--admin", "--groups", "hr, eng,hr"))
    assert "b@example.com: groups hr, eng; plan free; admin yes" in shown
    shown = out(cli.ok("users", "set", "b@example.com", "-g", "eng", "--group", "ops"))
    assert "b@example.com: groups eng, ops; plan free; admin yes" in shown  # as `users add`
    cli.ok("users", "set", "b@example.com", "--plan", "paid", "--no-admin", "--groups", "")
    row = next(u for u in users_json(cli) if u["email"] == "b@example.com")
    assert (row["groups"], row["plan"], row["admin"]) == ([], "paid", False)
    last = error_line(cli("users", "set", "a@example.com", "--no-admin"), 1)
    assert "a@example.com is the last admin" in last
    for args, field in [
        ((), "options"),
        (("--plan", "gold"), "plan"),
        (("--groups", "h r"), "groups"),
        (("--group", "hr", "--groups", "eng"), "groups"),
    ]:
        line = error_line(cli("users", "set", "b@example.com", *args), 2)
        assert line.startswith(f"error: {field}: "), line
    assert "no user ghost@example.com" in error_line(
        cli("users", "set", "ghost@example.com", "--admin"), 2
    )
    assert error_line(cli("users", "set", "ghost", "--admin"), 2).startswith("error: email: ")
    row = next(u for u in users_json(cli) if u["email"] == "b@example.com")
    assert (row["groups"], row["plan"], row["admin"]) == ([], "paid", False)  # nothing changed
    db = cli.database()
    try:
        with db.session() as session:
            assert accounts.authenticate(session, token).plan == "paid"
    finally:
        db.close()


@pytest.mark.slow
def test_users_remove_asks_first_and_removes_the_user_with_their_tokens(cli: Cli) -> None:
    cli.ok("users", "add", "a@example.com", "--admin")
    token = out(cli.ok("users", "add", "b@example.com")).strip().splitlines()[-1]
    kept = cli("users", "remove", "b@example.com", input="n\n")
    assert kept.exit_code == 1
    assert [u["email"] for u in users_json(cli)] == ["a@example.com", "b@example.com"]
    assert "removed b@example.com" in out(cli.ok("users", "remove", "b@example.com", input="y\n"))
    assert [u["email"] for u in users_json(cli)] == ["a@example.com"]
    db = cli.database()
    try:
        with db.session() as session, pytest.raises(AuthenticationError):
            accounts.authenticate(session, token)
    finally:
        db.close()
    assert "no user b@example.com" in error_line(cli("users", "remove", "b@example.com"), 2)
    assert "last admin" in error_line(cli("users", "remove", "a@example.com", "--yes"), 1)
    assert [u["email"] for u in users_json(cli)] == ["a@example.com"]


@pytest.mark.slow
def test_users_list_table(cli: Cli) -> None:
    cli.ok(
        "users", "add", "b@example.com", "-g", "eng", "-g", "ops", "--plan", "paid", "--name", "Bea"
    )
    cli.ok("users", "add", "a@example.com")
    table = out(cli.ok("users", "list"))
    assert table.index("a@example.com") < table.index("b@example.com")
    assert "eng, ops" in table and "paid" in table and "Bea" in table


@pytest.mark.slow
def test_tokens_list_and_revoke(cli: Cli) -> None:
    first = out(cli.ok("users", "add", "a@example.com")).strip().splitlines()[-1]
    second = out(cli.ok("tokens", "issue", "a@example.com", "--name", "ci")).strip()
    assert second.startswith("s2o_") and second != first

    listed = out(cli.ok("tokens", "list"))
    assert first[:12] in listed and second[:12] in listed
    assert first not in listed and second not in listed
    assert listed.count("active") == 2 and "revoked" not in listed

    revoked = out(cli.ok("tokens", "revoke", second[:12]))
    assert revoked.strip() == f"revoked {second[:12]} of a@example.com"
    after = [line for line in out(cli.ok("tokens", "list")).splitlines() if "a@example.com" in line]
    assert len(after) == 2
    assert any(second[:12] in line and "revoked" in line for line in after)
    assert any(first[:12] in line and "active" in line for line in after)

    db = cli.database()
    try:
        with pytest.raises(AuthenticationError), db.session() as session:
            accounts.authenticate(session, second)
        with db.session() as session:
            assert accounts.authenticate(session, first).email == "a@example.com"
    finally:
        db.close()

    assert "no active token" in error_line(cli("tokens", "revoke", second[:12]), 1)
    cli.ok("tokens", "revoke", first)  # the whole token works too
    db = cli.database()
    try:
        with pytest.raises(AuthenticationError), db.session() as session:
            accounts.authenticate(session, first)
    finally:
        db.close()
    assert "no user ghost@example.com" in error_line(cli("tokens", "issue", "ghost@example.com"), 1)
    assert error_line(cli("tokens", "issue", "ghost"), 2).startswith("error: email: ")


# ---------------------------------------------------------------------------------------------
# knowledge
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_ingest_reports_skipped_files_and_a_summary(cli: Cli, docs: Path) -> None:
    result = cli.ok("ingest", str(docs))
    skipped = [line for line in _ANSI.sub("", result.stderr).splitlines() if "skipped" in line]
    assert len(skipped) == 1
    assert skipped[0].startswith(f"skipped {docs.resolve() / 'binary.txt'}: ")
    assert "binary" in skipped[0].split(": ", 1)[1]
    summary = out(result).strip().splitlines()[-1]
    assert summary.startswith("2 files: 1 added, 0 updated, 0 unchanged, 1 skipped; ")
    written = re.search(r"; ([1-9]\d*) chunks \((\d+) embedded\) in \d+\.\d s$", summary)
    assert written and written[1] == written[2], summary

    again = out(cli.ok("ingest", str(docs))).strip().splitlines()[-1]
    assert again.startswith("2 files: 0 added, 0 updated, 1 unchanged, 1 skipped; 0 chunks (0 ")

    # One paragraph more: the file is written again, but only the chunk it touched is embedded.
    (docs / "good.md").write_text(GOOD_MD + "\n\nThe canteen opens at noon on Fridays.\n")
    edited = out(cli.ok("ingest", str(docs))).strip().splitlines()[-1]
    embedded = re.search(r"\((\d+) embedded\)", edited)
    assert "1 updated" in edited and embedded and 1 <= int(embedded[1]) <= 2, edited

    restricted = out(cli.ok("ingest", str(docs / "good.md"), "--group", "hr"))
    assert "1 updated" in restricted
    listed = json.loads(cli.ok("documents", "list", "--json").stdout)
    assert [(Path(d["source"]).name, d["access"]) for d in listed] == [("good.md", ["group:hr"])]


@pytest.mark.slow
def test_ingest_refuses_bad_input_and_stores_nothing(cli: Cli, docs: Path, tmp_path: Path) -> None:
    missing = error_line(cli("ingest", str(tmp_path / "nonexistent")), 2)
    assert missing.startswith("error: path: ") and "nonexistent" in missing
    # a missing path among good ones is refused before anything is written
    mixed = error_line(cli("ingest", str(docs), str(tmp_path / "nonexistent")), 2)
    assert mixed.startswith("error: path: ")
    assert error_line(cli("ingest", str(docs), "--group", "h r"), 2).startswith("error: group: ")
    assert error_line(cli("ingest", str(docs), "--user", "nobody"), 2).startswith("error: user: ")
    assert json.loads(cli.ok("documents", "list", "--json").stdout) == []


@pytest.mark.slow
def test_search(cli: Cli, docs: Path) -> None:
    cli.ok("ingest", str(docs))
    result = cli.ok("search", "where do bicycles go", "--json")
    payload = json.loads(result.stdout)
    assert payload["embed_ms"] > 0 and payload["search_ms"] >= 0
    hits = payload["hits"]
    assert len(hits) == 1
    assert Path(hits[0]["source"]).name == "good.md"
    assert hits[0]["title"] == "Parking"
    assert "basement garage" in hits[0]["text"]
    assert hits[0]["score"] > 0

    table = out(cli.ok("search", "where do bicycles go", "-k", "2"))
    assert "good.md" in table and "basement garage" in table
    assert re.search(r"1 hits; query embedding \d+\.\d ms, search \d+\.\d ms", table)

    assert "query" in error_line(cli("search", ""), 2)
    assert error_line(cli("search", "   "), 2).startswith("error: query: ")
    assert error_line(cli("search", "bicycles", "-k", "0"), 2).startswith("error: --k: ")
    nobody = error_line(cli("search", "bicycles", "--as", "nobody@example.com"), 1)
    assert "no user nobody@example.com" in nobody
    assert error_line(cli("search", "bicycles", "--as", "nobody"), 2).startswith("error: email: ")


@pytest.mark.slow
def test_search_respects_the_callers_groups(cli: Cli, docs: Path) -> None:
    cli.ok("ingest", str(docs / "good.md"), "--group", "hr")
    cli.ok("users", "add", "hr@example.com", "-g", "hr")
    cli.ok("users", "add", "dev@example.com", "-g", "eng")
    query = ("search", "bicycles basement", "--json", "--as")
    assert len(json.loads(cli.ok(*query, "hr@example.com").stdout)["hits"]) == 1
    assert json.loads(cli.ok(*query, "dev@example.com").stdout)["hits"] == []
    assert out(cli.ok("search", "bicycles", "--as", "dev@example.com")).strip() == "no results"


@pytest.mark.slow
def test_documents_list_and_delete(cli: Cli, docs: Path) -> None:
    cli.ok("ingest", str(docs))
    listed = json.loads(cli.ok("documents", "list", "--json").stdout)
    assert len(listed) == 1
    doc = listed[0]
    assert doc["title"] == "Parking" and doc["media_type"] == "text/markdown"
    assert doc["chunk_count"] >= 1 and doc["access"] == []
    assert "Parking" in out(cli.ok("documents", "list"))

    cli.ok("users", "add", "reader@example.com")
    refused = error_line(
        cli("documents", "delete", str(doc["id"]), "--as", "reader@example.com"), 1
    )
    assert "only admins" in refused
    assert len(json.loads(cli.ok("documents", "list", "--json").stdout)) == 1

    deleted = out(cli.ok("documents", "delete", str(doc["id"])))
    assert deleted.strip().startswith(f"deleted document {doc['id']} (")
    assert json.loads(cli.ok("documents", "list", "--json").stdout) == []
    assert json.loads(cli.ok("search", "bicycles", "--json").stdout)["hits"] == []
    assert f"no document {doc['id']}" in error_line(cli("documents", "delete", str(doc["id"])), 1)
    assert cli("documents", "delete", "abc").exit_code == 2  # not an integer: click refuses


@pytest.mark.parametrize(
    ("args", "name"),
    [
        (("documents", "delete", "10000000000000000001"), "DOCUMENT_ID"),
        (("documents", "delete", "0"), "DOCUMENT_ID"),
        (("documents", "delete", str(2**31)), "DOCUMENT_ID"),
        (("reindex", "--batch-size", "99999999999999999999"), "--batch-size"),
        (("reindex", "--batch-size", "0"), "--batch-size"),
        (("search", "bicycles", "-k", "99999999999999999999"), "--k"),
        (("memory", "list", "--offset", "99999999999999999999"), "--offset"),
        (("memory", "list", "--limit", "-1"), "--limit"),
        (("memory", "search", "bicycles", "--limit", "5000"), "--limit"),
        (("keys", "retire", "99999999999999999999"), "VERSION"),
        (("serve", "--port", "70000"), "--port"),
        (
            (
                "state",
                "conformance",
                "--url",
                "http://127.0.0.1:9",
                "--secret",
                "s" * 16,
                "--timeout",
                "1e9",
            ),
            "--timeout",
        ),
    ],
)
def test_numbers_out_of_range_are_refused_with_one_line(
    cli: Cli, args: tuple[str, ...], name: str
) -> None:
    line = error_line(cli(*args), 2)
    assert line.startswith(f"error: {name}: "), line
    assert re.search(r"(greater|less) than or equal to [\d.]+ \(see `search2o ", line), line
    assert line.endswith(" --help`)"), line


def test_an_id_that_cannot_exist_is_not_found(cli: Cli) -> None:
    line = error_line(cli("documents", "delete", str(2**31 - 1)), 1)
    assert f"no document {2**31 - 1}" in line
    assert error_line(cli("documents", "delete", "abc"), 2).startswith("error: DOCUMENT_ID: ")


# ---------------------------------------------------------------------------------------------
# db, demo
# ---------------------------------------------------------------------------------------------


def test_db_upgrade_and_current(cli: Cli) -> None:
    assert out(cli.ok("db", "current")).strip().startswith("blank (no migration applied")
    head = Database.head_revision()
    upgraded = out(cli.ok("db", "upgrade")).strip()
    assert upgraded.startswith("database ") and upgraded.endswith(f": blank -> {head}")
    assert out(cli.ok("db", "current")).strip() == head
    assert out(cli.ok("db", "upgrade")).strip().endswith(f": {head} -> {head}")


def test_a_message_line_is_never_broken_inside_a_narrow_terminal(cli: Cli) -> None:
    cli.env["COLUMNS"] = "30"  # far narrower than the database URL
    printed = out(cli.ok("db", "upgrade"))
    assert printed.count("\n") == 1 and printed.startswith("database ")
    assert str(make_url(cli.database_url or "").database) in printed  # the URL stays whole


@pytest.mark.slow
def test_the_readme_demo_answers_its_follow_up_and_refuses_the_wifi_password(
    tmp_path: Path,
) -> None:
    # The README's main job on this repository's docs/, through the real built-in models.
    docs = Path(__file__).resolve().parents[1] / "docs"
    text_out = out(Cli(tmp_path / "data", None).ok("demo", str(docs)))
    turns = text_out.split("search_knowledge: ")
    assert len(turns) == 4, text_out  # three questions searched; thanks did not
    assert "--group NAME" in turns[1]
    assert "SHA-256" in turns[2] and "knowledge-store.md > Ingesting" in turns[2], turns[2]
    assert "I could not find an answer to that in the knowledge base." in turns[3]


@pytest.mark.slow
def test_demo_ingests_a_folder_and_holds_a_conversation(tmp_path: Path) -> None:
    folder = tmp_path / "handbook"
    folder.mkdir()
    (folder / "parking.md").write_text(GOOD_MD)
    data_dir = tmp_path / "data"
    cli = Cli(data_dir, None)
    result = cli.ok("demo", str(folder), "-q", "where can I leave my bicycle?", "-q", "thanks!")
    text_out = out(result)
    own = data_dir / "demo"
    assert f"data directory: {own} (the demo's own" in text_out
    assert "1 files: 1 added" in text_out
    assert "search_knowledge: where can I leave my bicycle?" in text_out
    assert "Bicycles are parked in the basement garage next to the lockers. [1]" in text_out
    assert "[1] Parking — " in text_out and "parking.md" in text_out
    assert "You're welcome!" in text_out
    assert text_out.count("search_knowledge:") == 1  # thanks did not search
    assert (own / "search2o.db").is_file()
    assert f"search2o --data-dir {own} chat" in text_out
    assert "open the Web App at http://localhost:8000/" in text_out
    listed = out(cli.ok("--data-dir", str(own), "chat", input="/list\n"))  # kept in its own
    assert "where can I leave my bicycle?" in listed
    # The user's own knowledge base holds none of the demo's documents or conversations.
    assert json.loads(cli.ok("documents", "list", "--json").stdout) == []
    assert "where can I leave my bicycle?" not in out(cli.ok("chat", input="/list\n"))
    missing = error_line(cli("demo", str(tmp_path / "nowhere")), 2)
    assert missing.startswith("error: path: ")


# ---------------------------------------------------------------------------------------------
# the installed console script, as a real process
# ---------------------------------------------------------------------------------------------


def _run(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEARCH2O_")}
    env.update(SEARCH2O_DATA_DIR=str(tmp_path / "data"), HF_HUB_OFFLINE="1", NO_COLOR="1")
    env.update(extra)
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_console_script_bad_input_exits_2_with_one_line(tmp_path: Path) -> None:
    assert SCRIPT.is_file()
    proc = _run(tmp_path, "users", "add", "not-an-email")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "error: email: 'not-an-email' is not an email address (expected name@domain)"
    ]
    assert proc.stdout == ""


def test_console_script_other_errors_exit_1(tmp_path: Path) -> None:
    proc = _run(tmp_path, "tokens", "revoke", "s2o_nothing1")
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        "error: no active token 's2o_nothing1'; see `search2o tokens list`"
    ]


def test_console_script_ingest_of_a_missing_path_exits_2_with_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent"
    proc = _run(tmp_path, "ingest", str(missing))
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"error: path: {missing} does not exist"]
    assert proc.stdout == ""


def test_console_script_refuses_a_bad_setting_with_one_line_and_exit_2(tmp_path: Path) -> None:
    # A bad setting is the operator's bad input, whether it came from the environment or the
    # TOML file: one line, exit 2 (a --port option out of range is refused by the option).
    proc = _run(tmp_path, "users", "list", SEARCH2O_PORT="70000")
    assert proc.returncode == 2
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("error: setting port: ")


@pytest.mark.parametrize(
    ("env", "line"),
    [
        (
            {"SEARCH2O_CHAT__SEARCH_KK": "3"},
            "error: unknown setting SEARCH2O_CHAT__SEARCH_KK "
            "(did you mean SEARCH2O_CHAT__SEARCH_K?)",
        ),
        (
            {"SEARCH2O_AUTH_MOD": "token"},
            "error: unknown setting SEARCH2O_AUTH_MOD (did you mean SEARCH2O_AUTH_MODE?)",
        ),
    ],
)
def test_console_script_a_settings_typo_in_the_environment_exits_2_with_one_line(
    tmp_path: Path, env: dict[str, str], line: str
) -> None:
    proc = _run(tmp_path, "users", "list", **env)
    assert (proc.returncode, proc.stderr.splitlines(), proc.stdout) == (2, [line], "")


def test_console_script_a_settings_typo_in_the_toml_file_exits_2_with_one_line(
    tmp_path: Path,
) -> None:
    (tmp_path / "data").mkdir(mode=0o700)
    config = tmp_path / "data" / "search2o.toml"
    config.write_text("[chat]\nsearch_kk = 3\n")
    proc = _run(tmp_path, "users", "list")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.splitlines() == [
        f"error: unknown setting search_kk in [chat] of {config} (did you mean search_k?)"
    ]
