"""Conversation state store benchmark: our store against LangGraph's checkpointers.

For conversations of 10, 100, 1,000 and 10,000 prompt turns, on SQLite and on PostgreSQL, it
measures save latency, restore latency (p50/p95 in ms) and the bytes stored, for our store
(``search2o.state.DatabaseStateStore`` through a real ``search2o.runtime.Runtime``) and, side by
side in the same run, for LangGraph's ``SqliteSaver`` and ``PostgresSaver`` saving the same
history (the bench-only extra: ``.venv/bin/pip install -e '.[bench]'``).

One **prompt turn** is one run: a user message and an assistant answer of 200-400 characters
each, cut from the handbook (``../shared/data/handbook``), appended to a prompt, and one
variable set to the turn count.

* **Ours**: ``StateChanges.append_prompt("conversation", "chat", [user, assistant])`` plus
  ``set_conv("turns", n)``, saved with ``runtime.state_store.save(conversation, user, changes,
  expected_version)`` (compare-and-swap, one sealed change row per save, background compaction
  every ``state.compact_every`` = 64 pending changes, as configured by default). The user comes
  from ``runtime.local_principal()``, the conversation is a ``Conversation`` row with its data
  key (``runtime.vault.create``), as the product makes it. Restore = ``store.restore``.
* **LangGraph**: what a ``MessagesState`` graph checkpoints: each turn one
  ``saver.put(config, checkpoint, metadata, new_versions)`` whose ``channel_values`` hold the
  full ``messages`` list (langchain ``HumanMessage``/``AIMessage`` with ids, as
  ``add_messages`` leaves them) and the ``turns`` counter, with new channel versions from
  ``saver.get_next_version`` and the previous checkpoint as parent. A real graph writes about
  three checkpoints per turn (input, ``__start__``, the chat node) plus ``put_writes``; one put
  per turn is the peer's best case. Restore = ``saver.get_tuple`` of the thread (latest
  checkpoint). ``SqliteSaver`` runs on its own ``sqlite3`` connection (its ``setup`` turns on
  WAL; we also set ``synchronous=NORMAL``, the durability our database uses, so commits cost the
  same on both sides); ``PostgresSaver`` on a psycopg connection with ``autocommit=True``,
  ``prepare_threshold=0``, ``row_factory=dict_row``, after ``setup()``.

Each store and size gets a fresh database (a SQLite file in a temporary folder; a new database
on a PostgreSQL 16 server started from the PyPI package ``pgserver`` and removed at the end).
Before measuring, each backend runs both sides once on a 5-turn conversation, untimed (the
first store of a process is about twice as slow). The history is built with one real save per
turn up to N turns; then the bytes are measured; then ``--saves`` further saves are timed one
by one (so they run at N .. N + saves turns), then as many restores. LangGraph keeps every
checkpoint, so its history grows with the square of the turns (tens of GB at 10,000 turns);
above ``--langgraph-full-history`` turns (default 1,000) it is written as one checkpoint
holding all N turns, the timed saves and restores are still real at that size, and its bytes
stored are estimated as ``latest checkpoint * (N + 1) / 2`` (each earlier checkpoint holds
proportionally fewer turns; a lower estimate), marked ``~``.

**Bytes stored** (after ``store.drain()``, i.e. with the background compactions that were
scheduled finished; ours is then a sealed snapshot plus the change rows not yet folded, fewer
than ``compact_every`` + a few): the stored size of the rows of the store's tables as the
database reports it, indexes excluded: SQLite ``dbstat`` ``payload`` (overflow pages included)
of ``conversation_states`` + ``state_snapshots`` + ``state_changes``, resp. ``checkpoints`` +
``writes``;
PostgreSQL ``sum(pg_column_size(row))`` (tuple header included, TOAST values at their stored,
possibly compressed size) of ``conversation_states`` + ``state_snapshots`` + ``state_changes``,
resp.
``checkpoints`` + ``checkpoint_blobs`` + ``checkpoint_writes``. Our rows are sealed with
AES-GCM and do not compress; LangGraph's msgpack blobs do (PostgreSQL TOAST ``pglz``). **On
disk** adds indexes and page slack: SQLite ``dbstat`` ``pgsize`` of the tables and their
indexes (pages freed by deletes sit on the freelist and are not counted);
PostgreSQL ``pg_total_relation_size`` after ``VACUUM FULL`` (heap, TOAST, indexes, free space
and visibility maps); for ours the size after a plain ``VACUUM`` is printed below the table,
since every compaction leaves the replaced snapshot behind as dead TOAST space, which
autovacuum makes reusable but a benchmark that writes 10,000 turns in a minute outruns.
**Compaction** (ours only): after the timed restores, one more save with background compaction
off, then one ``store.compact`` of the conversation timed in the foreground (open the
snapshot, replay, seal the new snapshot, write it, delete the folded rows); it runs in the
background every ``compact_every`` saves, so its cost per save is about this / 64.

Targets (from the issue), printed PASS/FAIL with the numbers: our save p50 at the largest size
within 2x of the smallest (a save costs what the run added); our bytes per turn roughly
constant (max/min across sizes <= 1.5: storage grows linearly); our save p50 below LangGraph's
at 1,000 turns on each backend. Restore at 1,000 turns is compared too, for information.

Run from the repository root (about 10 minutes on 2 cores for everything)::

    .venv/bin/python bench/state.py
    .venv/bin/python bench/state.py --quick                 # sizes 10, 100, 1,000
    .venv/bin/python bench/state.py --backend sqlite --sizes 10,1000 --saves 20
    .venv/bin/python bench/state.py --json state.json
"""

from __future__ import annotations

import argparse
import importlib
import logging
import math
import os
import platform
import random
import re
import signal
import sqlite3
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchkit import (
    console,
    finish,
    load_average,
    log,
    p50_p95,
    percentile,
    pg_url,
    postgres_server,
    temporary_pg_database,
    verdict,
)
from rich.table import Table
from sqlalchemy import text

from search2o.accounts import Principal
from search2o.config import Settings
from search2o.query.conversations import create_conversation
from search2o.runtime import Runtime
from search2o.state import DatabaseStateStore, StateChanges

HANDBOOK = Path(__file__).resolve().parents[2] / "shared" / "data" / "handbook"
SIZES = (10, 100, 1_000, 10_000)
QUICK_SIZES = (10, 100, 1_000)
DEFAULT_SAVES = 50
LANGGRAPH_FULL_HISTORY = 1_000
COMPARE_AT = 1_000
TARGET_SAVE_RATIO = 2.0
TARGET_BYTES_RATIO = 1.5
SYSTEM = "You are search2o, the company's assistant. Answer from the handbook and cite it."
OURS = "ours"
LG_NAMES = {"sqlite": "LangGraph SqliteSaver", "postgresql": "LangGraph PostgresSaver"}
BACKEND_TITLES = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
LANGGRAPH_MODULES = (
    "langchain_core.messages",
    "langgraph.checkpoint.sqlite",
    "langgraph.checkpoint.postgres",
    "psycopg",
)
INSTALL_HINT = (
    "LangGraph's checkpointers are not installed: only our store is measured. Install the "
    "bench extra: .venv/bin/pip install -e '.[bench]' "
    "(or .venv/bin/pip install langgraph-checkpoint-sqlite langgraph-checkpoint-postgres)"
)


# --------------------------------------------------------------------------------------------
# Small helpers


def fmt_bytes(value: float) -> str:
    if math.isnan(value):
        return "-"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= size:
            return f"{value / size:,.1f} {unit}"
    return f"{value:,.0f} B"


@contextmanager
def milestones(description: str, total: int) -> Iterator[Callable[[int], None]]:
    """Yield ``done(n)``: logs ``description`` at every 25 % of ``total`` (long builds only)."""
    marks = {total * q // 4 for q in (1, 2, 3)} if total >= 2_000 else set()
    started = time.perf_counter()

    def done(n: int) -> None:
        if n in marks:
            log(f"  {description}: {n:,}/{total:,} ({time.perf_counter() - started:.0f} s)")

    yield done


# --------------------------------------------------------------------------------------------
# The conversation: realistic messages from the handbook


class Dialogue:
    """Deterministic (user, assistant) pairs of 200-400 characters cut from the handbook."""

    def __init__(self, seed: int) -> None:
        words: list[str] = []
        for path in sorted(HANDBOOK.glob("*.md")):
            body = re.sub(r"\]\([^)]*\)", "]", path.read_text(encoding="utf-8"))  # drop URLs
            words += [w for w in body.split() if not w.startswith("#")]
        if not words:
            raise SystemExit(f"no handbook text in {HANDBOOK}")
        self._words = words
        self._rng = random.Random(seed)
        self._at = 0

    def _piece(self) -> str:
        target = self._rng.randint(200, 400)
        out: list[str] = []
        length = 0
        while length < target:
            word = self._words[self._at % len(self._words)]
            self._at += 1
            out.append(word)
            length += len(word) + 1
        return " ".join(out)[:400]

    def turn(self) -> tuple[str, str]:
        return self._piece(), self._piece()


# --------------------------------------------------------------------------------------------
# Results


@dataclass
class Result:
    """One store at one size on one backend."""

    backend: str
    store: str
    turns: int
    save_ms: list[float] = field(default_factory=list)
    restore_ms: list[float] = field(default_factory=list)
    bytes_stored: float = math.nan
    bytes_on_disk: float = math.nan
    latest_bytes: float = math.nan  # LangGraph: the latest checkpoint alone
    estimated: bool = False  # LangGraph above --langgraph-full-history: bytes extrapolated
    bytes_before_full: float = math.nan  # PostgreSQL: on disk after VACUUM, before VACUUM FULL
    compaction_ms: float = math.nan  # ours: one foreground compaction after the restores
    build_s: float = 0.0

    @property
    def bytes_per_turn(self) -> float:
        return self.bytes_stored / self.turns

    def save_p50(self) -> float:
        return percentile(self.save_ms, 50)

    def restore_p50(self) -> float:
        return percentile(self.restore_ms, 50)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(
            save_p50_ms=self.save_p50(),
            save_p95_ms=percentile(self.save_ms, 95),
            restore_p50_ms=self.restore_p50(),
            restore_p95_ms=percentile(self.restore_ms, 95),
            bytes_per_turn=self.bytes_per_turn,
        )
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in data.items()}


# --------------------------------------------------------------------------------------------
# Databases


class Backend:
    """Fresh, empty databases on one backend, removed afterwards."""

    def __init__(self, name: str, folder: Path, pg_server: Any | None) -> None:
        self.name = name
        self.folder = folder
        self.pg_server = pg_server

    @contextmanager
    def fresh(self, label: str) -> Iterator[tuple[str, str]]:
        """Yield ``(sqlalchemy_url, plain)``: plain is a file path (SQLite) or a libpq URI."""
        if self.name == "sqlite":
            path = self.folder / f"{label}_{uuid.uuid4().hex[:8]}.db"
            try:
                yield f"sqlite:///{path}", str(path)
            finally:
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{path}{suffix}").unlink(missing_ok=True)
            return
        with temporary_pg_database(self.pg_server, label) as name:
            yield pg_url(self.pg_server, name), pg_url(self.pg_server, name, "postgresql")


def sqlite_sizes(conn: sqlite3.Connection, tables: tuple[str, ...]) -> tuple[int, int, int]:
    """Return (row payload of ``tables``, pages of them and their indexes, same) from dbstat.

    Pages freed by deletes go to SQLite's freelist and are not counted (reused in place).
    """
    marks = ",".join("?" * len(tables))
    payload = conn.execute(
        f"SELECT COALESCE(SUM(payload), 0) FROM dbstat WHERE name IN ({marks})", tables
    ).fetchone()[0]
    btrees = [
        row[0]
        for row in conn.execute(
            f"SELECT name FROM sqlite_schema WHERE tbl_name IN ({marks})", tables
        )
    ]
    marks = ",".join("?" * len(btrees))
    pages = conn.execute(
        f"SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name IN ({marks})", btrees
    ).fetchone()[0]
    return int(payload), int(pages), int(pages)


def pg_sizes(execute: Callable[[str], Any], tables: tuple[str, ...]) -> tuple[int, int, int]:
    """Return the sizes of ``tables``: rows, on disk after VACUUM FULL, after plain VACUUM.

    Rows: sum of ``pg_column_size`` of each row; on disk: ``pg_total_relation_size``. The
    plain ``VACUUM`` figure still holds the space of deleted rows (reusable, not returned).
    ``execute(sql)`` runs one statement in autocommit mode and returns its single value
    (``None`` for a statement without rows).
    """
    rows = 0
    disk = 0
    vacuumed = 0
    for table in tables:
        rows += int(execute(f"SELECT COALESCE(SUM(pg_column_size(t.*)), 0) FROM {table} t") or 0)
        execute(f"VACUUM {table}")
        vacuumed += int(execute(f"SELECT pg_total_relation_size('{table}')") or 0)
        execute(f"VACUUM FULL {table}")
        disk += int(execute(f"SELECT pg_total_relation_size('{table}')") or 0)
    return rows, disk, vacuumed


# --------------------------------------------------------------------------------------------
# Our store


OUR_TABLES = ("conversation_states", "state_snapshots", "state_changes")


def our_changes(turns_after: int, user: str, assistant: str) -> StateChanges:
    changes = StateChanges()
    changes.append_prompt(
        "conversation",
        "chat",
        [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}],
        system=SYSTEM if turns_after == 1 else None,
    )
    changes.set_conv("turns", turns_after)
    return changes


def new_conversation(runtime: Runtime, owner: Principal) -> str:
    """Create a conversation with its data key, as the product does for a first message."""
    with runtime.database.session() as session:
        conversation, _ = create_conversation(session, runtime.vault, owner, "")
        return str(conversation.id)


def our_sizes(runtime: Runtime, backend: str) -> tuple[int, int, int]:
    if backend == "sqlite":
        path = runtime.database.engine.url.database
        with sqlite3.connect(str(path)) as conn:
            return sqlite_sizes(conn, OUR_TABLES)
    engine = runtime.database.engine.execution_options(isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:

        def scalar(sql: str) -> Any:
            result = conn.execute(text(sql))
            return result.scalar() if result.returns_rows else None

        return pg_sizes(scalar, OUR_TABLES)


def run_ours(backend: Backend, turns: int, saves: int, seed: int) -> Result:
    result = Result(backend.name, OURS, turns)
    dialogue = Dialogue(seed)
    with backend.fresh(f"ours_{turns}") as (url, _plain):
        settings = Settings(
            data_dir=backend.folder / f"data-{uuid.uuid4().hex[:8]}", database_url=url
        )
        runtime = Runtime(settings)
        try:
            store = runtime.state_store
            if not isinstance(store, DatabaseStateStore):
                raise SystemExit(
                    "state.hooks is set: unset SEARCH2O_STATE__HOOKS to bench our store"
                )
            principal = runtime.local_principal()
            conversation = new_conversation(runtime, principal)
            version = 0
            started = time.perf_counter()
            with milestones(f"ours/{backend.name} build", turns) as done:
                for n in range(1, turns + 1):
                    version = store.save(
                        conversation, principal, our_changes(n, *dialogue.turn()), version
                    )
                    done(n)
            store.drain()
            result.build_s = time.perf_counter() - started
            sizes = our_sizes(runtime, backend.name)
            result.bytes_stored, result.bytes_on_disk, result.bytes_before_full = sizes
            store.restore(conversation, principal)  # warm the connection and the key cache
            for n in range(turns + 1, turns + saves + 1):
                changes = our_changes(n, *dialogue.turn())
                t0 = time.perf_counter()
                version = store.save(conversation, principal, changes, version)
                result.save_ms.append((time.perf_counter() - t0) * 1000)
            store.drain()
            for _ in range(saves):
                t0 = time.perf_counter()
                restored = store.restore(conversation, principal)
                result.restore_ms.append((time.perf_counter() - t0) * 1000)
            assert restored is not None and restored[1] == version
            prompt = restored[0].prompt("conversation", "chat")
            assert prompt is not None and len(prompt.history) == 2 * (turns + saves)
            # One more change pending, no background compaction: time one fold in the foreground.
            store.compact_every = 0
            store.save(
                conversation, principal, our_changes(turns + saves + 1, *dialogue.turn()), version
            )
            t0 = time.perf_counter()
            folded = store.compact(conversation)
            result.compaction_ms = (time.perf_counter() - t0) * 1000
            assert folded > 0
        finally:
            runtime.close()
    return result


# --------------------------------------------------------------------------------------------
# LangGraph's checkpointers


def langgraph_available() -> bool:
    try:
        for module in LANGGRAPH_MODULES:
            importlib.import_module(module)
    except ImportError:
        return False
    return True


class Thread:
    """One LangGraph thread written the way a ``MessagesState`` graph checkpoints it."""

    def __init__(self, saver: Any, thread_id: str) -> None:
        from langgraph.checkpoint.base import empty_checkpoint

        self.saver = saver
        self.config: dict[str, Any] = {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": ""}
        }
        self.checkpoint = empty_checkpoint()
        self.messages: list[Any] = []
        self.step = -1

    def next_put(self, pairs: list[tuple[str, str]], turns_after: int) -> tuple[Any, ...]:
        """Return the (checkpoint, metadata, new_versions) that ``pairs`` more turns write."""
        from langchain_core.messages import AIMessage, HumanMessage
        from langgraph.checkpoint.base import copy_checkpoint, create_checkpoint

        added: list[Any] = []
        for user, assistant in pairs:
            added.append(HumanMessage(content=user, id=str(uuid.uuid4())))
            added.append(AIMessage(content=assistant, id=str(uuid.uuid4())))
        self.messages = self.messages + added  # add_messages returns a new list
        previous = self.checkpoint["channel_versions"]
        new_versions = {
            channel: self.saver.get_next_version(previous.get(channel), None)
            for channel in ("messages", "turns")
        }
        self.step += 1
        base = copy_checkpoint(self.checkpoint)
        base["channel_values"] = {"messages": self.messages, "turns": turns_after}
        base["channel_versions"] = {**previous, **new_versions}
        base["versions_seen"] = {"chat": dict(base["channel_versions"])}
        checkpoint = create_checkpoint(base, None, self.step)
        checkpoint["updated_channels"] = ["messages", "turns"]
        metadata = {"source": "loop", "step": self.step, "parents": {}}
        return checkpoint, metadata, new_versions

    def put(self, checkpoint: Any, metadata: Any, new_versions: Any) -> None:
        self.config = self.saver.put(self.config, checkpoint, metadata, new_versions)
        self.checkpoint = checkpoint

    def restore(self) -> Any:
        return self.saver.get_tuple(
            {
                "configurable": {
                    "thread_id": self.config["configurable"]["thread_id"],
                    "checkpoint_ns": "",
                }
            }
        )


@contextmanager
def langgraph_saver(
    backend: str, plain: str
) -> Iterator[tuple[Any, Callable[[], tuple[int, int, int]]]]:
    """Yield ``(saver, sizes)``; ``sizes()`` returns (row bytes, on disk, latest checkpoint)."""
    if backend == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(plain, check_same_thread=False)
        try:
            saver = SqliteSaver(conn)
            saver.setup()  # journal_mode=WAL
            conn.execute("PRAGMA synchronous=NORMAL")  # the durability our database uses

            def sqlite_measure() -> tuple[int, int, int]:
                rows, disk, _ = sqlite_sizes(conn, ("checkpoints", "writes"))
                latest = conn.execute(
                    "SELECT length(checkpoint) + length(metadata) FROM checkpoints "
                    "ORDER BY checkpoint_id DESC LIMIT 1"
                ).fetchone()[0]
                return rows, disk, int(latest or 0)

            yield saver, sqlite_measure
        finally:
            conn.close()
        return

    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    with psycopg.Connection.connect(
        plain, autocommit=True, prepare_threshold=0, row_factory=dict_row
    ) as conn:
        saver = PostgresSaver(conn)
        saver.setup()

        def scalar(sql: str) -> Any:
            cursor = conn.execute(sql)  # type: ignore[arg-type]
            row = cursor.fetchone() if cursor.description is not None else None
            return None if row is None else next(iter(row.values()))

        def pg_measure() -> tuple[int, int, int]:
            tables = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
            rows, disk, _ = pg_sizes(scalar, tables)
            latest = scalar(
                "WITH c AS (SELECT * FROM checkpoints ORDER BY checkpoint_id DESC LIMIT 1) "
                "SELECT (SELECT pg_column_size(c.*) FROM c) + COALESCE((SELECT "
                "SUM(pg_column_size(b.*)) FROM checkpoint_blobs b, c, "
                "jsonb_each_text(c.checkpoint -> 'channel_versions') v "
                "WHERE b.thread_id = c.thread_id AND b.channel = v.key AND b.version = v.value), 0)"
            )
            return rows, disk, int(latest or 0)

        yield saver, pg_measure


def run_langgraph(backend: Backend, turns: int, saves: int, seed: int, full_history: int) -> Result:
    result = Result(backend.name, LG_NAMES[backend.name], turns)
    dialogue = Dialogue(seed)
    with (
        backend.fresh(f"langgraph_{turns}") as (_url, plain),
        langgraph_saver(backend.name, plain) as (
            saver,
            measure,
        ),
    ):
        thread = Thread(saver, uuid.uuid4().hex)
        started = time.perf_counter()
        if turns > full_history:  # the quadratic history would not fit: one checkpoint of N turns
            result.estimated = True
            thread.put(*thread.next_put([dialogue.turn() for _ in range(turns)], turns))
        else:
            with milestones(f"LangGraph/{backend.name} build", turns) as done:
                for n in range(1, turns + 1):
                    thread.put(*thread.next_put([dialogue.turn()], n))
                    done(n)
        result.build_s = time.perf_counter() - started
        rows, disk, latest = measure()
        result.latest_bytes = latest
        if result.estimated:
            rows, disk = rows * (turns + 1) / 2, disk * (turns + 1) / 2
        result.bytes_stored, result.bytes_on_disk = rows, disk
        thread.restore()  # warm up
        for n in range(turns + 1, turns + saves + 1):
            put = thread.next_put([dialogue.turn()], n)
            t0 = time.perf_counter()
            thread.put(*put)
            result.save_ms.append((time.perf_counter() - t0) * 1000)
        for _ in range(saves):
            t0 = time.perf_counter()
            restored = thread.restore()
            result.restore_ms.append((time.perf_counter() - t0) * 1000)
        assert restored is not None
        assert len(restored.checkpoint["channel_values"]["messages"]) == 2 * (turns + saves)
    return result


# --------------------------------------------------------------------------------------------
# Tables


def backend_table(backend: str, results: list[Result], saves: int) -> Table:
    table = Table(
        title=f"{BACKEND_TITLES[backend]}: conversation state, {saves} timed saves and restores "
        "per size (ms: p50 / p95)"
    )
    for name, justify in (
        ("turns", "right"),
        ("store", "left"),
        ("save ms", "right"),
        ("restore ms", "right"),
        ("bytes stored", "right"),
        ("bytes / turn", "right"),
        ("on disk", "right"),
        ("compaction ms", "right"),
        ("build s", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for turns in sorted({r.turns for r in results}):
        for r in sorted((r for r in results if r.turns == turns), key=lambda r: r.store != OURS):
            mark = "~" if r.estimated else ""
            table.add_row(
                f"{turns:,}",
                r.store,
                p50_p95(r.save_ms),
                p50_p95(r.restore_ms),
                mark + fmt_bytes(r.bytes_stored),
                f"{mark}{r.bytes_per_turn:,.0f}",
                mark + fmt_bytes(r.bytes_on_disk),
                "-" if math.isnan(r.compaction_ms) else f"{r.compaction_ms:.1f}",
                f"{r.build_s:.1f}" + (" (1 put)" if r.estimated else ""),
            )
        table.add_section()
    return table


def notes(results: list[Result]) -> list[str]:
    out = []
    ordered = sorted(results, key=lambda r: r.turns)
    latest = [
        f"{r.turns:,} turns {fmt_bytes(r.latest_bytes)}"
        for r in ordered
        if r.store != OURS and not math.isnan(r.latest_bytes)
    ]
    if latest:
        out.append(
            "LangGraph's latest checkpoint alone (what a pruned thread would keep): "
            + ", ".join(latest)
            + "."
        )
    if any(r.estimated for r in results):
        out.append("~ = estimated from the latest checkpoint (earlier checkpoints not written).")
    bloat = [
        f"{r.turns:,} turns {fmt_bytes(r.bytes_before_full)}"
        for r in ordered
        if r.store == OURS and r.backend == "postgresql" and not math.isnan(r.bytes_before_full)
    ]
    if bloat:
        out.append(
            "Ours on disk after a plain VACUUM, before VACUUM FULL (space of the snapshots and "
            "changes that compaction replaced, reusable but not returned): "
            + ", ".join(bloat)
            + "."
        )
    return out


def targets_table(results: list[Result], backends: list[str]) -> Table:
    table = Table(title="Targets")
    for name in ("backend", "target", "measured", "verdict"):
        table.add_column(name)
    for backend in backends:
        ours = sorted(
            (r for r in results if r.backend == backend and r.store == OURS), key=lambda r: r.turns
        )
        title = BACKEND_TITLES[backend]
        if len(ours) >= 2:
            small, large = ours[0], ours[-1]
            ratio = large.save_p50() / small.save_p50()
            table.add_row(
                title,
                f"our save p50 at {large.turns:,} turns "
                f"<= {TARGET_SAVE_RATIO:g}x at {small.turns:,}",
                f"{large.save_p50():.2f} ms / {small.save_p50():.2f} ms = {ratio:.2f}x",
                verdict(ratio <= TARGET_SAVE_RATIO),
            )
            per_turn = [r.bytes_per_turn for r in ours]
            spread = max(per_turn) / min(per_turn)
            table.add_row(
                title,
                f"our bytes per turn constant (max/min <= {TARGET_BYTES_RATIO:g})",
                f"{max(per_turn):,.0f} / {min(per_turn):,.0f} = {spread:.2f}",
                verdict(spread <= TARGET_BYTES_RATIO),
            )
        ours_at = next((r for r in ours if r.turns == COMPARE_AT), None)
        peer_at = next(
            (
                r
                for r in results
                if r.backend == backend and r.store != OURS and r.turns == COMPARE_AT
            ),
            None,
        )
        if ours_at is None or peer_at is None:
            missing = "not measured" if ours_at is None else "LangGraph not measured"
            table.add_row(
                title,
                f"our save p50 < {LG_NAMES[backend]}'s at {COMPARE_AT:,} turns",
                missing,
                verdict(None),
            )
            continue
        for what, mine, theirs, target in (
            ("save", ours_at.save_p50(), peer_at.save_p50(), True),
            ("restore", ours_at.restore_p50(), peer_at.restore_p50(), False),
        ):
            table.add_row(
                title,
                f"our {what} p50 < {LG_NAMES[backend]}'s at {COMPARE_AT:,} turns"
                + ("" if target else " (information)"),
                f"{mine:.2f} ms vs {theirs:.2f} ms ({theirs / mine:.1f}x)",
                verdict(mine < theirs) if target else ("faster" if mine < theirs else "slower"),
            )
    return table


# --------------------------------------------------------------------------------------------
# Main


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        type=lambda s: tuple(int(x.replace("_", "")) for x in s.split(",")),
        default=None,
        help="conversation sizes in turns, comma-separated (default 10,100,1000,10000)",
    )
    parser.add_argument("--quick", action="store_true", help="sizes 10,100,1000")
    parser.add_argument(
        "--saves", type=int, default=DEFAULT_SAVES, help="timed saves and restores per size"
    )
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument(
        "--langgraph-full-history",
        type=int,
        default=LANGGRAPH_FULL_HISTORY,
        help="largest size at which LangGraph writes one checkpoint per turn "
        "(above: one checkpoint of N turns, bytes estimated)",
    )
    parser.add_argument("--skip-langgraph", action="store_true", help="measure our store only")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    if args.sizes is None:
        args.sizes = QUICK_SIZES if args.quick else SIZES
    if args.saves < 1 or min(args.sizes) < 1:
        parser.error("--saves and --sizes must be >= 1")
    args.backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    return args


def main() -> None:
    args = parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    logging.basicConfig(level=logging.WARNING)
    with_langgraph = not args.skip_langgraph and langgraph_available()
    started = time.perf_counter()
    console.rule("search2o conversation state benchmark")
    log(
        f"sizes={','.join(f'{s:,}' for s in args.sizes)} saves={args.saves} "
        f"backends={','.join(args.backends)} cpus={os.cpu_count()} "
        f"python={platform.python_version()} sqlite={sqlite3.sqlite_version} "
        f"load average={load_average()}"
    )
    if not with_langgraph and not args.skip_langgraph:
        console.print(INSTALL_HINT, style="yellow", markup=False)
    results: list[Result] = []
    with (
        tempfile.TemporaryDirectory(prefix="search2o-bench-state-") as folder,
        postgres_server("postgresql" in args.backends) as server,
    ):
        for name in args.backends:
            backend = Backend(name, Path(folder), server)
            # The first store of a process runs about twice as slow (lazy imports, first
            # connections, caches): warm both sides up on a small conversation, untimed.
            run_ours(backend, 5, 5, args.seed)
            if with_langgraph:
                run_langgraph(backend, 5, 5, args.seed, args.langgraph_full_history)
            for turns in args.sizes:
                log(f"[bold]{name}[/bold] {turns:,} turns: ours (load average {load_average()})")
                results.append(run_ours(backend, turns, args.saves, args.seed))
                if with_langgraph:
                    log(
                        f"[bold]{name}[/bold] {turns:,} turns: {LG_NAMES[name]} "
                        f"(load average {load_average()})"
                    )
                    results.append(
                        run_langgraph(
                            backend, turns, args.saves, args.seed, args.langgraph_full_history
                        )
                    )
    console.rule("results")
    for name in args.backends:
        console.print(backend_table(name, [r for r in results if r.backend == name], args.saves))
        for note in notes([r for r in results if r.backend == name]):
            console.print(note)
        console.print()
    console.print(targets_table(results, args.backends))
    if not with_langgraph and not args.skip_langgraph:
        console.print(INSTALL_HINT, style="yellow", markup=False)
    finish(
        started,
        args.json,
        {
            "sizes": list(args.sizes),
            "saves": args.saves,
            "results": [r.to_json() for r in results],
        },
    )


if __name__ == "__main__":
    main()
