"""The Knowledge Store end to end on both backends with the real embedding model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import func, select

from search2o.accounts import Principal, create_user
from search2o.errors import IndexMismatchError, InputError, NotFoundError, PermissionDeniedError
from search2o.knowledge import pipeline
from search2o.knowledge.access import AccessList
from search2o.runtime import Runtime
from search2o.storage.models import Chunk, ChunkEmbedding, Document
from tests.conftest import HANDBOOK, handbook_files

pytestmark = pytest.mark.slow


def _user(
    runtime: Runtime, email: str, groups: tuple[str, ...] = (), admin: bool = False
) -> Principal:
    with runtime.database.session() as session:
        return Principal.of(create_user(session, email, groups=list(groups), is_admin=admin))


def _names(hits: list) -> list[str]:
    return [Path(h.source).name for h in hits]


def test_handbook_search_ranks_the_right_files(runtime: Runtime) -> None:
    summary = runtime.knowledge.ingest_paths([HANDBOOK], AccessList())
    assert summary.count("added") == len(handbook_files()) == 16
    assert summary.count("skipped") == 0
    reader = runtime.local_principal()

    vacation = runtime.knowledge.search(reader, "how many vacation days do we get", 5)
    assert _names(vacation.hits)[0] == "benefits-and-perks.md"

    side = runtime.knowledge.search(reader, "rules for side projects outside work", 5)
    assert "moonlighting.md" in _names(side.hits)[:3]

    hit = vacation.hits[0]
    assert hit.title and hit.text and hit.score > 0
    assert hit.heading_path, "markdown chunks keep their heading path"
    assert vacation.embed_ms > 0 and vacation.search_ms > 0


def test_reingest_unchanged_does_nothing_and_changed_replaces_chunks(
    runtime: Runtime, tmp_path: Path
) -> None:
    doc = tmp_path / "policy.md"
    doc.write_text("# Policy\n\nBadges must be worn at all times in the office.\n")
    first = runtime.knowledge.ingest_paths([tmp_path], AccessList())
    assert [o.status for o in first.outcomes] == ["added"]
    again = runtime.knowledge.ingest_paths([tmp_path], AccessList())
    assert [o.status for o in again.outcomes] == ["unchanged"]

    doc.write_text("# Policy\n\nVisitors sign the guest book at reception.\n")
    changed = runtime.knowledge.ingest_paths([tmp_path], AccessList())
    assert [o.status for o in changed.outcomes] == ["updated"]
    with runtime.database.session() as session:
        texts = list(session.scalars(select(Chunk.text)))
        vectors = session.scalar(select(func.count()).select_from(ChunkEmbedding))
    assert texts == ["Visitors sign the guest book at reception."]
    assert vectors == 1
    hits = runtime.knowledge.search(runtime.local_principal(), "badges worn in office", 5).hits
    assert all("Badges" not in h.text for h in hits)


def test_bad_files_are_skipped_with_a_reason_and_the_rest_ingested(
    runtime: Runtime, tmp_path: Path
) -> None:
    (tmp_path / "good.md").write_text("# Good\n\nThe cafeteria opens at eight.\n")
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "binary.txt").write_bytes(b"\x00\x01\x02\xff" * 50)
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    (tmp_path / "broken.docx").write_bytes(b"PK\x03\x04 not a zip")
    (tmp_path / "image.png").write_bytes(b"\x89PNG\r\n")
    summary = runtime.knowledge.ingest_paths([tmp_path], AccessList())
    by_name = {Path(o.source).name: o for o in summary.outcomes}
    assert by_name["good.md"].status == "added"
    for name in ("empty.txt", "binary.txt", "broken.pdf", "broken.docx", "image.png"):
        assert by_name[name].status == "skipped", name
        assert by_name[name].reason, name
    assert "empty" in by_name["empty.txt"].reason
    assert "binary" in by_name["binary.txt"].reason
    assert "unsupported" in by_name["image.png"].reason
    assert summary.count("skipped") == 5
    assert "1 added" in summary.line() and "5 skipped" in summary.line()


def test_oversized_file_is_skipped(runtime: Runtime, tmp_path: Path) -> None:
    runtime.knowledge.settings = runtime.knowledge.settings.model_copy(
        update={"max_file_bytes": 10}
    )
    runtime.knowledge.ingestor.settings = runtime.knowledge.settings
    (tmp_path / "big.md").write_text("# Big\n\nMore than ten bytes of text.\n")
    outcome = runtime.knowledge.ingest_paths([tmp_path], AccessList()).outcomes[0]
    assert outcome.status == "skipped" and "limit is 10" in outcome.reason


def test_group_document_is_never_returned_outside_the_group(
    runtime: Runtime, tmp_path: Path
) -> None:
    secret = tmp_path / "hr"
    secret.mkdir()
    (secret / "salaries.md").write_text(
        "# Salary bands\n\nThe salary band for level 3 engineers is confidential.\n"
    )
    public = tmp_path / "public"
    public.mkdir()
    (public / "lunch.md").write_text("# Lunch\n\nLunch is served at noon in the cafeteria.\n")
    runtime.knowledge.ingest_paths([secret], AccessList.build(groups=["hr"]))
    runtime.knowledge.ingest_paths([public], AccessList())
    hr = _user(runtime, "hr@example.com", ("hr",))
    outsider = _user(runtime, "dev@example.com", ("eng",))
    named = _user(runtime, "named@example.com")

    query = "salary band level 3 engineers"
    assert "salaries.md" in _names(runtime.knowledge.search(hr, query, 10).hits)
    outsider_hits = runtime.knowledge.search(outsider, query, 10).hits
    assert "salaries.md" not in _names(outsider_hits)
    assert _names(outsider_hits) == ["lunch.md"]
    assert "salaries.md" not in _names(runtime.knowledge.search(named, query, 10).hits)
    assert [d.title for d in runtime.knowledge.list_documents(outsider)] == ["Lunch"]
    assert not runtime.knowledge.is_empty(outsider)

    # a user named on the access list reads it without the group
    runtime.knowledge.ingest_paths([secret], AccessList.build(users=["named@example.com"]))
    assert "salaries.md" in _names(runtime.knowledge.search(named, query, 10).hits)
    assert "salaries.md" not in _names(runtime.knowledge.search(hr, query, 10).hits)


def test_is_empty_and_delete_rules(runtime: Runtime, tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\nAlpha text about parking.\n")
    stranger = _user(runtime, "stranger@example.com")
    assert runtime.knowledge.is_empty(stranger)
    runtime.knowledge.ingest_paths([tmp_path], AccessList.build(groups=["ops"]))
    assert runtime.knowledge.is_empty(stranger)
    ops = _user(runtime, "ops@example.com", ("ops",))
    assert not runtime.knowledge.is_empty(ops)
    doc_id = runtime.knowledge.list_documents(ops)[0].id

    with pytest.raises(NotFoundError):  # cannot read it: answered like a missing one
        runtime.knowledge.delete_document(stranger, doc_id)
    with pytest.raises(PermissionDeniedError):
        runtime.knowledge.delete_document(ops, doc_id)
    with pytest.raises(NotFoundError):
        runtime.knowledge.delete_document(runtime.local_principal(), 999_999)
    runtime.knowledge.delete_document(runtime.local_principal(), doc_id)
    assert runtime.knowledge.is_empty(ops)
    with runtime.database.session() as session:
        assert session.scalar(select(func.count()).select_from(Chunk)) == 0
        assert session.scalar(select(func.count()).select_from(ChunkEmbedding)) == 0


@pytest.mark.parametrize(
    ("query", "k", "field"),
    [
        ("", 5, "query"),
        ("   ", 5, "query"),
        ("x" * 2001, 5, "query"),
        ("ok", 0, "k"),
        ("ok", 101, "k"),
    ],
)
def test_bad_queries_are_input_errors(runtime: Runtime, query: str, k: int, field: str) -> None:
    with pytest.raises(InputError) as info:
        runtime.knowledge.search(runtime.local_principal(), query, k)
    assert info.value.field == field


def test_interruption_leaves_each_document_whole_or_absent(
    runtime: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pipeline, "GROUP_TEXTS", 1)  # a model call per document, as large files
    for i in range(4):
        (tmp_path / f"doc{i}.md").write_text(
            f"# Doc {i}\n\nParagraph number {i} about topic {i}.\n"
        )
    real_embed = runtime.embedder.embed
    calls = {"n": 0}

    def interrupt_on_third(texts: list[str]) -> np.ndarray:
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real_embed(texts)

    runtime.knowledge.ingestor.embedder.embed = interrupt_on_third  # type: ignore[method-assign]
    try:
        with pytest.raises(KeyboardInterrupt):
            runtime.knowledge.ingest_paths([tmp_path], AccessList())
    finally:
        del runtime.knowledge.ingestor.embedder.embed
    with runtime.database.session() as session:
        docs = list(session.scalars(select(Document)))
        assert len(docs) == 2
        for doc in docs:
            chunks = session.scalar(
                select(func.count()).select_from(Chunk).where(Chunk.document_id == doc.id)
            )
            assert chunks == doc.chunk_count > 0


def test_interruption_inside_the_write_rolls_back(runtime: Runtime, tmp_path: Path) -> None:
    (tmp_path / "one.md").write_text("# One\n\nFirst document.\n")
    original = runtime.knowledge.ingestor.set_access

    def boom(*args: object, **kwargs: object) -> None:
        original(*args, **kwargs)  # type: ignore[arg-type]
        raise KeyboardInterrupt

    runtime.knowledge.ingestor.set_access = boom  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        runtime.knowledge.ingest_paths([tmp_path], AccessList())
    with runtime.database.session() as session:
        assert session.scalar(select(func.count()).select_from(Document)) == 0
        assert session.scalar(select(func.count()).select_from(Chunk)) == 0


class _OtherModel:
    """Another vector space: the built-in model's vectors under another id."""

    model_id = "test/other-model"
    max_tokens = 256

    def __init__(self, inner) -> None:
        self.inner = inner
        self.dimension = inner.dimension

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.inner.embed(texts)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)


def test_model_change_asks_for_reindex_and_reindex_fixes_it(
    runtime: Runtime, tmp_path: Path
) -> None:
    (tmp_path / "a.md").write_text("# Parking\n\nThe garage is under the building.\n")
    runtime.knowledge.ingest_paths([tmp_path], AccessList())
    from search2o.knowledge.store import KnowledgeStore

    other = KnowledgeStore(
        runtime.database, _OtherModel(runtime.embedder), runtime.settings.knowledge
    )
    principal = runtime.local_principal()
    with pytest.raises(IndexMismatchError, match="reindex"):
        other.search(principal, "where is the garage", 3)
    (tmp_path / "b.md").write_text("# Bikes\n\nBike racks are by the door.\n")
    with pytest.raises(IndexMismatchError):
        other.ingest_paths([tmp_path / "b.md"], AccessList())
    count, _ = other.reindex(batch_size=1)
    assert count == 1
    assert other.search(principal, "where is the garage", 3).hits
    with runtime.database.session() as session:
        models = set(session.scalars(select(ChunkEmbedding.model_id)))
    assert models == {"test/other-model"}
