"""Sources as stored objects: add, list, show, update, remove; sealed credentials; the sync lease.

A source's credentials are a JSON object of strings sealed with a data key of its own (AES-GCM,
:mod:`search2o.crypto.envelope`), the data key wrapped by the configured KEK; they are opened
only to build the connector for a sync, never logged and never returned: an API or CLI answer
says ``"set"`` or ``"not set"``. The **lease** (``lease_holder``, ``lease_until``) makes one sync
run per source: a second one is refused while the lease is held by a live sync; a lease whose
holder died (its time ran out, or its process is gone on this host) is taken over, and the new
sync resumes from the checkpoint the dead one left.
"""

from __future__ import annotations

import os
import re
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError
from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from search2o.connectors.contract import Connector
from search2o.connectors.settings import ConnectorsSettings
from search2o.crypto.envelope import associated_data, new_data_key, open_json, seal_json
from search2o.crypto.keys import KeyProvider, WrappedKey
from search2o.errors import ConflictError, InputError, NotFoundError
from search2o.storage.db import Database, bump_counter
from search2o.storage.models import Document, DocumentAccess, Source, utcnow
from search2o.storage.vectors import KNOWLEDGE_COUNTER

__all__ = [
    "NAME_PATTERN",
    "SourceInfo",
    "Sources",
    "lease_holder",
    "parse_schedule",
]

NAME_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,63}$"
"""A source's name: lower case letters, digits, ``_ . -``; 1-64 characters."""
_NAME = re.compile(NAME_PATTERN)
_SCHEDULE = re.compile(r"^(\d+)\s*([smhd])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}
MIN_SCHEDULE_S = 60
MAX_SCHEDULE_S = 30 * 86_400
_CREDENTIALS = "source.credentials"


def parse_schedule(text: str | None, field: str = "schedule") -> int | None:
    """Parse ``"30m"``, ``"1h"``, ``"1d"``, ``"90s"`` or ``"manual"`` into seconds (``None``).

    Raises:
        InputError: not one of those forms, or outside 60 s to 30 days (field ``field``).

    """
    if text is None or text.strip().lower() in ("", "manual"):
        return None
    match = _SCHEDULE.match(text.strip().lower())
    if match is None:
        raise InputError(field, f"{text!r} is not an interval (e.g. 90s, 30m, 1h, 1d) or manual")
    seconds = int(match.group(1)) * _UNITS[match.group(2)]
    if not MIN_SCHEDULE_S <= seconds <= MAX_SCHEDULE_S:
        raise InputError(field, f"{text!r} must be between 60 s and 30 days")
    return seconds


def lease_holder() -> str:
    """Return this process's lease holder name: ``host:pid:nonce``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _holder_is_dead(holder: str) -> bool:
    """Tell whether ``holder`` names a process of this host that no longer runs."""
    host, _, rest = holder.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # it runs, as another user
        return False
    return False


@dataclass(frozen=True)
class SourceInfo:
    """A source as the API and the CLI show it (never its credentials, only whether set).

    ``documents`` counts its documents, ``unmapped`` those readable by nobody because their
    access rule could not be mapped; ``last_counts`` holds the last sync's counts and
    ``progress`` the running (or last) sync's.
    """

    id: int
    name: str
    kind: str
    settings: dict[str, Any]
    credentials: str
    schedule_s: int | None
    status: str
    documents: int
    unmapped: int
    last_started_at: datetime | None
    last_success_at: datetime | None
    last_error: str | None
    last_error_at: datetime | None
    last_counts: dict[str, Any] | None
    progress: dict[str, Any] | None
    next_sync_at: datetime | None
    created_at: datetime
    updated_at: datetime

    def to_json(self) -> dict[str, Any]:
        """Return a JSON object (timestamps in ISO 8601)."""

        def when(value: datetime | None) -> str | None:
            return value.isoformat() if value is not None else None

        return {
            "id": self.id,
            "name": self.name,
            "kind": self.kind,
            "settings": self.settings,
            "credentials": self.credentials,
            "schedule_s": self.schedule_s,
            "status": self.status,
            "documents": self.documents,
            "unmapped": self.unmapped,
            "last_started_at": when(self.last_started_at),
            "last_success": when(self.last_success_at),
            "last_error": self.last_error,
            "last_error_at": when(self.last_error_at),
            "last_counts": self.last_counts,
            "progress": self.progress,
            "next_sync_at": when(self.next_sync_at),
            "created_at": when(self.created_at),
            "updated_at": when(self.updated_at),
        }


class Sources:
    """The configured sources of one database.

    Args:
        database: the open database.
        keys: the KEK provider that wraps each source's credentials key.
        kinds: the connector classes by kind (:func:`search2o.connectors.registry.kinds`).
        rules: the ``connectors`` settings section, given to each connector's ``check_new``.
        remote: sources come over the API, not the host's command line (``check_new``).

    """

    def __init__(
        self,
        database: Database,
        keys: KeyProvider,
        kinds: Mapping[str, type[Connector]],
        rules: ConnectorsSettings,
        remote: bool = False,
    ) -> None:
        self.database = database
        self.keys = keys
        self.kinds = kinds
        self.rules = rules
        self.remote = remote

    # --- configuration ----------------------------------------------------------------------

    def connector_class(self, kind: str) -> type[Connector]:
        """Return the connector class of ``kind``.

        Raises:
            InputError: no such kind is installed (field ``kind``).

        """
        found = self.kinds.get(kind)
        if found is None:
            known = ", ".join(sorted(self.kinds)) or "none"
            raise InputError("kind", f"{kind!r} is not an installed connector (known: {known})")
        return found

    def check_settings(self, kind: str, settings: Mapping[str, Any]) -> dict[str, Any]:
        """Validate ``settings`` for ``kind``; return them as stored (JSON).

        Raises:
            InputError: a bad or unknown field, named ``settings.<field>``.

        """
        cls = self.connector_class(kind)
        try:
            checked = cls.Settings.model_validate(dict(settings))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            field = f"settings.{where}" if where else "settings"
            raise InputError(field, first["msg"].removeprefix("Value error, ")) from None
        cls.check_new(checked, self.rules, self.remote)
        return checked.model_dump(mode="json")

    def _check_credentials(self, kind: str, credentials: Mapping[str, Any]) -> dict[str, str]:
        allowed = self.connector_class(kind).credential_fields
        for key, value in credentials.items():
            if key not in allowed:
                names = ", ".join(allowed) or "none"
                raise InputError(
                    f"credentials.{key}", f"the {kind} connector takes no such secret ({names})"
                )
            if not isinstance(value, str) or not value or len(value) > 10_000:
                raise InputError(f"credentials.{key}", "must be a text of 1-10,000 characters")
        return dict(credentials)

    def add(
        self,
        name: str,
        kind: str,
        settings: Mapping[str, Any],
        credentials: Mapping[str, Any] | None = None,
        schedule_s: int | None = None,
    ) -> SourceInfo:
        """Store a new source.

        Raises:
            InputError: a bad name, kind, setting, secret or schedule (field named).
            ConflictError: a source of that name exists.

        """
        if not isinstance(name, str) or not _NAME.match(name):
            raise InputError("name", f"{name!r} must match {NAME_PATTERN} (e.g. handbook)")
        secrets = self._check_credentials(kind, credentials or {})
        stored = self.check_settings(kind, settings)
        _check_schedule(schedule_s)
        try:
            with self.database.session() as session:
                row = Source(
                    name=name, kind=kind, settings=stored, schedule_s=schedule_s, status="idle"
                )
                self._seal(row, secrets or None)
                row.next_sync_at = utcnow() if schedule_s else None
                session.add(row)
                session.flush()
                return self._info(session, row)
        except IntegrityError:
            raise ConflictError(f"a source named {name!r} exists already") from None

    def update(
        self,
        name: str,
        *,
        settings: Mapping[str, Any] | None = None,
        credentials: Mapping[str, Any] | None = None,
        schedule_s: int | str | None = "keep",
    ) -> SourceInfo:
        """Change a source's settings (merged into the stored ones), credentials or schedule.

        A change of access settings reaches every document at the next sync, without
        re-embedding. New credentials also restart a source stopped by rejected ones.

        Raises:
            NotFoundError: no such source.
            InputError: a bad setting, secret or schedule (field named).

        """
        with self.database.session() as session:
            row = self._row(session, name)
            if settings is not None:
                row.settings = self.check_settings(row.kind, {**row.settings, **settings})
            if credentials is not None:
                self._seal(row, self._check_credentials(row.kind, credentials) or None)
                if row.status == "stopped":
                    row.status = "idle"
                    row.auth_failures = 0
            if schedule_s != "keep":
                assert not isinstance(schedule_s, str)
                _check_schedule(schedule_s)
                row.schedule_s = schedule_s
                row.next_sync_at = utcnow() if schedule_s else None
            row.updated_at = utcnow()
            session.flush()
            return self._info(session, row)

    def get(self, name: str) -> SourceInfo:
        """Return one source.

        Raises:
            NotFoundError: no such source.

        """
        with self.database.session() as session:
            return self._info(session, self._row(session, name))

    def all(self) -> list[SourceInfo]:
        """Return every source, by name."""
        with self.database.session() as session:
            rows = session.scalars(select(Source).order_by(Source.name)).all()
            return [self._info(session, row) for row in rows]

    def remove(self, name: str, keep_documents: bool = False) -> tuple[SourceInfo, int]:
        """Delete a source; with its documents unless ``keep_documents`` (then they stay, untagged).

        Returns:
            The source as it was, and how many documents were deleted.

        Raises:
            NotFoundError: no such source.
            ConflictError: a sync of it is running.

        """
        with self.database.session() as session:
            row = self._row(session, name)
            if self._lease_live(row):
                raise ConflictError(f"a sync of {name!r} is running; remove it when it ends")
            info = self._info(session, row)
            deleted = 0
            if keep_documents:
                session.execute(
                    update(Document).where(Document.source_id == row.id).values(source_id=None)
                )
            else:
                result = session.execute(delete(Document).where(Document.source_id == row.id))
                deleted = int(getattr(result, "rowcount", 0) or 0)
                bump_counter(session, KNOWLEDGE_COUNTER)
            session.delete(row)
            return info, deleted

    def open_credentials(self, row: Source) -> dict[str, str] | None:
        """Open ``row``'s sealed credentials.

        Raises:
            KeyUnavailableError: the KEK version that wraps them is retired or unreachable.
            IntegrityCheckError: the sealed record or its key was altered.

        """
        if row.credentials is None or row.wrapped is None:
            return None
        wrapped = WrappedKey(str(row.kek_id), int(row.kek_version or 0), row.wrapped)
        data_key = self.keys.unwrap(wrapped)
        aad = associated_data(_CREDENTIALS, "source", row.name)
        opened = open_json(data_key, row.credentials, aad, f"credentials of source {row.name!r}")
        return {str(k): str(v) for k, v in dict(opened).items()}

    def connector(self, row: Source) -> Connector:
        """Build ``row``'s connector from its stored settings and opened credentials."""
        cls = self.connector_class(row.kind)
        return cls(cls.Settings.model_validate(row.settings), self.open_credentials(row))

    # --- the lease --------------------------------------------------------------------------

    def claim(self, name: str, holder: str, lease_s: int) -> Source:
        """Take the source's sync lease for ``holder`` and return the row (detached).

        Raises:
            NotFoundError: no such source.
            ConflictError: a live sync holds it (the message says since when).

        """
        with self.database.session() as session:
            row = self._row(session, name, lock=True)
            if self._lease_live(row) and row.lease_holder != holder:
                started = row.last_started_at
                since = started.isoformat(timespec="seconds") if started else "?"
                raise ConflictError(f"a sync of {name!r} is running (since {since})")
            row.lease_holder = holder
            row.lease_until = utcnow() + timedelta(seconds=lease_s)
            row.status = "running"
            session.flush()
            session.expunge(row)
            return row

    def held(self, source_id: int, holder: str) -> Source | None:
        """Return the source's row (detached) while ``holder`` holds its lease, else ``None``.

        A ``sources.batch`` job asks this first: a sync that ended or was taken over makes its
        leftover batches end without touching anything.
        """
        with self.database.session() as session:
            row = session.get(Source, source_id)
            if row is None or row.lease_holder != holder or not self._lease_live(row):
                return None
            session.expunge(row)
            return row

    def renew(self, source_id: int, holder: str, lease_s: int, **values: Any) -> None:
        """Extend ``holder``'s lease and write ``values`` (checkpoint, progress) with it.

        Raises:
            ConflictError: the lease was taken over by another sync (this one must stop).

        """
        with self.database.session() as session:
            result = session.execute(
                update(Source)
                .where(Source.id == source_id, Source.lease_holder == holder)
                .values(lease_until=utcnow() + timedelta(seconds=lease_s), **values)
            )
            if not getattr(result, "rowcount", 0):
                raise ConflictError("this sync's lease was taken over by another; it stops")

    def release(self, source_id: int, holder: str, **values: Any) -> None:
        """Give the lease back and write the sync's outcome ``values``."""
        with self.database.session() as session:
            session.execute(
                update(Source)
                .where(Source.id == source_id, Source.lease_holder == holder)
                .values(lease_holder=None, lease_until=None, updated_at=utcnow(), **values)
            )

    def due(self) -> list[tuple[str, datetime]]:
        """Return the sources whose next sync is due and that may run now, with that time."""
        with self.database.session() as session:
            rows = session.scalars(
                select(Source).where(
                    Source.next_sync_at.is_not(None),
                    Source.next_sync_at <= utcnow(),
                    Source.status.in_(("idle", "running")),
                )
            ).all()
            return [
                (row.name, row.next_sync_at)
                for row in rows
                if row.next_sync_at is not None and not self._lease_live(row)
            ]

    # --- helpers ------------------------------------------------------------------------------

    @staticmethod
    def _lease_live(row: Source) -> bool:
        if row.lease_holder is None or row.lease_until is None:
            return False
        return row.lease_until > utcnow() and not _holder_is_dead(row.lease_holder)

    def _seal(self, row: Source, secrets: dict[str, str] | None) -> None:
        if not secrets:
            row.credentials = row.wrapped = None
            row.kek_id = row.kek_version = None
            return
        data_key = new_data_key()
        wrapped = self.keys.wrap(data_key)
        row.credentials = seal_json(
            data_key, secrets, associated_data(_CREDENTIALS, "source", row.name)
        )
        row.kek_id = wrapped.key_id
        row.kek_version = wrapped.version
        row.wrapped = wrapped.blob

    @staticmethod
    def _row(session: Session, name: str, lock: bool = False) -> Source:
        stmt = select(Source).where(Source.name == name)
        if lock:
            stmt = stmt.with_for_update()
        row = session.scalar(stmt)
        if row is None:
            raise NotFoundError(f"no source named {name!r}")
        return row

    @staticmethod
    def _info(session: Session, row: Source) -> SourceInfo:
        documents = session.scalar(
            select(func.count()).select_from(Document).where(Document.source_id == row.id)
        )
        unmapped = session.scalar(
            select(func.count())
            .select_from(DocumentAccess)
            .join(Document, Document.id == DocumentAccess.document_id)
            .where(Document.source_id == row.id, DocumentAccess.principal == "role:nobody")
        )
        return SourceInfo(
            id=row.id,
            name=row.name,
            kind=row.kind,
            settings=dict(row.settings),
            credentials="set" if row.credentials is not None else "not set",
            schedule_s=row.schedule_s,
            # "running" with no live lease: its sync died; the next one resumes it.
            status="interrupted"
            if row.status == "running" and not Sources._lease_live(row)
            else row.status,
            documents=int(documents or 0),
            unmapped=int(unmapped or 0),
            last_started_at=row.last_started_at,
            last_success_at=row.last_success_at,
            last_error=row.last_error,
            last_error_at=row.last_error_at,
            last_counts=row.last_counts,
            progress=row.progress,
            next_sync_at=row.next_sync_at,
            created_at=row.created_at,
            updated_at=row.updated_at,
        )


def _check_schedule(schedule_s: int | None) -> None:
    if schedule_s is not None and not MIN_SCHEDULE_S <= schedule_s <= MAX_SCHEDULE_S:
        raise InputError("schedule_s", "must be between 60 s and 30 days, or null for manual")
