"""Many files at once: read ahead in another thread, small files embedded in one model call.

The real model (wrapped to count its calls), real files, the database on both backends.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from search2o.knowledge import pipeline
from search2o.knowledge.access import AccessList
from search2o.knowledge.store import KnowledgeStore
from search2o.runtime import Runtime
from tests.conftest import MemoEmbedder


class Counting(MemoEmbedder):
    """The session's model, counting calls and the texts of each."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(len(texts))
        if any("POISON" in t for t in texts):
            raise RuntimeError("the endpoint refused a text")
        return super().embed(texts)


def _store(runtime: Runtime, embedder: Counting) -> KnowledgeStore:
    return KnowledgeStore(runtime.database, embedder, runtime.settings.knowledge)


def _write(folder: Path, count: int, prefix: str = "note") -> list[Path]:
    folder.mkdir(exist_ok=True)
    paths = []
    for n in range(count):
        path = folder / f"{prefix}{n:02}.md"
        path.write_text(f"# Note {n}\n\nMeeting room {n} seats {n + 2} people.\n")
        paths.append(path)
    return paths


def test_small_files_share_one_model_call_and_come_back_in_order(
    runtime: Runtime, tmp_path: Path
) -> None:
    embedder = Counting()
    files = _write(tmp_path / "docs", 12)
    (tmp_path / "docs" / "image.png").write_bytes(b"\x89PNG")
    summary = _store(runtime, embedder).ingest_paths([tmp_path / "docs"], AccessList())
    assert embedder.calls == [12]  # not 12 calls of 1 text
    assert [Path(o.source).name for o in summary.outcomes] == sorted(
        [p.name for p in files] + ["image.png"]
    )
    assert summary.count("added") == 12 and summary.count("skipped") == 1
    assert [o.embedded for o in summary.outcomes if o.status == "added"] == [1] * 12


def test_a_text_two_files_share_is_embedded_once_and_counted_once(
    runtime: Runtime, tmp_path: Path
) -> None:
    embedder = Counting()
    for name in ("a.md", "b.md"):
        (tmp_path / name).write_text("# Same\n\nThe same paragraph in two files.\n")
    summary = _store(runtime, embedder).ingest_paths([tmp_path], AccessList())
    assert embedder.calls == [1]
    assert [o.embedded for o in summary.outcomes] == [1, 0] and summary.embedded == 1


def test_a_failed_group_is_retried_per_document_so_one_bad_file_fails_alone(
    runtime: Runtime, tmp_path: Path
) -> None:
    embedder = Counting()
    _write(tmp_path, 4)
    (tmp_path / "note02.md").write_text("# Bad\n\nThis one holds POISON.\n")
    summary = _store(runtime, embedder).ingest_paths([tmp_path], AccessList())
    assert embedder.calls[0] == 4 and len(embedder.calls) == 5  # the group, then one each
    statuses = {Path(o.source).name: (o.status, o.reason) for o in summary.outcomes}
    assert statuses["note02.md"][0] == "skipped"
    assert "could not be embedded" in statuses["note02.md"][1]
    assert [s for name, (s, _) in statuses.items() if name != "note02.md"] == ["added"] * 3


def test_files_are_read_and_written_in_their_threads_a_bounded_window_ahead(
    runtime: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedder = Counting()
    store = _store(runtime, embedder)
    _write(tmp_path, 30)
    threads: set[str] = set()
    ahead: list[int] = []
    stored: list[str] = []
    read: list[str] = []
    prepare, write = store.ingestor.prepare_file, store.ingestor.store

    def recording_prepare(file: Path, access: AccessList) -> object:
        threads.add(threading.current_thread().name)
        read.append(file.name)
        ahead.append(len(read) - len(stored))
        return prepare(file, access)

    def recording_store(*args: object) -> object:
        stored.append(threading.current_thread().name)
        return write(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(store.ingestor, "prepare_file", recording_prepare)
    monkeypatch.setattr(store.ingestor, "store", recording_store)
    monkeypatch.setattr(pipeline, "GROUP_TEXTS", 4)
    summary = store.ingest_paths([tmp_path], AccessList())
    assert summary.count("added") == 30
    assert all(name.startswith("search2o-ingest-read") for name in threads)
    # The window, the group being embedded and the one being written; never the folder.
    assert max(ahead) <= pipeline.AHEAD + 2 * 4
    assert all(name.startswith("search2o-ingest-write") for name in stored)
    assert len(embedder.calls) >= 30 // 4  # groups of 4 texts
