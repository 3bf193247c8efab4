"""One sync: bring a source's documents in line with the source, safely and incrementally.

In order (docs/connectors.md; DESIGN.md, "Sources and sync"):

1. **claim** the source's lease (one sync per source; a dead sync's lease is taken over and its
   checkpoint resumed);
2. **list** every document with its version (or, with a changes feed and a cursor, read only
   what changed); a listing is complete only if the connector returned
   ``ListingEnd(complete=True)``;
3. **diff** against the stored versions: new, changed, access-only, unchanged, missing;
4. **fetch** only new and changed documents, ``batch_size`` at a time, ``fetch_concurrency``
   at once, politely (:mod:`~search2o.connectors.politeness`); with ``connectors.fan_out``
   the batches are jobs every consumer shares (:mod:`~search2o.connectors.fanout`);
5. **write** each through the Knowledge Store in one transaction: an unchanged content hash
   stores the new version alone, a changed one embeds only the chunks whose text is new
   (:mod:`search2o.knowledge.reuse`); an access-only change rewrites the access list alone;
6. **checkpoint** after every batch (counts, lease renewed), so a killed sync resumes;
7. **prune** missing keys only after a complete listing (or an explicit delete event), and
   only under ``connectors.max_delete_share`` of the source's documents; a listing of none
   where there were some is suspect, never a mass deletion;
8. **record** counts, cursor, ``last_success`` or ``last_error``, and release the lease.

A fault never turns into deletions: a failed, partial or interrupted listing prunes nothing
and is recorded as ``last_error``; a document that fails is counted and skipped; rejected
credentials stop the source; a long ``Retry-After`` checkpoints and reschedules the sync.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from search2o.connectors.access import map_access
from search2o.connectors.batch import BatchWriter, document_source, failure_reason
from search2o.connectors.contract import (
    Connector,
    CredentialsRejectedError,
    CursorRejectedError,
    Listed,
    ListingEnd,
    RetryLaterError,
)
from search2o.connectors.politeness import Polite
from search2o.connectors.report import Progress, SyncCounts, SyncReport
from search2o.connectors.settings import ConnectorsSettings
from search2o.connectors.sources import Sources, lease_holder
from search2o.errors import ConflictError, Search2oError
from search2o.knowledge.store import KnowledgeStore
from search2o.storage.models import Document, DocumentAccess, Source, utcnow

if TYPE_CHECKING:
    from search2o.connectors.fanout import BatchOutcome, FanOut

__all__ = ["SyncEngine"]

log = logging.getLogger("search2o.connectors")

MAX_KEY_CHARS = 1000
MAX_VERSION_CHARS = 500


@dataclass
class _Stored:
    id: int
    version: str | None
    access: set[str]
    updated_at: datetime


class _StopError(Exception):
    """Ends a sync early with a status and an error (rejected credentials, a long wait)."""

    def __init__(self, status: str, error: str, next_sync_at: datetime | None = None) -> None:
        super().__init__(error)
        self.status = status
        self.error = error
        self.next_sync_at = next_sync_at


class SyncEngine:
    """Runs syncs of the sources of one Knowledge Store.

    Args:
        knowledge: where documents are written.
        sources: the configured sources.
        settings: the ``connectors`` section.
        sleep: how to wait (tests pass a recorder).
        fan_out: with ``connectors.fan_out``, what runs batches as jobs on the queue
            (:mod:`search2o.connectors.fanout`); ``None``: this process runs every batch.

    """

    def __init__(
        self,
        knowledge: KnowledgeStore,
        sources: Sources,
        settings: ConnectorsSettings,
        sleep: Callable[[float], None] = time.sleep,
        fan_out: FanOut | None = None,
    ) -> None:
        self.knowledge = knowledge
        self.sources = sources
        self.settings = settings
        self.sleep = sleep
        self.fan_out = fan_out

    def sync(
        self,
        name: str,
        *,
        full: bool = False,
        allow_mass_delete: bool = False,
        on_progress: Progress | None = None,
        holder: str | None = None,
    ) -> SyncReport:
        """Sync the source ``name`` (see the module docstring).

        Args:
            full: list everything even when a changes feed and cursor exist.
            allow_mass_delete: accept deleting more than ``max_delete_share`` (or all).
            on_progress: progress callback.
            holder: the lease holder name (default: this process).

        Raises:
            NotFoundError: no such source.
            ConflictError: a sync of it is running.

        """
        holder = holder or lease_holder()
        started = time.perf_counter()
        row = self.sources.claim(name, holder, self.settings.lease_s)
        try:
            run = _Run(self, row, holder, on_progress or (lambda phase, counts, total: None))
        except BaseException:
            self.sources.release(row.id, holder, status="idle")
            raise
        try:
            report = run.execute(full=full, allow_mass_delete=allow_mass_delete)
        except BaseException as exc:  # a bug, the database, Ctrl-C: keep the checkpoint
            run.abandon(exc)
            raise
        return SyncReport(
            name,
            run.counts,
            report.complete,
            report.error,
            report.status,
            time.perf_counter() - started,
            run.resumed,
        )


@dataclass(frozen=True)
class _Outcome:
    complete: bool
    error: str | None
    status: str


class _Run:
    """The state of one sync while it runs."""

    def __init__(self, engine: SyncEngine, row: Source, holder: str, progress: Progress) -> None:
        self.engine = engine
        self.row = row
        self.holder = holder
        self.progress = progress
        self.settings = engine.settings
        checkpoint = row.checkpoint or {}
        self.resumed = bool(checkpoint)
        self.counts = SyncCounts.of(checkpoint.get("counts")) if self.resumed else SyncCounts()
        self.ran_before = self.counts.seconds
        self.clock_start = time.perf_counter()
        began = checkpoint.get("started_at") if self.resumed else None
        self.started_at = datetime.fromisoformat(began) if began else utcnow()
        self.polite = Polite(
            self.settings.requests_per_s,
            self.settings.retries,
            self.settings.max_inline_wait_s,
            sleep=engine.sleep,
        )
        self.writer = BatchWriter(
            engine.knowledge,
            row.id,
            row.name,
            self.counts,
            self.polite,
            self.settings.fetch_concurrency,
        )
        self.engine.sources.renew(
            row.id,
            holder,
            self.settings.lease_s,
            checkpoint=self._checkpoint(),
            last_started_at=self.started_at,
        )

    # --- the sync ---------------------------------------------------------------------------

    def execute(self, *, full: bool, allow_mass_delete: bool) -> _Outcome:
        connector: Connector | None = None
        try:
            connector = self.engine.sources.connector(self.row)
            connector.bind(self.polite.call)
            stored = self._stored()
            cursor = self.row.cursor
            if connector.supports_changes and cursor and not full:
                try:
                    return self._by_changes(connector, stored, cursor, allow_mass_delete)
                except CursorRejectedError as exc:
                    log.info("source.cursor_rejected", extra={"fields": {"source": self.row.name}})
                    self.counts.failures.append(f"change cursor rejected ({exc.message}); full")
            return self._by_listing(connector, stored, allow_mass_delete)
        except _StopError as stop:
            return self._finish(
                False,
                stop.error,
                stop.status,
                next_sync_at=stop.next_sync_at,
                keep_checkpoint=stop.next_sync_at is not None,
            )
        finally:
            if connector is not None:
                connector.close()

    def _by_listing(
        self, connector: Connector, stored: dict[str, _Stored], allow_mass_delete: bool
    ) -> _Outcome:
        next_cursor = self._call(connector.start_cursor)
        listed, end = self._list(connector)
        self._apply(connector, listed, stored)
        if not end.complete:
            return self._finish(False, f"the listing was incomplete: {end.reason}; nothing deleted")
        missing = [key for key in stored if key not in listed]
        problem = self._prune(missing, stored, len(listed), allow_mass_delete)
        if problem is not None:
            return self._finish(True, problem, "blocked", cursor=next_cursor)
        return self._finish(True, None, cursor=next_cursor)

    def _by_changes(
        self, connector: Connector, stored: dict[str, _Stored], cursor: str, allow: bool
    ) -> _Outcome:
        try:
            changes = self._call(lambda: connector.changes(cursor))
        except (_StopError, CursorRejectedError):
            raise
        except Exception as exc:  # the feed failed: nothing applied, nothing deleted
            reason = failure_reason(exc)
            return self._finish(False, f"the changes feed failed: {reason}; nothing deleted")
        listed = {item.key: item for item in changes.changed if self._valid(item)}
        self.counts.listed += len(listed)
        self._apply(connector, listed, stored)
        gone = [key for key in changes.deleted if key in stored and key not in listed]
        # What the feed did not mention is unchanged, as a listing would have found it.
        self.counts.unchanged += len(stored) - len(gone) - sum(1 for k in listed if k in stored)
        problem = self._prune(gone, stored, None, allow)
        if problem is not None:
            return self._finish(True, problem, "blocked")
        return self._finish(True, None, cursor=changes.cursor or cursor)

    def _list(self, connector: Connector) -> tuple[dict[str, Listed], ListingEnd]:
        listed: dict[str, Listed] = {}
        end = ListingEnd(False, "the listing did not end")
        items = connector.listing()
        try:
            while True:
                try:
                    item = next(items)
                except StopIteration as stop:
                    value = stop.value
                    end = (
                        value
                        if isinstance(value, ListingEnd)
                        else ListingEnd(False, "the connector did not say the listing completed")
                    )
                    break
                if self._valid(item):
                    listed[item.key] = item
                if len(listed) % 1000 == 0:
                    self.progress("listing", self.counts, None)
        except CredentialsRejectedError as exc:
            raise self._rejected(exc) from exc
        except RetryLaterError as exc:
            raise self._later(exc) from exc
        except Exception as exc:  # any fault of the listing: incomplete, never deletions
            reason = (
                exc.message if isinstance(exc, Search2oError) else f"{type(exc).__name__}: {exc}"
            )
            end = ListingEnd(False, f"the listing failed: {reason}")
            log.warning(
                "source.listing_failed",
                extra={"fields": {"source": self.row.name, "reason": reason}},
            )
        self.counts.listed = len(listed)
        return listed, end

    def _valid(self, item: Listed) -> bool:
        if not item.key or len(item.key) > MAX_KEY_CHARS or len(item.version) > MAX_VERSION_CHARS:
            self.counts.fail(item.key[:100], "key or version over its bound; skipped")
            return False
        return True

    def _apply(
        self, connector: Connector, listed: dict[str, Listed], stored: dict[str, _Stored]
    ) -> None:
        fetch: list[str] = []
        for key, item in listed.items():
            known = stored.get(key)
            if known is None or known.version != item.version:
                fetch.append(key)
            elif (
                item.access is not None
                and (access := map_access(item.access)[0]).entries() != known.access
            ):
                self.engine.knowledge.set_access(document_source(self.row.name, key), access)
                self.counts.updated += 1
            elif known.updated_at < self.started_at:
                self.counts.unchanged += 1  # written by this sync before a resume: counted then
        total = len(fetch)
        if total:
            self.progress("fetching", self.counts, total)
        size = self.settings.batch_size
        batches = [fetch[start : start + size] for start in range(0, total, size)]
        fan_out = self.engine.fan_out
        if fan_out is not None and len(batches) > 1:
            fan_out.run(
                self.row.id,
                self.holder,
                batches,
                on_done=lambda outcome: self._batch_done(outcome, total),
                on_failed=self._batch_failed,
                tick=self._save,
            )
            return
        for batch in batches:
            try:
                self.writer.write_batch(connector, batch)
            except CredentialsRejectedError as exc:
                raise self._rejected(exc) from exc
            except RetryLaterError as exc:
                raise self._later(exc) from exc
            self._save()
            self.progress("fetching", self.counts, total)

    def _batch_done(self, outcome: BatchOutcome, total: int) -> None:
        """Add a fanned-out batch's counts; stop the sync as its stop says."""
        if outcome.superseded:  # the lease moved on: this sync is no longer the source's
            raise ConflictError("this sync's lease was taken over by another; it stops")
        self.counts.add(outcome.counts)
        self.progress("fetching", self.counts, total)
        if outcome.stop == "rejected":
            raise self._rejected(CredentialsRejectedError(outcome.message))
        if outcome.stop == "later":
            raise self._later(RetryLaterError(outcome.after_s))

    def _batch_failed(self, keys: list[str], error: str) -> None:
        """Count each document of a batch job that failed for good."""
        for key in keys:
            self.counts.fail(key, f"its batch failed: {error}")

    def _prune(
        self,
        missing: list[str],
        stored: dict[str, _Stored],
        listed: int | None,
        allow_mass_delete: bool,
    ) -> str | None:
        """Delete ``missing`` unless it looks like a mass deletion; return why not, or None."""
        if not missing:
            return None
        have = len(stored)
        share = self.settings.max_delete_share
        fix = f"run `search2o sources sync {self.row.name} --allow-mass-delete` to accept"
        floor = self.settings.mass_delete_floor
        if not allow_mass_delete:
            if listed == 0:
                return (
                    f"the source listed no document where {have} are stored: suspect, so "
                    f"nothing was deleted; if the source is really empty, {fix}"
                )
            if len(missing) > max(share * have, floor):
                return (
                    f"this sync would delete {len(missing)} of {have} documents "
                    f"({100 * len(missing) / have:.0f}%, over connectors.max_delete_share "
                    f"{100 * share:.0f}% and more than connectors.mass_delete_floor {floor}), "
                    f"so nothing was deleted; {fix}"
                )
        self.progress("deleting", self.counts, len(missing))
        ids = [stored[key].id for key in missing]
        for start in range(0, len(ids), 500):
            self.counts.deleted += self.engine.knowledge.delete_documents(ids[start : start + 500])
        return None

    # --- state ------------------------------------------------------------------------------

    def _stored(self) -> dict[str, _Stored]:
        with self.engine.knowledge.database.session() as session:
            rows = session.execute(
                select(
                    Document.id, Document.source_key, Document.version, Document.updated_at
                ).where(Document.source_id == self.row.id)
            ).all()
            access: dict[int, set[str]] = {}
            for document_id, principal in session.execute(
                select(DocumentAccess.document_id, DocumentAccess.principal)
                .join(Document, Document.id == DocumentAccess.document_id)
                .where(Document.source_id == self.row.id)
            ):
                access.setdefault(document_id, set()).add(principal)
        return {
            str(key): _Stored(doc_id, version, access.get(doc_id, set()), updated)
            for doc_id, key, version, updated in rows
            if key is not None
        }

    def _snapshot(self) -> dict[str, Any]:
        self.counts.seconds = round(self.ran_before + time.perf_counter() - self.clock_start, 3)
        return self.counts.to_json()

    def _checkpoint(self) -> dict[str, Any]:
        return {"started_at": self.started_at.isoformat(), "counts": self._snapshot()}

    def _save(self) -> None:
        self.engine.sources.renew(
            self.row.id,
            self.holder,
            self.settings.lease_s,
            checkpoint=self._checkpoint(),
            progress=self._snapshot(),
        )

    def _finish(
        self,
        complete: bool,
        error: str | None,
        status: str = "idle",
        *,
        cursor: str | None = None,
        next_sync_at: datetime | None = None,
        keep_checkpoint: bool = False,
    ) -> _Outcome:
        now = utcnow()
        values: dict[str, Any] = {
            "status": status,
            "checkpoint": self._checkpoint() if keep_checkpoint else None,
            "progress": self._snapshot(),
            "last_counts": self._snapshot(),
        }
        if cursor is not None:
            values["cursor"] = cursor
        if error is None:
            values.update(last_success_at=now, last_error=None, last_error_at=None)
        else:
            values.update(last_error=error, last_error_at=now)
        if next_sync_at is not None:
            values["next_sync_at"] = next_sync_at
        elif self.row.schedule_s:
            values["next_sync_at"] = now + timedelta(seconds=self.row.schedule_s)
        else:
            values["next_sync_at"] = None
        if status == "stopped":
            values["auth_failures"] = self.row.auth_failures + 1
        self.engine.sources.release(self.row.id, self.holder, **values)
        log.info(
            "source.synced",
            extra={
                "fields": {
                    "source": self.row.name,
                    "status": status,
                    "complete": complete,
                    "error": error,
                    **{k: v for k, v in self.counts.to_json().items() if k != "failures"},
                }
            },
        )
        return _Outcome(complete, error, status)

    def abandon(self, exc: BaseException) -> None:
        """Give the lease back after an unexpected error, keeping the checkpoint to resume."""
        if isinstance(exc, ConflictError):  # the lease is someone else's now
            return
        try:
            self.engine.sources.release(
                self.row.id,
                self.holder,
                status="idle",
                last_error=f"the sync stopped: {type(exc).__name__}: {exc}"[:2000],
                last_error_at=utcnow(),
                progress=self._snapshot(),
            )
        except Exception:  # the database itself is gone: the lease runs out instead
            log.exception("source.release_failed", extra={"fields": {"source": self.row.name}})

    # --- faults -----------------------------------------------------------------------------

    def _call(self, request: Callable[[], Any]) -> Any:
        try:
            return self.polite.call(request)
        except CredentialsRejectedError as exc:
            raise self._rejected(exc) from exc
        except RetryLaterError as exc:
            raise self._later(exc) from exc

    def _rejected(self, exc: CredentialsRejectedError) -> _StopError:
        return _StopError(
            "stopped",
            f"the source rejected its credentials ({exc.message}); it is stopped and nothing "
            f"was deleted: set new credentials (search2o sources update {self.row.name})",
        )

    def _later(self, exc: RetryLaterError) -> _StopError:
        at = utcnow() + timedelta(seconds=exc.after_s)
        self._save()
        return _StopError(
            "idle",
            f"the source asked to wait {exc.after_s:g} s (Retry-After); the sync resumes "
            f"at {at.isoformat(timespec='seconds')}",
            next_sync_at=at,
        )
