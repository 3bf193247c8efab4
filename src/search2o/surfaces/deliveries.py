"""The delivery records every messenger surface shares: dedupe, record, the state of an answer.

One row of ``surface_deliveries`` per question (:mod:`search2o.storage.delivery_models`),
whatever the messenger: ``surface`` names it, ``event_key`` and ``message_key`` are its own ids.
The question's text is sealed under a data key of its own wrapped by the KEK (envelope
encryption, :mod:`search2o.crypto.envelope`), because a job's payload holds ids only and
conversation content is never stored in plain text. The same store keeps each surface's ingress
cursors (``surface_cursors``: a polling offset, a backfill position).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from sqlalchemy import exists, select, tuple_, update
from sqlalchemy.orm import Session

from search2o.crypto.envelope import associated_data, new_data_key, open_json, seal_json
from search2o.crypto.keys import KeyProvider, WrappedKey
from search2o.errors import StorageError
from search2o.storage import dialect
from search2o.storage.db import Database
from search2o.storage.delivery_models import SurfaceCursor, SurfaceDelivery

__all__ = ["Delivery", "DeliveryStore", "Inbound", "failure_notice"]

_KIND = "surface.question"


def _keys(inbound: Inbound) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Return the two keys a question is known by: its event, and its message."""
    return (
        ("event", inbound.surface, inbound.event_key),
        ("message", inbound.surface, inbound.workspace, inbound.channel, inbound.message_key),
    )


def failure_notice(reason: str) -> str:
    """Return the short error a messenger shows when a question was given up for good.

    ``reason`` is the error the job ledger stored (:func:`search2o.jobs.delivery.describe_error`:
    ``"<Class>: <our message>"``, or ``"<Class> in the job handler (...)"`` for a third-party
    error). The user reads at most 200 characters of our message and never an error class:
    the class, and anything of a third-party error, stay in the ledger for the operator
    (``search2o jobs show``).
    """
    if _INTERNAL.search(reason):
        return "Sorry, I could not answer this. Please ask again later."
    detail = _CLASS.sub("", reason, count=1).strip()
    if not detail:
        return "Sorry, I could not answer this. Please ask again later."
    return f"Sorry, I could not answer this ({detail[:200]}). Please ask again later."


_CLASS = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*(?:Error|Exception|Warning)\b:?\s*")
"""The class ``describe_error`` puts before our error's message."""
_INTERNAL = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]* in the job handler\b")
"""A third-party error's form: its class only; the user gets no detail of it."""


@dataclass(frozen=True)
class Inbound:
    """A message to answer, as a surface normalised it.

    ``workspace`` is the act-as workspace (Telegram: the bot's id); ``channel`` the chat;
    ``channel_type`` the platform's word for it (``private``, ``group`` …; :attr:`direct`
    decides the rights); ``message_key`` the message's id in its chat; ``event_key`` the id
    of the delivery that brought it; ``thread_key`` the thread whose conversation it continues.
    """

    surface: str
    workspace: str
    channel: str
    channel_type: str
    user: str
    message_key: str
    event_key: str
    thread_key: str
    text: str
    direct: bool = False


@dataclass(frozen=True)
class Delivery:
    """A delivery record as an answer job reads it (the text opened; ``""`` once dropped).

    ``run_id`` is the answer's run once its first event named it (:meth:`DeliveryStore.set_run`).
    """

    id: int
    inbound: Inbound
    state: str
    reply_key: str | None
    act_as: str | None
    answer_message_id: str | None
    run_id: str | None = None


class DeliveryStore:
    """Reads and writes ``surface_deliveries`` and ``surface_cursors``.

    Args:
        database: our database.
        keys: the KEK provider that wraps each question's data key.
        direct_types: the ``channel_type`` values that are direct messages, per surface
            (e.g. ``{"telegram": {"private"}}``), so a loaded record knows its rights.

    """

    def __init__(
        self,
        database: Database,
        keys: KeyProvider,
        direct_types: dict[str, frozenset[str]] | None = None,
    ) -> None:
        self.database = database
        self.keys = keys
        self.direct_types = direct_types or {}

    def record(self, inbound: Inbound, session: Session | None = None) -> tuple[int, bool]:
        """Record ``inbound`` once (:meth:`record_many` of one); ``(delivery id, whether new)``.

        Raises:
            StorageError: the database failed.

        """
        return self.record_many([inbound], session)[0]

    def record_many(
        self, inbounds: Sequence[Inbound], session: Session | None = None
    ) -> list[tuple[int, bool]]:
        """Record each of ``inbounds`` once; return ``(delivery id, whether it is new)`` for each.

        A question seen before, by its event key or by its message (``surface, workspace,
        channel, message_key``), is not recorded again: its first row's id is returned; so is
        one that an earlier question of ``inbounds`` shares a key with (a retry, or the
        ``message`` twin of an ``app_mention``, in the same burst). Three statements whatever
        the count: one ``SELECT`` of the rows seen before, one multi-row ``INSERT ... ON
        CONFLICT DO NOTHING RETURNING`` (SQLite docs, "UPSERT"; PostgreSQL docs, "INSERT ...
        ON CONFLICT"), and only when a racing writer won a conflict, one ``SELECT`` of its
        rows; the unique constraints settle races without an error that would end the
        transaction. With ``session`` the rows are written in the caller's transaction (the
        surface pipelines add the answer jobs to it: one commit); else in one of its own.

        Raises:
            StorageError: the database failed.

        """
        if not inbounds:
            return []
        with self.database.within(session) as writing:
            known = self._find(writing, inbounds)
            carrier: dict[tuple[str, ...], int] = {}  # a key -> the index first carrying it
            first: list[int | None] = []  # per question: the new one it is; None: seen before
            for index, inbound in enumerate(inbounds):
                keys = _keys(inbound)
                if any(k in known for k in keys):
                    first.append(None)
                    continue
                earlier = next((carrier[k] for k in keys if k in carrier), None)
                if earlier is None:
                    carrier.update(dict.fromkeys(keys, index))
                first.append(index if earlier is None else earlier)
            fresh = [inbounds[i] for i, f in enumerate(first) if f == i]
            inserted = self._insert(writing, fresh)
            lost = [inbound for inbound in fresh if _keys(inbound)[0] not in inserted]
            if lost:  # a racing writer committed them first
                known.update(self._find(writing, lost))
            result: list[tuple[int, bool]] = []
            for index, inbound in enumerate(inbounds):
                carried = first[index]
                question = inbound if carried is None else inbounds[carried]
                event = _keys(question)[0]
                if carried is not None and event in inserted:
                    result.append((inserted[event], carried == index))
                    continue
                found = next((known[k] for k in _keys(question) if k in known), None)
                if found is None:  # the conflicting row was deleted in between
                    raise StorageError(
                        f"{inbound.surface} question {inbound.event_key} not recorded"
                    )
                result.append((found, False))
            return result

    def _insert(self, session: Session, inbounds: list[Inbound]) -> dict[tuple[str, ...], int]:
        """Insert new rows for ``inbounds`` (conflicts skipped); their event keys -> ids."""
        if not inbounds:
            return {}
        rows = []
        for inbound in inbounds:
            key = new_data_key()
            wrapped = self.keys.wrap(key)
            rows.append(
                {
                    "surface": inbound.surface,
                    "workspace": inbound.workspace,
                    "channel": inbound.channel,
                    "channel_type": inbound.channel_type,
                    "message_key": inbound.message_key,
                    "event_key": inbound.event_key,
                    "thread_key": inbound.thread_key,
                    "user": inbound.user,
                    "state": "pending",
                    "kek_id": wrapped.key_id,
                    "kek_version": wrapped.version,
                    "wrapped_key": wrapped.blob,
                    "sealed_text": seal_json(key, inbound.text, self._aad(inbound)),
                }
            )
        table = SurfaceDelivery.__table__
        statement = (
            dialect.insert(session, table)
            .on_conflict_do_nothing()
            .returning(table.c.id, table.c.surface, table.c.event_key)
        )
        # executemany with RETURNING: SQLAlchemy's insertmanyvalues sends multi-row VALUES
        # (SQLAlchemy docs, "'Insert Many Values' Behavior for INSERT statements").
        returned = session.execute(statement, rows)
        return {("event", row.surface, row.event_key): int(row.id) for row in returned}

    @staticmethod
    def _find(session: Session, inbounds: Sequence[Inbound]) -> dict[tuple[str, ...], int]:
        """Return the rows already recorded for ``inbounds``: each of their keys -> the id."""
        surfaces = sorted({i.surface for i in inbounds})
        events = sorted({i.event_key for i in inbounds})
        messages = sorted({(i.workspace, i.channel, i.message_key) for i in inbounds})
        rows = session.execute(
            select(
                SurfaceDelivery.id,
                SurfaceDelivery.surface,
                SurfaceDelivery.workspace,
                SurfaceDelivery.channel,
                SurfaceDelivery.message_key,
                SurfaceDelivery.event_key,
            ).where(
                SurfaceDelivery.surface.in_(surfaces),
                SurfaceDelivery.event_key.in_(events)
                | tuple_(
                    SurfaceDelivery.workspace,
                    SurfaceDelivery.channel,
                    SurfaceDelivery.message_key,
                ).in_(messages),
            )
        )
        found: dict[tuple[str, ...], int] = {}
        for row in rows:
            found[("event", row.surface, row.event_key)] = int(row.id)
            found[("message", row.surface, row.workspace, row.channel, row.message_key)] = int(
                row.id
            )
        return found

    def knows_thread(self, surface: str, workspace: str, channel: str, thread_key: str) -> bool:
        """Whether the surface answers in this thread (some question of it was recorded)."""
        with self.database.session() as session:
            return bool(
                session.scalar(
                    select(
                        exists().where(
                            SurfaceDelivery.surface == surface,
                            SurfaceDelivery.workspace == workspace,
                            SurfaceDelivery.channel == channel,
                            SurfaceDelivery.thread_key == thread_key,
                        )
                    )
                )
            )

    def load(self, delivery_id: int) -> Delivery | None:
        """Return a delivery with its text opened (``""`` once dropped), or ``None``.

        Raises:
            IntegrityCheckError: the sealed text was altered or moved to another row.

        """
        with self.database.session() as session:
            row = session.get(SurfaceDelivery, delivery_id)
            if row is None:
                return None
            inbound = Inbound(
                surface=row.surface,
                workspace=row.workspace,
                channel=row.channel,
                channel_type=row.channel_type,
                user=row.user,
                message_key=row.message_key,
                event_key=row.event_key,
                thread_key=row.thread_key,
                text="",
                direct=row.channel_type in self.direct_types.get(row.surface, frozenset()),
            )
            if row.sealed_text is not None and row.wrapped_key is not None:
                key = self.keys.unwrap(
                    WrappedKey(str(row.kek_id), int(row.kek_version or 0), bytes(row.wrapped_key))
                )
                what = f"{row.surface} question {row.id}"
                text = open_json(key, bytes(row.sealed_text), self._aad(inbound), what)
                inbound = replace(inbound, text=str(text))
            return Delivery(
                row.id,
                inbound,
                row.state,
                row.reply_key,
                row.act_as,
                row.answer_message_id,
                row.run_id,
            )

    def set(self, delivery_id: int, **values: object) -> None:
        """Update columns of one delivery (``state``, ``reply_key``, ``act_as`` …)."""
        with self.database.session() as session:
            session.execute(
                update(SurfaceDelivery).where(SurfaceDelivery.id == delivery_id).values(**values)
            )

    def set_run(self, delivery_id: int, run_id: str) -> None:
        """Store the answer's run id (at most 64 characters) as soon as the answer names it.

        A job that runs again after a crash then follows that run
        (:func:`search2o.surfaces.turns.chat_turn` with ``run_id``) instead of asking the
        question a second time.
        """
        self.set(delivery_id, run_id=run_id)

    def finish(self, delivery_id: int, state: str, **values: object) -> None:
        """Set the final ``state`` (``posted`` or ``failed``) and drop the question's text."""
        self.set(delivery_id, state=state, sealed_text=None, wrapped_key=None, **values)

    def cursor(self, surface: str, workspace: str, name: str) -> str | None:
        """Return a stored ingress cursor (e.g. Telegram's ``offset``), or ``None``."""
        with self.database.session() as session:
            row = session.get(SurfaceCursor, (surface, workspace, name))
            return row.value if row is not None else None

    def set_cursor(self, surface: str, workspace: str, name: str, value: str) -> None:
        """Store an ingress cursor (insert or replace; ``value`` at most 64 characters)."""
        with self.database.session() as session:
            row = session.get(SurfaceCursor, (surface, workspace, name))
            if row is None:
                cursor = SurfaceCursor(surface=surface, workspace=workspace, name=name, value=value)
                session.add(cursor)
            else:
                row.value = value

    @staticmethod
    def _aad(inbound: Inbound) -> bytes:
        return associated_data(
            _KIND, f"{inbound.surface}/{inbound.workspace}/{inbound.channel}", inbound.message_key
        )
