"""The folder connector's listing: versions, hidden files, types, symlinks, unreadable parts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from search2o.connectors.contract import ListingEnd, SourceError
from search2o.connectors.folder.connector import FolderConnector, FolderSettings


def _list(folder: Path) -> tuple[dict[str, str], ListingEnd]:
    connector = FolderConnector(FolderSettings(path=str(folder)))
    items = connector.listing()
    found: dict[str, str] = {}
    while True:
        try:
            item = next(items)
        except StopIteration as stop:
            return found, stop.value
        found[item.key] = item.version


def test_the_listing_keys_readable_files_by_relative_path_with_mtime_and_size(
    tmp_path: Path,
) -> None:
    root = tmp_path / "docs"
    (root / "team" / "deep").mkdir(parents=True)
    (root / "a.md").write_text("# A\n")
    (root / "team" / "deep" / "b.txt").write_text("B text")
    (root / "picture.png").write_bytes(b"\x89PNG")  # no loader reads it: not listed
    (root / ".hidden.md").write_text("# secret\n")
    (root / ".git").mkdir()
    (root / ".git" / "notes.md").write_text("# not a document\n")
    found, end = _list(root)
    assert end.complete
    assert sorted(found) == ["a.md", "team/deep/b.txt"]
    stat = (root / "a.md").stat()
    assert found["a.md"] == f"{stat.st_mtime_ns}-{stat.st_size}"


def test_symlinks_never_lead_out_of_the_folder(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "private.md").write_text("# Private\n")
    (root / "real.md").write_text("# Real\n")
    os.symlink(root / "real.md", root / "alias.md")  # inside: read
    os.symlink(outside / "private.md", root / "leak.md")  # a file outside: not followed
    os.symlink(outside, root / "linked-folder")  # a folder: never followed
    found, end = _list(root)
    assert end.complete
    assert sorted(found) == ["alias.md", "real.md"]
    connector = FolderConnector(FolderSettings(path=str(root)))
    with pytest.raises(SourceError, match="leads out of the folder"):
        connector.fetch("leak.md")
    with pytest.raises(SourceError, match="leads out of the folder"):
        connector.fetch("../outside/private.md")
    assert connector.fetch("alias.md").data == b"# Real\n"


def test_a_missing_folder_fails_the_listing(tmp_path: Path) -> None:
    connector = FolderConnector(FolderSettings(path=str(tmp_path / "gone")))
    with pytest.raises(SourceError, match="cannot be read"):
        next(connector.listing())


def test_settings_are_strict_and_name_the_field() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="path"):
        FolderSettings(path="relative/docs")
    with pytest.raises(ValidationError, match="groups"):
        FolderSettings(path="/srv/docs", groups=["bad group"])
    with pytest.raises(ValidationError, match="users"):
        FolderSettings(path="/srv/docs", users=["not-an-email"])
    with pytest.raises(ValidationError, match="colour"):
        FolderSettings.model_validate({"path": "/srv/docs", "colour": "red"})
