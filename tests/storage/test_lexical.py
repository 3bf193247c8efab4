"""Lexical search on both backends: stop words, common-term pruning, AND fallback, filters."""

from __future__ import annotations

import pytest
from sqlalchemy import insert, text

from search2o.accounts import Principal
from search2o.knowledge.access import readable_filter
from search2o.storage.db import Database, bump_counter
from search2o.storage.lexical import CommonTerms, _select_terms, lexical_search, query_terms
from search2o.storage.models import Chunk, Document, DocumentAccess, utcnow
from search2o.storage.vectors import KNOWLEDGE_COUNTER

TEXTS = [
    "office policy on parking garage spaces",  # 1
    "office policy on bicycle racks",  # 2
    "office policy on remote work stipend",  # 3
    "office policy on parking permits for visitors",  # 4
    "office coffee machine cleaning schedule",  # 5
    "holiday calendar for the office",  # 6
]


def _load(database: Database, restricted: set[int] = frozenset()) -> None:
    now = utcnow()
    with database.session() as session:
        session.execute(
            insert(Document),
            [
                {
                    "id": i,
                    "source": f"d{i}",
                    "title": f"d{i}",
                    "media_type": "text/plain",
                    "content_hash": "x",
                    "size_bytes": 1,
                    "chunk_count": 1,
                    "is_public": i not in restricted,
                    "created_at": now,
                    "updated_at": now,
                }
                for i in range(1, len(TEXTS) + 1)
            ],
        )
        session.execute(
            insert(Chunk),
            [
                {
                    "id": i,
                    "document_id": i,
                    "ordinal": 0,
                    "heading": "",
                    "heading_path": [],
                    "text": t,
                    "token_count": 6,
                }
                for i, t in enumerate(TEXTS, start=1)
            ],
        )
        if restricted:
            session.execute(
                insert(DocumentAccess),
                [{"document_id": i, "principal": "group:hr"} for i in restricted],
            )
    if database.backend == "postgresql":
        with database.engine.connect() as conn:  # the planner's lexeme statistics
            conn.execute(text("ANALYZE chunks"))
            conn.commit()


def _ids(pairs: list[tuple[int, float]]) -> list[int]:
    return [cid for cid, _ in pairs]


def test_query_terms_drop_stop_words_unless_nothing_else_is_left() -> None:
    assert query_terms("How many vacation days do we get?") == ["many", "vacation", "days", "get"]
    assert query_terms("what is it") == ["what", "is", "it"]
    assert query_terms("  ... !!") == []


def test_select_terms_prefers_rare_terms_and_requires_all_common_ones() -> None:
    assert _select_terms({"parking": 2, "office": 6}, cutoff=3) == (["parking"], False)
    assert _select_terms({"office": 6, "policy": 4}, cutoff=3) == (["office", "policy"], True)
    assert _select_terms({"office": 6}, cutoff=3) == (["office"], False)
    assert CommonTerms(0.01, 1000).cutoff(50_000) == 1000
    assert CommonTerms(0.01, 1000).cutoff(500_000) == 5000


def test_all_terms_rank_when_none_is_common(database: Database) -> None:
    _load(database)
    with database.session() as session:
        found = _ids(lexical_search(session, "parking office", 10, None))
    assert set(found) == {1, 2, 3, 4, 5, 6}  # OR of both terms: every chunk says "office"
    assert set(found[:2]) == {1, 4}  # the chunks with both terms rank first


def test_common_terms_are_left_out_when_a_rare_one_remains(database: Database) -> None:
    _load(database)
    common = CommonTerms(fraction=0.5, min_rows=0)  # "office" (6/6) and "policy" (4/6) common
    with database.session() as session:
        found = _ids(lexical_search(session, "office policy parking", 10, None, common))
    assert set(found) == {1, 4}


def test_all_common_terms_are_required_and_fall_back_to_the_rarest(database: Database) -> None:
    _load(database)
    common = CommonTerms(fraction=0.5, min_rows=0)
    with database.session() as session:
        both = _ids(lexical_search(session, "office policy", 10, None, common))
        assert set(both) == {1, 2, 3, 4}  # AND: chunks 5 and 6 lack "policy"
        # no chunk has all three common-ish words: the rarest alone is searched
        none_all = _ids(
            lexical_search(
                session, "office policy holiday", 10, None, CommonTerms(fraction=0.1, min_rows=0)
            )
        )
    assert none_all == [6]


def test_filter_applies_before_ranking(database: Database) -> None:
    _load(database, restricted={1, 4})
    outsider = Principal(9, "x@example.com", ())
    insider = Principal(8, "y@example.com", ("hr",))
    with database.session() as session:
        assert 1 not in _ids(
            lexical_search(session, "parking", 10, readable_filter(session, outsider))
        )
        assert (
            _ids(lexical_search(session, "parking", 10, readable_filter(session, outsider))) == []
        )
        assert set(
            _ids(lexical_search(session, "parking", 10, readable_filter(session, insider)))
        ) == {1, 4}


@pytest.mark.parametrize("query", ['"', "NOT AND OR", "a*b:c|d&e!", "ünïcödé straße", "'; DROP"])
def test_query_syntax_cannot_be_injected(database: Database, query: str) -> None:
    _load(database)
    with database.session() as session:
        assert lexical_search(session, query, 5, None) == []
        assert session.scalar(text("SELECT count(*) FROM chunks")) == len(TEXTS)


def test_several_rare_terms_rank_the_chunk_holding_most_of_them_first(database: Database) -> None:
    _load(database, restricted={4})
    with database.session() as session:
        found = _ids(lexical_search(session, "parking visitors bicycle", 10, None))
        outsider = readable_filter(session, Principal(9, "x@example.com", ()))
        filtered = _ids(lexical_search(session, "parking visitors bicycle", 10, outsider))
    assert found[0] == 4  # parking and visitors
    assert set(found) == {1, 2, 4}
    assert set(filtered) == {1, 2}  # the access filter applies before the pre-ranking


def test_new_statistics_are_read_after_the_corpus_changes(database: Database) -> None:
    """The cached frequencies follow the corpus: a new ANALYZE (PostgreSQL) or a write of
    chunks (SQLite) makes a term that has become common count as common."""
    _load(database)
    common = CommonTerms(fraction=0.5, min_rows=0)
    with database.session() as session:
        before = _ids(lexical_search(session, "policy parking", 20, None, common))
    assert set(before) == {1, 4}  # "policy" (4 of 6) is common, "parking" (2 of 6) is rare
    with database.session() as session:
        session.execute(
            insert(Chunk),
            [
                {
                    "id": i,
                    "document_id": 6,
                    "ordinal": i,
                    "heading": "",
                    "heading_path": [],
                    "text": f"parking lot number {i}",
                    "token_count": 4,
                }
                for i in range(7, 17)
            ],
        )
        bump_counter(session, KNOWLEDGE_COUNTER)
    if database.backend == "postgresql":
        with database.engine.connect() as conn:
            conn.execute(text("ANALYZE chunks"))
            conn.commit()
    with database.session() as session:
        after = _ids(lexical_search(session, "policy parking", 20, None, common))
    assert set(after) == {1, 2, 3, 4}  # now "parking" (12 of 16) is common, "policy" rare


def test_statistics_without_an_analyze_time_still_count(database: Database) -> None:
    """A hot standby, or a server whose activity statistics were reset, has pg_stats but no
    ANALYZE time: the lexeme statistics are used all the same."""
    if database.backend != "postgresql":
        pytest.skip("ANALYZE times are PostgreSQL's")
    _load(database)
    with database.engine.connect() as conn:
        conn.execute(text("SELECT pg_stat_reset()"))
        conn.commit()
        analyzed = conn.execute(
            text("SELECT pg_stat_get_last_analyze_time('chunks'::regclass)")
        ).scalar()
    assert analyzed is None
    with database.session() as session:
        found = _ids(lexical_search(session, "policy parking", 20, None, CommonTerms(0.5, 0)))
    assert set(found) == {1, 4}  # "policy" (4 of 6) is still known to be common
