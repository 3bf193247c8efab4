"""Fetch and write one batch of a source's documents: the unit a sync checkpoints and fans out.

A sync (:mod:`search2o.connectors.engine`) cuts the documents it must fetch into batches of
``connectors.batch_size`` keys. Each batch is fetched ``fetch_concurrency`` at a time, politely
(:mod:`~search2o.connectors.politeness`), and each document is written through the Knowledge
Store in its own transaction (only chunks whose text is new go through the model:
:mod:`search2o.knowledge.reuse`). The sync runs batches itself, or, with ``connectors.fan_out``,
as ``sources.batch`` jobs any ``serve`` or ``worker`` process takes
(:mod:`search2o.connectors.fanout`); both use this class.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from search2o.connectors.access import map_access
from search2o.connectors.contract import (
    Connector,
    CredentialsRejectedError,
    Fetched,
    RetryLaterError,
)
from search2o.connectors.politeness import Polite
from search2o.connectors.report import SyncCounts
from search2o.errors import Search2oError
from search2o.knowledge.ingest import Origin
from search2o.knowledge.store import KnowledgeStore

__all__ = ["BatchWriter", "document_source", "failure_reason"]


def document_source(source_name: str, key: str) -> str:
    """Return the Knowledge Store ``source`` of a synced document: ``<source name>:<key>``."""
    return f"{source_name}:{key}"


def failure_reason(exc: BaseException) -> str:
    """One line saying what went wrong: our message, or the error's type and text."""
    text = exc.message if isinstance(exc, Search2oError) else f"{type(exc).__name__}: {exc}"
    return " ".join(text.split())[:300]


class BatchWriter:
    """Fetches batches of one source's keys and writes each document, counting in ``counts``.

    Args:
        knowledge: where documents are written.
        source_id, source_name: the source the documents are tagged with.
        counts: the counts to add to (``fetched``, ``added``, ``updated``, ``unchanged``,
            ``failed``, ``embedded``).
        polite: the source's rate limit and retries.
        concurrency: fetches at once.

    """

    def __init__(
        self,
        knowledge: KnowledgeStore,
        source_id: int,
        source_name: str,
        counts: SyncCounts,
        polite: Polite,
        concurrency: int,
    ) -> None:
        self.knowledge = knowledge
        self.source_id = source_id
        self.source_name = source_name
        self.counts = counts
        self.polite = polite
        self.concurrency = concurrency

    def write_batch(
        self,
        connector: Connector,
        keys: list[str],
        after_each: Callable[[], None] | None = None,
    ) -> None:
        """Fetch ``keys`` (``concurrency`` at once) and write each document, in key order.

        A document that cannot be fetched or read is counted as failed and skipped.

        Raises:
            CredentialsRejectedError: the source refused its credentials (nothing after the
                key that met it is written).
            RetryLaterError: the source asked for a wait longer than the inline bound.

        """
        with ThreadPoolExecutor(self.concurrency) as pool:
            results = list(pool.map(lambda key: self._fetch(connector, key), keys))
        for key, result in zip(keys, results, strict=True):
            self.write(key, result)
            if after_each is not None:
                after_each()

    def _fetch(self, connector: Connector, key: str) -> Fetched | BaseException:
        try:
            return self.polite.call(lambda: connector.fetch(key))
        except Exception as exc:
            return exc

    def write(self, key: str, result: Fetched | BaseException) -> None:
        """Write one fetched document (or count its fetch failure); see :meth:`write_batch`."""
        if isinstance(result, CredentialsRejectedError | RetryLaterError):
            raise result
        if isinstance(result, BaseException):
            self.counts.fail(key, f"could not be fetched: {failure_reason(result)}")
            return
        self.counts.fetched += 1
        access, _ = map_access(result.access)
        origin = Origin(self.source_id, key, result.version, result.url, result.title)
        outcome = self.knowledge.ingest_bytes(
            document_source(self.source_name, key), result.filename, result.data, access, origin
        )
        self.counts.embedded += outcome.embedded
        if outcome.status == "skipped":
            self.counts.fail(key, outcome.reason)
        elif outcome.status == "added":
            self.counts.added += 1
        elif outcome.status == "updated":
            self.counts.updated += 1
        else:
            self.counts.unchanged += 1
