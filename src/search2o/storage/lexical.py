"""Lexical (keyword) search per backend, filtered by readable documents before ranking.

* SQLite: FTS5 with the Porter stemmer, ranked by BM25 (Robertson & Zaragoza 2009; SQLite FTS5
  documentation, "The bm25() function").
* PostgreSQL: a stored ``tsvector`` with a GIN index, ranked by ``ts_rank_cd`` (cover density,
  Clarke, Cormack & Tudhope 2000; PostgreSQL manual 12.3.3).

Terms are OR-ed, not AND-ed: lexical results feed Reciprocal Rank Fusion, where recall matters
more than precision, and a question rarely repeats every word of its answer.
"""

from __future__ import annotations

import re

from sqlalchemy import Float, Select, Text, cast, column, func, literal_column, select, table
from sqlalchemy.dialects.postgresql import TSQUERY, TSVECTOR
from sqlalchemy.orm import Session

from search2o.storage.models import Chunk

__all__ = ["STOP_WORDS", "lexical_search", "query_terms"]

_WORD = re.compile(r"\w+", re.UNICODE)
_MAX_TERMS = 64


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
    session: Session, query: str, limit: int, readable: Select[int] | None
) -> list[tuple[int, float]]:
    """Return ``(chunk_id, score)`` pairs, best first, at most ``limit``.

    Args:
        query: free text; only its word tokens are used, so no query syntax can be injected.
        readable: a SELECT of readable document ids, or ``None`` when every document is.

    Returns:
        Pairs where a higher score is better (BM25 negated on SQLite, ``ts_rank_cd`` on PostgreSQL).

    """
    terms = query_terms(query)
    if not terms:
        return []
    bind = session.get_bind()
    if bind.dialect.name == "postgresql":
        return _postgres(session, terms, limit, readable)
    return _sqlite(session, terms, limit, readable)


def _sqlite(
    session: Session, terms: list[str], limit: int, readable: Select[int] | None
) -> list[tuple[int, float]]:
    match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
    fts = table("chunks_fts", column("rowid"))
    rank = literal_column("bm25(chunks_fts)", Float).label("rank")
    stmt = (
        select(fts.c.rowid, rank)
        .select_from(fts)
        .where(literal_column("chunks_fts").op("MATCH")(match))
    )
    if readable is None:
        rows = session.execute(stmt.order_by(literal_column("rank")).limit(limit)).all()
        return [(int(r[0]), -float(r[1])) for r in rows]
    # The MATCH runs once, materialised, and the access filter joins it before ORDER BY/LIMIT.
    # A `rowid IN (...)` constraint on the FTS5 table instead makes SQLite re-run the MATCH
    # once per readable rowid (seconds at 100,000 chunks).
    matches = stmt.cte("matches").prefix_with("MATERIALIZED")
    filtered = (
        select(matches.c.rowid, matches.c.rank)
        .join(Chunk, Chunk.id == matches.c.rowid)
        .where(Chunk.document_id.in_(readable))
        .order_by(matches.c.rank)
        .limit(limit)
    )
    return [(int(r[0]), -float(r[1])) for r in session.execute(filtered)]


def _postgres(
    session: Session, terms: list[str], limit: int, readable: Select[int] | None
) -> list[tuple[int, float]]:
    # plainto_tsquery stems and drops stop words; its '&' are turned into '|' for OR semantics.
    plain = cast(func.plainto_tsquery("english", " ".join(terms)), Text)
    tsquery = cast(func.replace(plain, " & ", " | "), TSQUERY)
    vector = literal_column("chunks.search_vector", TSVECTOR)
    rank = func.ts_rank_cd(vector, tsquery)
    stmt = select(Chunk.id, rank).where(vector.op("@@")(tsquery))
    if readable is not None:
        stmt = stmt.where(Chunk.document_id.in_(readable))
    rows = session.execute(stmt.order_by(rank.desc()).limit(limit)).all()
    return [(int(r[0]), float(r[1])) for r in rows]
