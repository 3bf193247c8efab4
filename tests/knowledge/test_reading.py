"""A document's whole text rebuilt from its chunks, read under the rules of search."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sqlalchemy import func, select

from search2o.errors import NotFoundError
from search2o.knowledge.access import AccessList
from search2o.knowledge.reading import assemble, read_document
from search2o.runtime import Runtime
from search2o.storage.models import Chunk
from tests.api.test_api import add_user

SENTENCES = [
    f"Sentence number {i} tells the reader fact {i * 7} about the office." for i in range(400)
]
LONG = (
    "# Office facts\n\n## First part\n\n"
    + " ".join(SENTENCES[:200])
    + "\n\n## Second part\n\n### Details\n\n"
    + " ".join(SENTENCES[200:])
    + "\n"
)


def test_assemble_opens_headings_and_drops_the_repeated_sentences() -> None:
    text = assemble(
        [
            (["A"], "One. Two. Three."),
            (["A"], "Two. Three. Four."),  # the chunker's overlap: whole sentences repeated
            (["A", "B"], "Five."),
            (["C"], "Three. Six."),  # another section: nothing is dropped
        ]
    )
    assert text == "# A\n\nOne. Two. Three.\n\nFour.\n\n## B\n\nFive.\n\n# C\n\nThree. Six."


def test_assemble_keeps_a_partial_repeat() -> None:
    # "wo." ends the previous chunk but is no whole sentence of the next one's start.
    assert assemble([([], "One. Two."), ([], "wo. Three.")]) == "One. Two.\n\nwo. Three."


def test_read_document_rebuilds_each_sentence_once_in_order(
    runtime: Runtime, tmp_path: Path
) -> None:
    path = tmp_path / "facts.md"
    path.write_text(LONG, encoding="utf-8")
    runtime.knowledge.ingest_paths([path], AccessList())
    [info] = runtime.knowledge.list_documents(runtime.local_principal())
    with runtime.database.session() as session:
        chunks = session.scalar(
            select(func.count()).select_from(Chunk).where(Chunk.document_id == info.id)
        )
        document = read_document(session, runtime.local_principal(), info.id, 1_000_000)
    assert chunks is not None and chunks > 3, "the text must span several chunks with overlap"
    found = re.findall(r"Sentence number (\d+) ", document.text)
    assert found == [str(i) for i in range(400)]
    assert document.text.startswith("# First part\n\n")
    assert "\n\n# Second part\n\n## Details\n\n" in document.text
    assert document.truncated is False and document.title == "Office facts"

    with runtime.database.session() as session:
        cut = read_document(session, runtime.local_principal(), info.id, 1000)
    assert cut.truncated is True and len(cut.text) == 1000
    assert document.text.startswith(cut.text)


def test_a_document_the_caller_may_not_read_is_missing(runtime: Runtime, tmp_path: Path) -> None:
    path = tmp_path / "ledger.md"
    path.write_text("# Ledger\n\nOnly hr reads the ledger.\n", encoding="utf-8")
    runtime.knowledge.ingest_paths([path], AccessList.build(groups=["hr"]))
    add_user(runtime, "hr@example.com", ("hr",))
    add_user(runtime, "admin@example.com", admin=True)
    add_user(runtime, "other@example.com")
    [info] = runtime.knowledge.list_documents(runtime.local_principal())
    with runtime.database.session() as session:
        reader = runtime.principal_for("hr@example.com")
        assert "Only hr reads" in read_document(session, reader, info.id, 10_000).text
        for email in ("other@example.com", "admin@example.com"):
            with pytest.raises(NotFoundError) as refused:
                read_document(session, runtime.principal_for(email), info.id, 10_000)
            with pytest.raises(NotFoundError) as missing:
                read_document(session, reader, info.id + 1, 10_000)
            assert refused.value.message == f"no document {info.id}"
            assert missing.value.message == f"no document {info.id + 1}"
