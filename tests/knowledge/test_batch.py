"""One bad file never stops a batch, and NUL is handled alike on SQLite and PostgreSQL.

Everything is real: the database on both backends, the embedding model, the CLI in process.
Failures are real too: a database trigger refuses a chunk on insert, as a constraint or a
full disk would; an embedding provider (the paid edge) fails for one document.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import func, select, text

from search2o.errors import ProviderError
from search2o.knowledge import ingest
from search2o.knowledge.access import AccessList
from search2o.knowledge.store import KnowledgeStore
from search2o.knowledge.vectorspace import embedding_text
from search2o.runtime import Runtime
from search2o.storage.db import Database
from search2o.storage.models import Chunk, ChunkEmbedding, Document, DocumentAccess
from tests.conftest import MemoEmbedder
from tests.test_cli import Cli, out

pytestmark = pytest.mark.slow

# A NUL byte after the first 8 KiB, which the binary sniff does not look at.
NUL_MD = (
    "# Travel policy\n\n" + "Book trains for trips under four hours. " * 220 + "\n\n"
    "## Hotels\n\nHotel rooms up to 180 euros\x00 per night are approved without a form.\n"
)
GOOD = "# Parking\n\nBicycles are parked in the basement garage next to the lockers.\n"
POISON = "# Poison\n\nThis chunk holds the word POISON, which the test trigger refuses.\n"


def poison_chunks(database: Database) -> None:
    """Install a trigger that refuses any chunk whose text contains ``POISON``."""
    if database.backend == "sqlite":
        statements = [
            "CREATE TRIGGER poison BEFORE INSERT ON chunks WHEN NEW.text LIKE '%POISON%' "
            "BEGIN SELECT RAISE(ABORT, 'poisoned chunk refused'); END"
        ]
    else:
        statements = [
            "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF NEW.text LIKE '%POISON%' THEN RAISE EXCEPTION 'poisoned chunk refused'; END IF; "
            "RETURN NEW; END $$",
            "CREATE TRIGGER poison BEFORE INSERT ON chunks FOR EACH ROW EXECUTE FUNCTION poison()",
        ]
    with database.engine.begin() as connection:
        for statement in statements:
            connection.execute(text(statement))


def stored(database: Database) -> dict[str, Any]:
    """Row counts per table and every stored title, heading path and chunk text."""
    with database.session() as session:
        counts = {
            model.__tablename__: int(session.scalar(select(func.count()).select_from(model)) or 0)
            for model in (Document, DocumentAccess, Chunk, ChunkEmbedding)
        }
        documents = {Path(d.source).name: d.title for d in session.scalars(select(Document))}
        chunks = list(session.execute(select(Chunk.heading_path, Chunk.text)))
    return {"counts": counts, "documents": documents, "chunks": chunks}


class FailingEmbedder:
    """The real model, except that a batch holding ``marker`` fails like a provider outage."""

    def __init__(self, inner: MemoEmbedder, marker: str) -> None:
        self.inner, self.marker = inner, marker
        self.model_id, self.dimension, self.max_tokens = (
            inner.model_id,
            inner.dimension,
            inner.max_tokens,
        )

    def embed(self, texts: list[str]) -> np.ndarray:
        if any(self.marker in t for t in texts):
            raise ProviderError("embedding endpoint answered HTTP 500")
        return self.inner.embed(texts)

    def count_tokens(self, value: str) -> int:
        return self.inner.count_tokens(value)


def test_nul_after_the_sniff_is_removed_and_the_batch_goes_on(
    runtime: Runtime, tmp_path: Path
) -> None:
    (tmp_path / "a-parking.md").write_text(GOOD)
    (tmp_path / "b-travel.md").write_text(NUL_MD)
    (tmp_path / "c-vacation.md").write_text("# Vacation\n\nEvery employee gets 25 days.\n")
    summary = runtime.knowledge.ingest_paths([tmp_path], AccessList())
    assert [o.status for o in summary.outcomes] == ["added"] * 3, summary.outcomes
    rows = stored(runtime.database)
    assert not any("\x00" in t for _, t in rows["chunks"])
    assert any("180 euros per night" in t for _, t in rows["chunks"])
    hit = runtime.knowledge.search(runtime.local_principal(), "hotel price per night", 3).hits[0]
    assert Path(hit.source).name == "b-travel.md" and hit.heading_path == ["Hotels"]


def test_upload_with_nul_is_stored_alike_on_both_backends(runtime: Runtime) -> None:
    outcome = runtime.knowledge.ingest_bytes(
        "upload:travel.md", "travel.md", NUL_MD.encode(), AccessList()
    )
    assert outcome.status == "added", outcome
    assert stored(runtime.database)["counts"]["chunks"] == outcome.chunks > 0


def test_a_storage_failure_skips_that_document_only_and_keeps_nothing_of_it(
    runtime: Runtime, tmp_path: Path
) -> None:
    poison_chunks(runtime.database)
    (tmp_path / "a-parking.md").write_text(GOOD)
    (tmp_path / "b-poison.md").write_text(POISON)
    (tmp_path / "c-vacation.md").write_text("# Vacation\n\nEvery employee gets 25 days.\n")
    summary = runtime.knowledge.ingest_paths([tmp_path], AccessList.build(groups=["hr"]))
    by_name = {Path(o.source).name: o for o in summary.outcomes}
    assert by_name["a-parking.md"].status == by_name["c-vacation.md"].status == "added"
    poisoned = by_name["b-poison.md"]
    assert poisoned.status == "skipped" and poisoned.document_id is None
    assert poisoned.reason.startswith("could not be stored: "), poisoned.reason
    assert "\n" not in poisoned.reason
    rows = stored(runtime.database)
    assert set(rows["documents"]) == {"a-parking.md", "c-vacation.md"}
    assert rows["counts"] == {
        "documents": 2,
        "document_access": 2,
        "chunks": 2,
        "chunk_embeddings": 2,
    }


def test_an_embedding_failure_skips_that_document_only(
    runtime: Runtime, embedder: MemoEmbedder, tmp_path: Path
) -> None:
    store = KnowledgeStore(
        runtime.database, FailingEmbedder(embedder, "EMBEDFAIL"), runtime.settings.knowledge
    )
    (tmp_path / "a.md").write_text(GOOD)
    (tmp_path / "b.md").write_text("# B\n\nThis one says EMBEDFAIL.\n")
    (tmp_path / "c.md").write_text("# C\n\nThe canteen opens at noon.\n")
    outcomes = store.ingest_paths([tmp_path], AccessList()).outcomes
    assert [o.status for o in outcomes] == ["added", "skipped", "added"]
    assert outcomes[1].reason == "could not be embedded: embedding endpoint answered HTTP 500"
    assert set(stored(runtime.database)["documents"]) == {"a.md", "c.md"}


@pytest.mark.parametrize(
    ("source", "expected"),
    [("upload:bad\x00name.md", "NUL"), ("upload:" + "d/" * 1100 + "x.md", "limit is 2000")],
)
def test_a_source_the_database_cannot_hold_is_skipped(
    runtime: Runtime, source: str, expected: str
) -> None:
    outcome = runtime.knowledge.ingest_bytes(source, "x.md", GOOD.encode(), AccessList())
    assert outcome.status == "skipped" and expected in outcome.reason, outcome
    assert outcome.reason.startswith("source ")
    assert stored(runtime.database)["counts"]["documents"] == 0
    after = runtime.knowledge.ingest_bytes("upload:x.md", "x.md", GOOD.encode(), AccessList())
    assert after.status == "added"


def test_over_the_chunk_bound_is_skipped_and_stores_nothing(runtime: Runtime) -> None:
    runtime.knowledge.ingestor.settings = runtime.settings.knowledge.model_copy(
        update={"max_chunks_per_document": 3}
    )
    many = "".join(f"## Part {i}\n\nSection {i} has its own text.\n\n" for i in range(8))
    outcome = runtime.knowledge.ingest_bytes("upload:m.md", "m.md", many.encode(), AccessList())
    assert outcome.status == "skipped"
    assert "knowledge.max_chunks_per_document" in outcome.reason
    assert stored(runtime.database)["counts"]["documents"] == 0


def test_stored_titles_and_heading_paths_carry_no_control_characters(runtime: Runtime) -> None:
    page = (
        "<html><head><title>Hand\x1b[31mbook\u202e &lt;b&gt;</title></head><body>"
        "<h2>Bene\x07fits</h2><p>Health\x01 insurance for everyone.</p></body></html>"
    )
    outcome = runtime.knowledge.ingest_bytes("upload:h.html", "h.html", page.encode(), AccessList())
    assert outcome.status == "added" and outcome.title == "Hand[31mbook <b>"
    rows = stored(runtime.database)
    assert rows["documents"] == {"upload:h.html": "Hand[31mbook <b>"}
    assert [(list(p), t) for p, t in rows["chunks"]] == [
        (["Benefits"], "Health insurance for everyone.")
    ]


def test_cli_ingest_of_a_folder_with_bad_files_finishes_it(cli: Cli, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a-parking.md").write_text(GOOD)
    (folder / "b-travel.md").write_text(NUL_MD)
    (folder / "c-poison.md").write_text(POISON)
    (folder / "d-vacation.md").write_text("# Vacation\n\nEvery employee gets 25 days.\n")
    database = cli.database()
    try:
        poison_chunks(database)
    finally:
        database.close()
    result = cli.ok("ingest", str(folder))
    summary = out(result).strip().splitlines()[-1]
    assert summary.startswith("4 files: 3 added, 0 updated, 0 unchanged, 1 skipped; "), summary
    assert "c-poison.md: could not be stored: " in result.stderr
    database = cli.database()
    try:
        names = sorted(stored(database)["documents"])
        assert names == ["a-parking.md", "b-travel.md", "d-vacation.md"]
    finally:
        database.close()


def test_a_document_is_stored_in_slices_but_in_one_transaction(
    runtime: Runtime, embedder: MemoEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Slices of 50 rows (500 in production) over 120 chunks: a failure in the second slice
    # keeps the old version whole; a good write stores every chunk with its own vector.
    monkeypatch.setattr(ingest, "_STORE_BATCH", 50)

    def sections(poison_at: int | None) -> bytes:
        return "".join(
            f"## Part {i}\n\nSection {i} {'POISON' if i == poison_at else 'has its own'} text.\n\n"
            for i in range(120)
        ).encode()

    first = runtime.knowledge.ingest_bytes("upload:big.md", "big.md", GOOD.encode(), AccessList())
    assert first.status == "added"
    poison_chunks(runtime.database)
    failed = runtime.knowledge.ingest_bytes("upload:big.md", "big.md", sections(70), AccessList())
    assert failed.status == "skipped" and "could not be stored" in failed.reason, failed
    before = stored(runtime.database)
    assert before["counts"]["chunks"] == before["counts"]["chunk_embeddings"] == 1
    assert before["chunks"][0][1].startswith("Bicycles are parked")

    good = runtime.knowledge.ingest_bytes("upload:big.md", "big.md", sections(None), AccessList())
    assert (good.status, good.chunks) == ("updated", 120), good
    with runtime.database.session() as session:
        rows = session.execute(
            select(Chunk.ordinal, Chunk.heading_path, Chunk.text, ChunkEmbedding.embedding)
            .join(ChunkEmbedding, ChunkEmbedding.chunk_id == Chunk.id)
            .order_by(Chunk.ordinal)
        ).all()
    assert [r.ordinal for r in rows] == list(range(120))
    for row in (rows[0], rows[49], rows[50], rows[119]):
        expected = embedder.embed([embedding_text(good.title, row.heading_path, row.text)])[0]
        assert np.allclose(np.asarray(row.embedding, dtype=np.float32), expected, atol=1e-5)
