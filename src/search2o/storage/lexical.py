"""Lexical (keyword) search per backend, filtered by readable documents before ranking.

* SQLite: FTS5 with the Porter stemmer, ranked by BM25 (Robertson & Zaragoza 2009; SQLite FTS5
  documentation, "The bm25() function").
* PostgreSQL: a stored ``tsvector`` with a GIN index, ranked by ``ts_rank`` with normalisation
  1 (divided by 1 + log of the chunk's length, in the spirit of BM25's length normalisation;
  PostgreSQL manual 12.3.3). ``ts_rank_cd`` (cover density) measured 40 % slower per ranked row
  and fusion uses only the order.

Terms are OR-ed, not AND-ed: lexical results feed Reciprocal Rank Fusion, where recall matters
more than precision, and a question rarely repeats every word of its answer.

Ranking an OR query costs time in proportion to the rows that match any term, so very common
terms are left out when rarer ones remain, as Lucene's ``CommonTermsQuery`` does: a term is
*common* when it occurs in more than ``max(common_min_rows, common_fraction x rows)`` chunks.
Such a term adds little to BM25 (its IDF is at most ``ln(1 / common_fraction)``) while it can
match most of the corpus. Document frequencies come from FTS5's ``fts5vocab`` table on SQLite
and from the planner's lexeme statistics (``pg_stats.most_common_elems``, kept by ANALYZE) on
PostgreSQL; both are read once per change (a write of chunks on SQLite, an ANALYZE on
PostgreSQL) and cached per database.
"""

from __future__ import annotations

import functools
import re
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Float,
    Select,
    bindparam,
    column,
    func,
    literal_column,
    select,
    table,
    text,
    union_all,
)
from sqlalchemy.dialects.postgresql import TSVECTOR
from sqlalchemy.orm import Session

from search2o.storage import dialect
from search2o.storage.models import Chunk
from search2o.storage.vectors import KNOWLEDGE_COUNTER

__all__ = ["STOP_WORDS", "CommonTerms", "lexical_search", "query_terms"]

_WORD = re.compile(r"\w+", re.UNICODE)
_MAX_TERMS = 64


@dataclass(frozen=True)
class CommonTerms:
    """When a term counts as common (see the module docstring); defaults suit 2-core machines.

    Attributes:
        fraction: share of chunks above which a term is common.
        min_rows: a term in at most this many chunks is never common (small corpora keep all
            their terms: ranking them is cheap).
    """

    fraction: float = 0.01
    min_rows: int = 1000

    def cutoff(self, rows: int) -> float:
        """Return the document frequency above which a term is common in ``rows`` chunks."""
        return max(float(self.min_rows), self.fraction * rows)


# English function words that match nearly every chunk; from the Snowball English stop list
# (snowballstem.org/algorithms/english/stop.txt, which PostgreSQL's english.stop also uses).
STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only
    or other ought our ours ourselves out over own same she should so some such than that
    the their theirs them themselves then there these they this those through to too under
    until up very was we were what when where which while who whom why will with would you
    your yours yourself yourselves
    """.split()  # noqa: SIM905 - a word list reads better as text
)


def query_terms(query: str) -> list[str]:
    """Return the distinct lower-cased word tokens of ``query`` (at most 64), in order.

    Stop words are dropped unless nothing else is left (a query of only stop words keeps them).
    """
    seen: dict[str, None] = {}
    for word in _WORD.findall(query.lower()):
        seen.setdefault(word, None)
    words = list(seen)
    content = [w for w in words if w not in STOP_WORDS]
    return (content or words)[:_MAX_TERMS]


def lexical_search(
    session: Session,
    query: str,
    limit: int,
    readable: Select[int] | None,
    common: CommonTerms | None = None,
) -> list[tuple[int, float]]:
    """Return ``(chunk_id, score)`` pairs, best first, at most ``limit``.

    Args:
        query: free text; only its word tokens are used, so no query syntax can be injected.
        readable: a SELECT of readable document ids, or ``None`` when every document is.
        common: when a term is too common to rank; default :class:`CommonTerms`.

    Returns:
        Pairs where a higher score is better (BM25 negated on SQLite, ``ts_rank`` on PostgreSQL).
    """
    words = query_terms(query)
    if not words:
        return []
    backend = _Postgres if dialect.is_postgres(session) else _Sqlite
    frequencies, rows = backend.frequencies(session, words)
    if not frequencies:
        return []
    terms, required = _select_terms(frequencies, (common or CommonTerms()).cutoff(rows))
    found = backend.run(session, terms, required, limit, readable)
    if required and not found:  # no chunk has every common term: fall back to the rarest one
        rarest = min(frequencies, key=lambda t: frequencies[t])
        found = backend.run(session, [rarest], False, limit, readable)
    return found


def _select_terms(frequencies: dict[str, float], cutoff: float) -> tuple[list[str], bool]:
    """Choose the terms to match and whether all of them are required.

    Rare terms (document frequency at most ``cutoff``) are OR-ed and common ones left out; when
    every term is common they are AND-ed, as in Lucene's ``CommonTermsQuery``, which keeps both
    the cost and the result set small.

    Returns:
        ``(terms, all_required)``.
    """
    rare = [t for t, f in frequencies.items() if f <= cutoff]
    if rare:
        return rare, False
    return list(frequencies), len(frequencies) > 1


@functools.cache
def _porter() -> Any:
    """Return the stemmer FTS5's ``porter`` tokenizer matches (Porter's original algorithm)."""
    import snowballstemmer

    return snowballstemmer.stemmer("porter")


@dataclass
class _Statistics:
    """Chunk count and document frequencies by Porter stem as of one ``knowledge`` generation."""

    generation: int
    rows: int
    documents: dict[str, int]


# Per database (URL), the statistics of the current generation. ``fts5vocab`` counts a term's
# documents by walking its whole posting list (about 2 ms for a term in 20,000 of 100,000
# chunks), and the frequencies only change when the knowledge counter moves: every write of
# chunks bumps it in the same transaction (search2o.knowledge.ingest, .documents, .store).
_SQLITE_STATISTICS: dict[str, _Statistics] = {}
_MAX_CACHED_TERMS = 100_000
_GENERATION = text(f"SELECT value FROM counters WHERE name = '{KNOWLEDGE_COUNTER}'")
_FTS_VOCAB = text("SELECT term, doc FROM chunks_fts_vocab WHERE term IN :terms").bindparams(
    bindparam("terms", expanding=True)
)
_FTS_ROWS = text("SELECT count(*) FROM chunks")
_FTS_MATCH = text(
    "SELECT rowid, bm25(chunks_fts) AS rank FROM chunks_fts WHERE chunks_fts MATCH :match "
    "ORDER BY rank LIMIT :limit"
)


class _Sqlite:
    """FTS5: Porter-stemmed terms, BM25 ranking, ``fts5vocab`` document frequencies."""

    @staticmethod
    def frequencies(session: Session, words: list[str]) -> tuple[dict[str, float], int]:
        stems = dict(zip(words, _porter().stemWords(words), strict=True))
        # Plain SQL executed on the connection: the ORM's statement handling cost more than
        # these look-ups themselves (measured with pyinstrument at 100,000 chunks).
        connection = session.connection()
        generation = int(connection.execute(_GENERATION).scalar() or 0)
        key = str(connection.engine.url)
        cached = _SQLITE_STATISTICS.get(key)
        if cached is None or cached.generation != generation:
            rows = int(connection.execute(_FTS_ROWS).scalar() or 0)
            cached = _Statistics(generation, rows, {})
            _SQLITE_STATISTICS[key] = cached
        missing = sorted({stem for stem in stems.values() if stem not in cached.documents})
        if missing:
            found = dict.fromkeys(missing, 0)
            for term, doc in connection.execute(_FTS_VOCAB, {"terms": missing}):
                found[str(term)] = int(doc)
            if len(cached.documents) + len(found) > _MAX_CACHED_TERMS:
                cached.documents.clear()
            cached.documents.update(found)
        counts = cached.documents
        return {w: float(counts.get(stem, 0)) for w, stem in stems.items()}, cached.rows

    @staticmethod
    def run(
        session: Session,
        terms: list[str],
        required: bool,
        limit: int,
        readable: Select[int] | None,
    ) -> list[tuple[int, float]]:
        quoted = ['"' + t.replace('"', '""') + '"' for t in terms]
        match = (" AND " if required else " OR ").join(quoted)
        if readable is None:
            found = session.connection().execute(_FTS_MATCH, {"match": match, "limit": limit})
            return [(int(r[0]), -float(r[1])) for r in found]
        fts = table("chunks_fts", column("rowid"))
        rank = literal_column("bm25(chunks_fts)", Float).label("rank")
        stmt = (
            select(fts.c.rowid, rank)
            .select_from(fts)
            .where(literal_column("chunks_fts").op("MATCH")(match))
        )
        # The MATCH runs once, materialised, and the access filter joins it before ORDER BY and
        # LIMIT. A `rowid IN (...)` constraint on the FTS5 table instead makes SQLite re-run the
        # MATCH once per readable rowid (seconds at 100,000 chunks).
        matches = stmt.cte("matches").prefix_with("MATERIALIZED")
        filtered = (
            select(matches.c.rowid, matches.c.rank)
            .join(Chunk, Chunk.id == matches.c.rowid)
            .where(Chunk.document_id.in_(readable))
            .order_by(matches.c.rank)
            .limit(limit)
        )
        return [(int(r[0]), -float(r[1])) for r in session.execute(filtered)]


PRESELECT_FACTOR = 4
"""PostgreSQL, several rare terms: rows ranked by ``ts_rank`` per row wanted (see ``run``)."""
PRESELECT_MIN = 200

# One round trip per search: the query's lexemes, the planner's row estimate and when ANALYZE
# last ran on chunks. It also sets two planner options for the rest of the transaction:
# * parallel query off: the lexical statements take a few ms, and launching workers for them
#   cost more than it saved (measured: a Gather of 2 workers doubled the lexical time on this
#   project's loaded 2-core machine; PostgreSQL manual 15.4, "When Can Parallel Query Be Used?");
# * custom plans only: the driver prepares a statement run five times, and PostgreSQL may then
#   plan it once for any terms (a generic plan), while the best plan depends on how many rows
#   the terms match (manual 19.7.2, plan_cache_mode). Measured on 100 queries at 100,000
#   chunks: the OR-ed ranking's median fell from 5.3 to 4.4 ms.
_PG_QUERY = text(
    "SELECT set_config('max_parallel_workers_per_gather', '0', true), "
    "set_config('plan_cache_mode', 'force_custom_plan', true), "
    "ARRAY(SELECT unnest(tsvector_to_array(to_tsvector('english', :query)))), "
    "(SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = 'chunks'::regclass), "
    "greatest(pg_stat_get_last_analyze_time('chunks'::regclass), "
    "pg_stat_get_last_autoanalyze_time('chunks'::regclass))"
)
# The lexeme statistics themselves: thousands of elements at the column's statistics target
# (migration 0018), so they are read once per ANALYZE, not per search.
_PG_ELEMENTS = text(
    "SELECT most_common_elems::text::text[], most_common_elem_freqs FROM pg_stats "
    "WHERE schemaname = current_schema() AND tablename = 'chunks' AND attname = 'search_vector'"
)
PG_STATISTICS_MAX_AGE_S = 300.0
"""Seconds a cached copy of ``pg_stats`` serves before it is read again even without a newer
ANALYZE: the ANALYZE time is reported before its statistics commit, so a copy read in between
would otherwise serve until the next ANALYZE."""


@dataclass
class _PgStatistics:
    """Shares of rows per lexeme as of one ANALYZE of ``chunks`` (``analyzed`` its time)."""

    analyzed: Any
    read_at: float
    shares: dict[str, float]


# Per database (URL and schema): the lexeme shares of the last ANALYZE seen.
_PG_STATISTICS: dict[tuple[str, str], _PgStatistics] = {}


class _Postgres:
    """``tsvector`` + GIN: English-stemmed lexemes, ``ts_rank``, ``pg_stats`` frequencies."""

    @staticmethod
    def frequencies(session: Session, words: list[str]) -> tuple[dict[str, float], int]:
        connection = session.connection()
        row = connection.execute(_PG_QUERY, {"query": " ".join(words)}).one()
        _, _, lexemes, estimate, analyzed = row
        lexemes = list(lexemes or [])
        # ``analyzed`` is NULL where this server never ran ANALYZE itself, though pg_stats may
        # hold statistics: a hot standby gets them from its primary, and a crash or
        # pg_stat_reset() forgets the times. Such a copy is then read again by age alone.
        key = (str(connection.engine.url), str(connection.dialect.default_schema_name))
        cached = _PG_STATISTICS.get(key)
        now = time.monotonic()
        if (
            cached is None
            or cached.analyzed != analyzed
            or now - cached.read_at > PG_STATISTICS_MAX_AGE_S
        ):
            found = connection.execute(_PG_ELEMENTS).one_or_none()
            elements, element_shares = found if found is not None else (None, None)
            shares = dict(zip(elements or [], element_shares or [], strict=False))
            cached = _PgStatistics(analyzed, now, shares)
            _PG_STATISTICS[key] = cached
        if not cached.shares:  # not analyzed yet: every lexeme counts as rare
            return dict.fromkeys(lexemes, 0.0), 0
        # Shares of rows per lexeme; unlisted lexemes are rarer than every listed one. The row
        # count is the planner's estimate from the same ANALYZE, not a count(*) per query.
        rows = int(estimate or 0)
        return {lex: float(cached.shares.get(lex, 0.0)) * rows for lex in lexemes}, rows

    @staticmethod
    def run(
        session: Session,
        terms: list[str],
        required: bool,
        limit: int,
        readable: Select[int] | None,
    ) -> list[tuple[int, float]]:
        # Lexemes are already stemmed: the 'simple' configuration only lower-cases them.
        quoted = ["'" + x.replace("'", "''") + "'" for x in terms]
        tsquery = func.to_tsquery("simple", (" & " if required else " | ").join(quoted))
        vector = literal_column("chunks.search_vector", TSVECTOR)
        rank = func.ts_rank(vector, tsquery, 1)
        if required or len(terms) == 1:
            stmt = select(Chunk.id, rank).where(vector.op("@@")(tsquery))
            if readable is not None:
                stmt = stmt.where(Chunk.document_id.in_(readable))
            found = session.execute(stmt.order_by(rank.desc()).limit(limit)).all()
            return [(int(r[0]), float(r[1])) for r in found]
        # Several rare terms OR-ed: ts_rank costs about 3 us per matching row (it reads each
        # row's whole tsvector), and rows matching any of them run into thousands at 100,000
        # chunks. So the rows are first ordered by how many of the terms they hold, found
        # through the GIN index alone, shorter chunks first among equals (at one occurrence,
        # BM25 and ts_rank's length normalisation both favour the shorter text), and only the
        # first PRESELECT_FACTOR x limit are ranked by ts_rank.
        branches = []
        for term in quoted:
            one = func.to_tsquery("simple", term)
            branch = select(Chunk.id.label("id"), Chunk.token_count.label("tokens")).where(
                vector.op("@@")(one)
            )
            if readable is not None:
                branch = branch.where(Chunk.document_id.in_(readable))
            branches.append(branch)
        matched = union_all(*branches).subquery("matched")
        held = func.count().label("held")
        best = (
            select(matched.c.id)
            .group_by(matched.c.id, matched.c.tokens)
            .order_by(held.desc(), matched.c.tokens, matched.c.id)
            .limit(max(PRESELECT_FACTOR * limit, PRESELECT_MIN))
            .subquery("best")
        )
        stmt = select(Chunk.id, rank).join(best, best.c.id == Chunk.id)
        found = session.execute(stmt.order_by(rank.desc(), Chunk.id).limit(limit)).all()
        return [(int(r[0]), float(r[1])) for r in found]
