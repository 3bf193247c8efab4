"""``search2o sources``: the folder connector from the command line, as an admin would use it."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.test_cli import Cli, error_line, out

PARAGRAPH = "Each team books its weekly meeting room through the facilities desk."


def _page(number: int, extra: str = "") -> str:
    return f"# Page {number}\n\nPage {number} of the wiki. {PARAGRAPH}{extra}\n"


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "data", None)


@pytest.fixture
def wiki(tmp_path: Path) -> Path:
    folder = tmp_path / "wiki"
    folder.mkdir()
    for number in range(1, 5):
        (folder / f"page{number}.md").write_text(_page(number))
    (folder / "page4.md").write_text(_page(4, " The quarterly zeppelin inspection is on Fridays."))
    return folder


def _source(cli: Cli, name: str = "wiki") -> dict[str, Any]:
    return json.loads(cli.ok("sources", "show", name, "--json").stdout)  # type: ignore[no-any-return]


def _hits(cli: Cli, query: str) -> list[str]:
    hits = json.loads(cli.ok("search", query, "--json").stdout)["hits"]
    return [hit["source"] for hit in hits]


@pytest.mark.slow
def test_an_edit_and_a_deletion_sync_incrementally_and_a_lost_folder_deletes_nothing(
    cli: Cli, wiki: Path
) -> None:
    added = cli.ok("sources", "add", "folder", "wiki", "--path", str(wiki))
    assert "source wiki (folder) added" in out(added)
    first = cli.ok("sources", "sync", "wiki")
    assert out(first).strip().endswith("4 added, 0 updated, 0 deleted, 0 unchanged, 0 failed")

    touched = (wiki / "page1.md").stat().st_mtime_ns + 5_000_000_000
    os.utime(wiki / "page1.md", ns=(touched, touched))  # a new version, the same bytes
    same = cli.ok("sources", "sync", "wiki")
    assert out(same).strip().endswith("0 added, 0 updated, 0 deleted, 4 unchanged, 0 failed")
    assert _source(cli)["last_counts"]["fetched"] == 1  # read once, stopped by the hash
    assert _source(cli)["last_counts"]["embedded"] == 0
    cli.ok("sources", "sync", "wiki")
    assert _source(cli)["last_counts"]["fetched"] == 0  # its new version was stored

    (wiki / "page2.md").write_text(_page(2, "\n\nBicycles go to the basement garage, level -2."))
    (wiki / "page4.md").unlink()
    second = cli.ok("sources", "sync", "wiki")
    assert out(second).strip().endswith("0 added, 1 updated, 1 deleted, 2 unchanged, 0 failed")
    counts = _source(cli)["last_counts"]
    assert counts["fetched"] == 1 and 1 <= counts["embedded"] <= 2, counts  # the edit alone

    assert _hits(cli, "where do bicycles go in the basement garage")[0] == "wiki:page2.md"
    assert "wiki:page4.md" not in _hits(cli, "zeppelin inspection on Fridays")

    shutil.rmtree(wiki)
    lost = cli("sources", "sync", "wiki")
    assert lost.exit_code == 1
    assert out(lost).strip().endswith("0 added, 0 updated, 0 deleted, 0 unchanged, 0 failed")
    assert "cannot be read" in lost.stderr and "nothing deleted" in lost.stderr
    listed = json.loads(cli.ok("sources", "list", "--json").stdout)
    assert [(s["name"], s["kind"], s["documents"]) for s in listed] == [("wiki", "folder", 3)]
    assert listed[0]["last_success"] is not None
    assert "cannot be read" in listed[0]["last_error"]


def test_an_emptied_folder_is_suspect_and_deletes_only_when_allowed(cli: Cli, wiki: Path) -> None:
    cli.ok("sources", "add", "folder", "wiki", "--path", str(wiki), "--public")
    cli.ok("sources", "sync", "wiki")
    for page in wiki.iterdir():
        page.unlink()
    stopped = cli("sources", "sync", "wiki")
    assert stopped.exit_code == 1 and "--allow-mass-delete" in stopped.stderr
    assert _source(cli)["documents"] == 4 and _source(cli)["status"] == "blocked"
    allowed = cli.ok("sources", "sync", "wiki", "--allow-mass-delete")
    assert "4 deleted" in out(allowed)
    assert _source(cli)["documents"] == 0 and _source(cli)["status"] == "idle"


def test_access_comes_from_the_source_and_a_change_of_it_embeds_nothing(
    cli: Cli, wiki: Path
) -> None:
    cli.ok("sources", "add", "folder", "wiki", "--path", str(wiki), "--group", "hr")
    cli.ok("sources", "sync", "wiki")
    cli.ok("users", "add", "ann@example.com", "--group", "hr")
    cli.ok("users", "add", "bob@example.com", "--group", "eng")
    query = "weekly meeting room facilities desk"
    assert (
        json.loads(cli.ok("search", query, "--as", "bob@example.com", "--json").stdout)["hits"]
        == []
    )
    assert json.loads(cli.ok("search", query, "--as", "ann@example.com", "--json").stdout)["hits"]
    cli.ok("sources", "update", "wiki", "--set", 'groups=["eng"]')
    changed = cli.ok("sources", "sync", "wiki")
    assert out(changed).strip().endswith("0 added, 4 updated, 0 deleted, 0 unchanged, 0 failed")
    assert _source(cli)["last_counts"]["embedded"] == 0
    assert json.loads(cli.ok("search", query, "--as", "bob@example.com", "--json").stdout)["hits"]


def test_bad_input_is_one_line_naming_the_field_and_changes_nothing(
    cli: Cli, wiki: Path, tmp_path: Path
) -> None:
    path = str(wiki)
    assert "name:" in error_line(cli("sources", "add", "folder", "Bad Name", "--path", path), 2)
    missing = str(tmp_path / "nowhere")
    assert "settings.path:" in error_line(
        cli("sources", "add", "folder", "w", "--path", missing), 2
    )
    assert "settings.groups:" in error_line(
        cli("sources", "add", "folder", "w", "--path", path, "--group", "no spaces"), 2
    )
    assert "--every:" in error_line(
        cli("sources", "add", "folder", "w", "--path", path, "--every", "5s"), 2
    )
    assert "--every:" in error_line(
        cli("sources", "add", "folder", "w", "--path", path, "--every", "often"), 2
    )
    assert json.loads(cli.ok("sources", "list", "--json").stdout) == []
    cli.ok("sources", "add", "folder", "w", "--path", path, "--every", "1h")
    assert "exists already" in error_line(cli("sources", "add", "folder", "w", "--path", path), 1)
    assert "no source named 'nope'" in error_line(cli("sources", "sync", "nope"), 1)
    assert "settings.bogus:" in error_line(cli("sources", "update", "w", "--set", "bogus=1"), 2)
    assert "--set:" in error_line(cli("sources", "update", "w", "--set", "novalue"), 2)
    shown = _source(cli, "w")
    assert shown["schedule_s"] == 3600 and shown["credentials"] == "not set"
    assert shown["settings"]["path"] == path and shown["next_sync_at"] is not None


def test_remove_deletes_the_documents_unless_kept(cli: Cli, wiki: Path) -> None:
    cli.ok("sources", "add", "folder", "wiki", "--path", str(wiki), "--public")
    cli.ok("sources", "sync", "wiki")
    kept = cli.ok("sources", "remove", "wiki", "--keep-documents")
    assert "its documents kept" in out(kept)
    documents = json.loads(cli.ok("documents", "list", "--json").stdout)
    assert len(documents) == 4
    cli.ok("sources", "add", "folder", "again", "--path", str(wiki), "--public")
    cli.ok("sources", "sync", "again")
    removed = cli.ok("sources", "remove", "again")
    assert "4 document(s) deleted" in out(removed)
    assert len(json.loads(cli.ok("documents", "list", "--json").stdout)) == 4  # the kept ones
    assert "no source named" in error_line(cli("sources", "show", "again"), 1)
