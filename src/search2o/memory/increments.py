"""Bring a user's cached memory vectors up to date by reading only the rows written since.

PostgreSQL only. Reading all of a user's vectors costs 5 ms at 500 memories (770 KB through
the socket; the statement itself runs in 1.4 ms), more than the whole search it serves. After
one write, all but a few rows are what the cache already holds, and PostgreSQL tells which:
every row version carries ``xmin``, the transaction that wrote it. So an outdated entry of
:class:`search2o.memory.cache.VectorCache` is refreshed in two short statements:

1. the ids and versions of the scope's rows (and the stale ids), ordered by id;
2. the vectors and term hashes of the rows whose ``(id, version)`` the entry does not hold.

A committed row version is identified by its id and ``xmin``: another version of the row is
written by another transaction (an update inside one transaction is only ever seen by that
transaction, and a search through the cache never runs inside a writer's transaction). The
32-bit transaction ids wrap around after about four billion transactions; a row rewritten by
the very transaction id that wrote the version cached that long ago would keep its old vector
in this process until the next write of that user, or a restart.
"""

from __future__ import annotations

import functools

import numpy as np
from sqlalchemy.orm import Session

from search2o.memory.ranking import (
    PG_IDS,
    PG_LENGTHS,
    PG_RECORDS,
    PG_STALE,
    PG_TERMS,
    PG_VERSIONS,
    Vectors,
    pg_aggregate,
    pg_matrix,
    pg_scope,
    split_blobs,
)
from search2o.storage import dialect

__all__ = ["MOST_CHANGED", "refreshed"]

MOST_CHANGED = 0.25
"""Above this share of changed rows ``refreshed`` gives up and the caller reads them all.

Reading rows costs about its share of a full read (the vectors dominate), and the ids and
versions statement comes on top; beyond a quarter the saving is small. Chosen, not tuned.
"""


def refreshed(
    session: Session,
    previous: Vectors,
    model_id: str,
    user_id: int,
    agent: str | None,
    label: str | None,
) -> Vectors | None:
    """Return ``previous`` brought up to date, reading only the rows written since it was read.

    Args:
        previous: an outdated entry of the same scope, with ``versions`` (PostgreSQL).
        model_id, user_id, agent, label: the scope, as for
            :func:`search2o.memory.ranking.vectors`.

    Returns:
        The scope's memories now, as :func:`~search2o.memory.ranking.vectors` would read them;
        ``None`` when more than :data:`MOST_CHANGED` of the rows changed, or rows changed again
        between the two statements: the caller reads them all.

    Raises:
        StorageError: the database failed.

    """
    if previous.versions is None:
        return None
    by_agent, by_label = agent is not None, label is not None
    params = {"user_id": user_id, "agent": agent, "label": label, "model_id": model_id}
    ids_read, versions_read, stale = dialect.fetch_one_binary(
        session, _versions_statement(by_agent, by_label), params
    )
    ids = np.asarray(ids_read or [], dtype=np.int64)
    versions = np.asarray(versions_read or [], dtype=np.int64)
    known = dict(zip(previous.ids.tolist(), previous.versions.tolist(), strict=True))
    changed = np.asarray(
        [known.get(i) != v for i, v in zip(ids.tolist(), versions.tolist(), strict=True)],
        dtype=bool,
    )
    wanted = ids[changed]
    if wanted.size > MOST_CHANGED * max(ids.size, 1):
        return None
    if not ids.size:
        return Vectors.none(list(stale or []), ids)
    matrix = np.empty((ids.size, previous.matrix.shape[1]), np.float32)
    terms: list[bytes] = [b""] * ids.size
    kept = np.nonzero(~changed)[0]
    at = np.searchsorted(previous.ids, ids[kept])
    matrix[kept] = previous.matrix[at]
    for index, old in zip(kept.tolist(), at.tolist(), strict=True):
        terms[index] = previous.terms[old]
    if wanted.size:
        params["ids"] = wanted.tolist()
        new_ids, blob, term_blob, lengths, new_versions = dialect.fetch_one_binary(
            session, _rows_statement(), params
        )
        if new_ids is None or not np.array_equal(np.asarray(new_ids), wanted):
            return None  # deleted or made stale in between
        if not np.array_equal(np.asarray(new_versions, dtype=np.int64), versions[changed]):
            return None  # written again in between
        fresh = pg_matrix(bytes(blob), wanted)
        if fresh.shape[1] != matrix.shape[1] and kept.size:
            return None
        if not kept.size:
            matrix = fresh
        else:
            matrix[changed] = fresh
        for index, blob_of_row in zip(
            np.nonzero(changed)[0].tolist(), split_blobs(term_blob, lengths), strict=True
        ):
            terms[index] = blob_of_row
    return Vectors(ids, matrix, terms, list(stale or []), versions)


@functools.lru_cache(maxsize=8)
def _versions_statement(by_agent: bool, by_label: bool) -> str:
    """Ids and versions of the scope's current rows (ascending ids), then its stale ids."""
    return pg_aggregate([PG_IDS, PG_VERSIONS, PG_STALE], pg_scope(by_agent, by_label))


@functools.lru_cache(maxsize=1)
def _rows_statement() -> str:
    """Ids, vector records, term blobs, their lengths and versions of some current rows."""
    columns = [PG_IDS, PG_RECORDS, PG_TERMS, PG_LENGTHS, PG_VERSIONS]
    return pg_aggregate(columns, "user_id = %(user_id)s AND id = ANY(%(ids)s)")
