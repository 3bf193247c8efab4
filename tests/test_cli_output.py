"""CLI output is literal: document text, titles and paths are never read as markup."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_cli import Cli, error_line, out

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_bracketed_text_is_printed_as_is(cli: Cli, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "p.md").write_text(
        "# Mount [/etc/platypus] notes\n\nThe platypus config lives in [/etc/platypus] and "
        "[bold]x[/bold] too.\n"
    )
    cli.ok("ingest", str(folder))
    shown = out(cli.ok("search", "platypus config", "--k", "1"))
    assert "[/etc/platypus]" in shown and "[bold]x[/bold]" in shown
    assert "Mount [/etc/platypus] notes" in out(cli.ok("documents", "list"))
    line = error_line(cli("ingest", str(tmp_path / "[bold]missing")), 2)
    assert "[bold]missing" in line


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_reingest_that_widens_access_prints_a_warning(cli: Cli, tmp_path: Path) -> None:
    folder = tmp_path / "hr"
    folder.mkdir()
    (folder / "pay.md").write_text("# Pay\n\nSalary bands are confidential.\n")
    cli.ok("ingest", str(folder), "--group", "hr")
    result = cli.ok("ingest", str(folder))
    assert "access changed" in result.stderr and "group:hr -> everyone" in result.stderr


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_tokens_list_json_shows_full_prefixes(cli: Cli) -> None:
    token = out(cli.ok("users", "add", "ann@example.com")).strip().splitlines()[-1]
    listed = json.loads(cli.ok("tokens", "list", "--json").stdout)
    assert [t["prefix"] for t in listed] == [token[:12]]
    assert token not in cli.ok("tokens", "list", "--json").stdout
