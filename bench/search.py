"""Knowledge Store search benchmark on SQLite and PostgreSQL.

What it measures, on each backend (SQLite in a temporary file; PostgreSQL 16 with pgvector from
the PyPI package ``pgserver``, started in a temporary folder and removed at the end):

1. Handbook corpus (``../shared/data/handbook``, real data): ingestion through
   ``KnowledgeStore.ingest_paths`` with the built-in embedding model (the model is loaded before
   the clock starts), in chunks per second, and how much of it is embedding; then hybrid search
   latency over the questions of ``../shared/data/handbook-eval/public.jsonl``, with the query
   embedding timed apart from the search, and hit@1 / hit@5 of the gold files.

2. Synthetic corpus (``--chunks``, default 100,000 chunks in documents of 100 chunks):

   * text: words drawn from English function words, a Zipf-Mandelbrot-distributed vocabulary of
     a few thousand pseudo-words and per-topic words, so lexical search has real work to do;
     queries are short questions mixing function words, topic words and one common word;
   * vectors: 384-d unit vectors around 1,000 random topic centres; the noise lies mostly in a
     32-d subspace of each topic plus an isotropic part (cosine to the centre about 0.7), which
     gives the clustered, low-intrinsic-dimension structure of text embeddings;
   * rows are written with bulk ``INSERT`` statements (the embeddings are precomputed, so the
     throughput is storage only); on PostgreSQL the HNSW index is built after the load
     (``PgVectorIndex.prepare``, timed apart) and ``ANALYZE`` runs;
   * searches call ``search2o.knowledge.search.search`` with an embedder stand-in returning a
     held-out vector drawn from the same topics, so ``search_ms`` is the search without any
     embedding: vector retrieval + lexical retrieval + RRF fusion + fetching the hit rows;
   * recall@10 of the vector index against exact brute force (NumPy over all vectors);
     on PostgreSQL for several ``hnsw.ef_search`` values;
   * latency under access rights: every document restricted to group ``eng`` except one
     readable by group ``hr``; an ``eng`` user reads 99.9 % of the corpus, an ``hr`` user one
     document (a selective filter that must still return ``k`` hits).

3. SQLite vector options: sqlite-vec's ``vec0`` brute-force KNN against exact NumPy over the same
   vectors held in memory (skipped with a reason when sqlite-vec or a ``sqlite3`` module able to
   load extensions, e.g. ``pysqlite3``, is missing).

Targets (from the issue) are printed beside the measurements: search p50 under 30 ms at 100,000
chunks without the query embedding, and recall@10 of at least 0.95.

Each timed scenario stops early once ``--budget`` seconds are spent, and a single search running
longer than ``--query-timeout`` seconds is cancelled (``statement_timeout`` on PostgreSQL,
``sqlite3_interrupt`` on SQLite); the tables say how many queries were timed.

Run it from the repository root::

    .venv/bin/python bench/search.py                       # everything, 10-20 minutes
    .venv/bin/python bench/search.py --chunks 20000 --queries 100 --backends sqlite
    .venv/bin/python bench/search.py --skip-handbook --skip-sqlite-vec
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import signal
import sys
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
import numpy.typing as npt
from benchkit import (
    finish,
    load_average,
    log,
    percentile,
    pg_url,
    postgres_server,
    temporary_pg_database,
)
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from sqlalchemy import insert, text, update
from sqlalchemy.orm import Session

from search2o.accounts import Principal
from search2o.errors import StorageError
from search2o.knowledge.access import AccessList, readable_filter
from search2o.knowledge.search import search
from search2o.knowledge.settings import KnowledgeSettings
from search2o.knowledge.store import KnowledgeStore
from search2o.providers.embeddings import BuiltinEmbedder
from search2o.storage.db import Database
from search2o.storage.models import (
    Chunk,
    ChunkEmbedding,
    Counter,
    Document,
    DocumentAccess,
    VectorSpace,
)
from search2o.storage.vectors import (
    KNOWLEDGE_COUNTER,
    PgVectorIndex,
    VectorIndex,
    open_vector_index,
)

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
HANDBOOK = SHARED_DATA / "handbook"
HANDBOOK_EVAL = SHARED_DATA / "handbook-eval" / "public.jsonl"

MODEL_ID = BuiltinEmbedder.model_id
DIMENSION = BuiltinEmbedder.dimension
CHUNKS_PER_DOCUMENT = 100
TOPICS = 1_000
TOPIC_SUBSPACE = 32
TOPIC_WORDS = 24
VOCABULARY = 4_000
ZIPF_OFFSET = 20.0
SEARCH_K = 10
WARMUP_QUERIES = 5
VECTOR_ALONE_QUERIES = 50
RECALL_MIN_QUERIES = 100
EF_SEARCH_VALUES = (100, 200, 400)
TARGET_P50_MS = 30.0
TARGET_RECALL = 0.95

# Function words: in every chunk and in most questions, so the lexical search must cope with
# terms that match the whole corpus.
FUNCTION_WORDS = (
    "the", "a", "of", "to", "and", "in", "is", "for", "on", "with", "that", "by", "as", "are",
    "be", "this", "it", "or", "from", "at", "we", "our", "you", "can", "how", "what", "do",
    "when", "which", "if", "not", "all", "each", "per", "where", "i", "my", "there", "about",
)  # fmt: skip
QUESTION_TEMPLATES = (
    "how do we {0} the {1} for {2}?",
    "what is our {0} {1} policy",
    "where can i find the {0} and {1} of {2}",
    "{0} {1}",
    "when do we use {0} with {1} in {2}?",
    "is there a {0} for the {1}?",
)

console = Console(width=None if os.isatty(1) else 150)


# --------------------------------------------------------------------------------------------
# Small helpers


def verdict(ok: bool) -> str:
    return "[green]PASS[/green]" if ok else "[red]MISS[/red]"


def fmt_ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.1f}"


@contextmanager
def progress(description: str, total: int) -> Iterator[Callable[[int], None]]:
    """Yield an ``advance(n)`` function: a Rich bar on a terminal, a line per 20 % otherwise."""
    if console.is_terminal:
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        )
        with Progress(*columns, console=console, transient=True) as bar:
            task = bar.add_task(description, total=total)
            yield lambda n: bar.advance(task, n)
        log(f"{description}: done ({total})")
        return
    done = 0
    next_mark = 0.2

    def advance(n: int) -> None:
        nonlocal done, next_mark
        done += n
        if total and done / total >= next_mark - 1e-9:
            log(f"{description}: {done}/{total}")
            next_mark = (math.floor(done / total * 5 + 1e-9) + 1) / 5

    yield advance


@dataclass
class Latencies:
    """Per-query timings in milliseconds, and what each query returned."""

    search_ms: list[float] = field(default_factory=list)
    vector_ms: list[float] = field(default_factory=list)
    lexical_ms: list[float] = field(default_factory=list)
    embed_ms: list[float] = field(default_factory=list)
    wall_ms: list[float] = field(default_factory=list)
    returned: list[int] = field(default_factory=list)
    foreign_hits: int = 0
    timed_out: float | None = None  # the per-query timeout, in seconds, when one was hit

    def p50(self) -> float:
        if self.timed_out is not None and not self.search_ms:
            return math.inf
        return percentile(self.search_ms, 50)

    def p95(self) -> float:
        return percentile(self.search_ms, 95)


# --------------------------------------------------------------------------------------------
# Databases


class Databases:
    """Creates blank, migrated databases on one backend and removes them afterwards."""

    def __init__(self, backend: str, folder: Path, pg_server: Any | None) -> None:
        self.backend = backend
        self.folder = folder
        self.pg_server = pg_server

    @contextmanager
    def fresh(self, label: str) -> Iterator[Database]:
        if self.backend == "sqlite":
            path = self.folder / f"{label}-{uuid.uuid4().hex[:8]}.db"
            database = Database(f"sqlite:///{path}")
            try:
                yield database
            finally:
                database.close()
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{path}{suffix}").unlink(missing_ok=True)
            return
        with temporary_pg_database(self.pg_server, f"bench_{label}") as name:
            database = Database(pg_url(self.pg_server, name))
            try:
                yield database
            finally:
                database.close()


def pg_settings(database: Database) -> dict[str, str]:
    names = ("shared_buffers", "maintenance_work_mem", "max_parallel_maintenance_workers")
    with database.engine.connect() as conn:
        found = {n: str(conn.execute(text(f"SHOW {n}")).scalar()) for n in names}
        found["pgvector"] = str(
            conn.execute(
                text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            ).scalar()
        )
    return found


# --------------------------------------------------------------------------------------------
# 1. Handbook corpus: real ingestion and search with the built-in model


class TimedEmbedder:
    """The built-in model, adding up the seconds spent in :meth:`embed`."""

    def __init__(self, inner: BuiltinEmbedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        self.max_tokens = inner.max_tokens
        self.seconds = 0.0

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        started = time.perf_counter()
        vectors = self.inner.embed(texts)
        self.seconds += time.perf_counter() - started
        return vectors

    def count_tokens(self, text_: str) -> int:
        return self.inner.count_tokens(text_)


@dataclass
class HandbookResult:
    files: int
    chunks: int
    seconds: float
    embed_seconds: float
    latencies: Latencies
    hit1: float
    hit5: float
    judged: int


def handbook_questions() -> list[tuple[str, list[str]]]:
    """Return ``(question, gold file names)`` of every turn meant to be searched."""
    questions = []
    for line in HANDBOOK_EVAL.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        for turn in json.loads(line)["turns"]:
            if turn.get("expect") != "no_search":
                questions.append((turn["user"], list(turn.get("gold_files") or [])))
    return questions


def run_handbook(database: Database, model: BuiltinEmbedder, rounds: int) -> HandbookResult:
    embedder = TimedEmbedder(model)
    store = KnowledgeStore(database, embedder, KnowledgeSettings())
    files = sorted(HANDBOOK.glob("*.md"))
    with progress("handbook ingestion (files)", len(files)) as advance:
        summary = store.ingest_paths(files, AccessList(), on_file=lambda _o: advance(1))
    ingest_embed = embedder.seconds
    principal = Principal(user_id=1, email="bench@example.com", groups=())
    questions = handbook_questions()
    for question, _ in questions[:WARMUP_QUERIES]:
        store.search(principal, question, k=5)
    latencies = Latencies()
    hits1 = hits5 = judged = 0
    with progress("handbook searches", rounds * len(questions)) as advance:
        for round_ in range(rounds):
            for question, gold in questions:
                result = store.search(principal, question, k=5)
                latencies.search_ms.append(result.search_ms)
                latencies.embed_ms.append(result.embed_ms)
                latencies.vector_ms.append(result.timings.get("vector_ms", math.nan))
                latencies.lexical_ms.append(result.timings.get("lexical_ms", math.nan))
                if round_ == 0 and gold:
                    names = [Path(h.source).name for h in result.hits]
                    judged += 1
                    hits1 += bool(names[:1] and names[0] in gold)
                    hits5 += any(n in gold for n in names[:5])
                advance(1)
    return HandbookResult(
        files=len(summary.outcomes),
        chunks=summary.chunks,
        seconds=summary.seconds,
        embed_seconds=ingest_embed,
        latencies=latencies,
        hit1=hits1 / judged if judged else math.nan,
        hit5=hits5 / judged if judged else math.nan,
        judged=judged,
    )


def p50_p95(values: list[float]) -> str:
    return f"{fmt_ms(percentile(values, 50))} / {fmt_ms(percentile(values, 95))}"


def search_cell(latencies: Latencies) -> str:
    """p50 / p95 of the search, or how long the cancelled query had run."""
    if latencies.timed_out is None:
        return p50_p95(latencies.search_ms)
    cancelled = f"cancelled after {latencies.timed_out:.0f} s"
    if not latencies.search_ms:
        return f"> {latencies.timed_out * 1000:,.0f} ({cancelled})"
    return f"{p50_p95(latencies.search_ms)}, then one {cancelled}"


def metric_table(title: str, backends: list[str], rows: list[tuple[str, list[str]]]) -> Table:
    """A table with one row per metric and one column per backend."""
    table = Table(title=title)
    table.add_column("metric")
    for backend in backends:
        table.add_column(backend, justify="right")
    for label, cells in rows:
        table.add_row(label, *cells)
    return table


def handbook_table(results: dict[str, HandbookResult], rounds: int) -> Table:
    rs = list(results.values())
    questions = len(rs[0].latencies.search_ms) // rounds
    totals = [
        [a + b for a, b in zip(r.latencies.embed_ms, r.latencies.search_ms, strict=True)]
        for r in rs
    ]
    rows = [
        ("files / chunks", [f"{r.files} / {r.chunks}" for r in rs]),
        ("ingest seconds (model already loaded)", [f"{r.seconds:.2f}" for r in rs]),
        ("  of which embedding chunks, seconds", [f"{r.embed_seconds:.2f}" for r in rs]),
        ("ingest throughput, chunks/s", [f"{r.chunks / r.seconds:.1f}" for r in rs]),
        (
            "  without the embedding time, chunks/s",
            [f"{r.chunks / max(r.seconds - r.embed_seconds, 1e-9):.0f}" for r in rs],
        ),
        (
            f"queries timed ({questions} questions x {rounds} rounds)",
            [str(len(r.latencies.search_ms)) for r in rs],
        ),
        ("query embedding p50 / p95, ms", [p50_p95(r.latencies.embed_ms) for r in rs]),
        ("search p50 / p95, ms (without embedding)", [p50_p95(r.latencies.search_ms) for r in rs]),
        (
            "  vector / lexical p50, ms",
            [
                f"{fmt_ms(percentile(r.latencies.vector_ms, 50))} / "
                f"{fmt_ms(percentile(r.latencies.lexical_ms, 50))}"
                for r in rs
            ],
        ),
        ("embedding + search p50 / p95, ms", [p50_p95(t) for t in totals]),
        ("hit@1 / hit@5 (gold file)", [f"{r.hit1:.2f} / {r.hit5:.2f} (n={r.judged})" for r in rs]),
    ]
    return metric_table(
        "Handbook corpus: real ingestion and search (built-in all-MiniLM-L6-v2)",
        list(results),
        rows,
    )


# --------------------------------------------------------------------------------------------
# 2. Synthetic corpus


@dataclass
class Corpus:
    """A synthetic corpus; chunk ``i`` (0-based) gets id ``i + 1`` in document ``i // 100 + 1``."""

    texts: list[str]
    headings: list[str]
    vectors: npt.NDArray[np.float32]
    query_texts: list[str]
    query_vectors: npt.NDArray[np.float32]

    @property
    def size(self) -> int:
        return len(self.texts)

    @property
    def documents(self) -> int:
        return math.ceil(self.size / CHUNKS_PER_DOCUMENT)


def unit_rows(matrix: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.maximum(norms, 1e-12)).astype(np.float32)


def pseudo_words(rng: np.random.Generator, count: int) -> list[str]:
    """Return ``count`` distinct pronounceable non-words (2-4 syllables), in a seeded order."""
    consonants = list("bdfghklmnprstvz")
    vowels = list("aeiou")
    taken = set(FUNCTION_WORDS)
    words: list[str] = []
    while len(words) < count:
        syllables = int(rng.integers(2, 5))
        word = "".join(
            str(rng.choice(consonants)) + str(rng.choice(vowels)) for _ in range(syllables)
        )
        if word not in taken:
            taken.add(word)
            words.append(word)
    return words


class CorpusMaker:
    """Draws texts and vectors of the synthetic corpus from seeded topics."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        rng = self.rng
        self.vocabulary = np.array(pseudo_words(rng, VOCABULARY), dtype=object)
        self.function_words = np.array(FUNCTION_WORDS, dtype=object)
        ranks = np.arange(1, VOCABULARY + 1, dtype=np.float64)
        # Zipf-Mandelbrot weights 1 / (rank + q): the commonest content word lands in about 40 %
        # of the chunks (the commonest words of all are the function words, in every chunk).
        weights = 1.0 / (ranks + ZIPF_OFFSET)
        self.zipf = weights / weights.sum()
        # Topic words come from the middle and the tail of the vocabulary (rarer, informative).
        self.topic_words = rng.integers(200, VOCABULARY, size=(TOPICS, TOPIC_WORDS))
        self.topic_weights = rng.lognormal(0.0, 0.8, size=TOPICS)
        self.topic_weights /= self.topic_weights.sum()
        self.centres = unit_rows(rng.standard_normal((TOPICS, DIMENSION)).astype(np.float32))
        self.bases = (
            rng.standard_normal((TOPICS, DIMENSION, TOPIC_SUBSPACE)) / math.sqrt(DIMENSION)
        ).astype(np.float32)
        self.spread = rng.uniform(0.8, 1.2, size=TOPICS).astype(np.float32)

    def vectors(self, topics: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
        """Unit vectors around the centres of ``topics``: 70 % of the noise variance in the
        topic's subspace, 30 % isotropic, noise norm about 1 (cosine to the centre ~0.7)."""
        out = np.empty((len(topics), DIMENSION), dtype=np.float32)
        for start in range(0, len(topics), 2_000):
            part = topics[start : start + 2_000]
            local = np.einsum(
                "ndr,nr->nd",
                self.bases[part],
                self.rng.standard_normal((len(part), TOPIC_SUBSPACE)).astype(np.float32)
                / math.sqrt(TOPIC_SUBSPACE),
            )
            iso = self.rng.standard_normal((len(part), DIMENSION)).astype(np.float32)
            iso /= math.sqrt(DIMENSION)
            noise = math.sqrt(0.7) * local + math.sqrt(0.3) * iso
            out[start : start + len(part)] = self.centres[part] + self.spread[part, None] * noise
        return unit_rows(out)

    def texts(self, topics: npt.NDArray[np.int64]) -> list[str]:
        """Chunk texts of 90-150 words: 35 % function words, 45 % Zipf vocabulary, 20 % topic."""
        rng = self.rng
        lengths = rng.integers(90, 151, size=len(topics))
        width = int(lengths.max())
        shape = (len(topics), width)
        kind = rng.random(shape)
        function = self.function_words[rng.integers(0, len(self.function_words), shape)]
        background = self.vocabulary[rng.choice(VOCABULARY, size=shape, p=self.zipf)]
        topical = self.vocabulary[
            self.topic_words[topics[:, None], rng.integers(0, TOPIC_WORDS, shape)]
        ]
        words = np.where(kind < 0.35, function, np.where(kind < 0.8, background, topical))
        return [" ".join(words[i, : lengths[i]]) for i in range(len(topics))]

    def heading(self, topic: int) -> str:
        first, second = self.rng.choice(self.topic_words[topic], size=2, replace=False)
        return f"{self.vocabulary[first]} {self.vocabulary[second]}"

    def question(self, topic: int) -> str:
        template = QUESTION_TEMPLATES[int(self.rng.integers(0, len(QUESTION_TEMPLATES)))]
        picks = self.rng.choice(self.topic_words[topic], size=2, replace=False)
        background = int(self.rng.choice(VOCABULARY, p=self.zipf))
        words = [*self.vocabulary[picks], self.vocabulary[background]]
        return template.format(*words)

    def make(self, chunks: int, queries: int) -> Corpus:
        documents = math.ceil(chunks / CHUNKS_PER_DOCUMENT)
        # Each document covers four topics; each chunk is about one of its document's topics.
        doc_topics = self.rng.choice(TOPICS, size=(documents, 4), p=self.topic_weights)
        chunk_doc = np.arange(chunks) // CHUNKS_PER_DOCUMENT
        topics = doc_topics[chunk_doc, self.rng.integers(0, 4, size=chunks)]
        texts: list[str] = []
        with progress("generating synthetic chunks", chunks) as advance:
            for start in range(0, chunks, 5_000):
                part = topics[start : start + 5_000]
                texts.extend(self.texts(part))
                advance(len(part))
        headings = [self.heading(int(t)) for t in topics]
        vectors = self.vectors(topics)
        # Held-out queries: topics drawn like the chunks' topics, vectors never stored.
        query_topics = topics[self.rng.integers(0, chunks, size=queries)]
        return Corpus(
            texts=texts,
            headings=headings,
            vectors=vectors,
            query_texts=[self.question(int(t)) for t in query_topics],
            query_vectors=self.vectors(query_topics),
        )


def bulk_load(database: Database, corpus: Corpus, batch: int) -> float:
    """Insert the corpus with bulk INSERTs; return the seconds spent in the database."""
    now = datetime.now(UTC)
    per_document = [
        corpus.texts[d * CHUNKS_PER_DOCUMENT : (d + 1) * CHUNKS_PER_DOCUMENT]
        for d in range(corpus.documents)
    ]
    documents = [
        {
            "id": d + 1,
            "source": f"synthetic://documents/{d + 1:05d}.md",
            "title": f"Synthetic document {d + 1}",
            "media_type": "text/markdown",
            "content_hash": hashlib.sha256(str(d).encode()).hexdigest(),
            "size_bytes": sum(len(t) for t in texts),
            "chunk_count": len(texts),
            "is_public": True,
            "created_at": now,
            "updated_at": now,
        }
        for d, texts in enumerate(per_document)
    ]
    seconds = 0.0
    started = time.perf_counter()
    with database.engine.begin() as conn:
        conn.execute(
            insert(VectorSpace.__table__),
            [{"model_id": MODEL_ID, "dimension": DIMENSION, "created_at": now}],
        )
        conn.execute(insert(Counter.__table__), [{"name": KNOWLEDGE_COUNTER, "value": 1}])
        conn.execute(insert(Document.__table__), documents)
    seconds += time.perf_counter() - started
    with progress(f"bulk insert ({database.backend})", corpus.size) as advance:
        for start in range(0, corpus.size, batch):
            stop = min(start + batch, corpus.size)
            chunks = [
                {
                    "id": i + 1,
                    "document_id": i // CHUNKS_PER_DOCUMENT + 1,
                    "ordinal": i % CHUNKS_PER_DOCUMENT,
                    "heading": corpus.headings[i],
                    "heading_path": [corpus.headings[i]],
                    "text": corpus.texts[i],
                    "token_count": corpus.texts[i].count(" ") + 1,
                }
                for i in range(start, stop)
            ]
            embeddings = [
                {"chunk_id": i + 1, "model_id": MODEL_ID, "embedding": corpus.vectors[i]}
                for i in range(start, stop)
            ]
            started = time.perf_counter()
            with database.engine.begin() as conn:
                conn.execute(insert(Chunk.__table__), chunks)
                conn.execute(insert(ChunkEmbedding.__table__), embeddings)
            seconds += time.perf_counter() - started
            advance(stop - start)
    if database.backend == "postgresql":
        with database.engine.begin() as conn:
            for table in ("documents", "chunks"):
                conn.execute(
                    text(
                        f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                        f"(SELECT max(id) FROM {table}))"
                    )
                )
    return seconds


def build_pg_index(database: Database, maintenance_work_mem: str | None) -> tuple[float, float]:
    """Build the HNSW index after the load, then ANALYZE; return both durations in seconds."""
    started = time.perf_counter()
    with database.session() as session:
        if maintenance_work_mem:
            session.execute(text(f"SET LOCAL maintenance_work_mem = '{maintenance_work_mem}'"))
        PgVectorIndex().prepare(session, MODEL_ID, DIMENSION)
    built = time.perf_counter() - started
    started = time.perf_counter()
    with database.engine.begin() as conn:
        conn.execute(text("ANALYZE"))
    return built, time.perf_counter() - started


class FixedVectorEmbedder:
    """Stands in for the model: returns the vector set before each query, so nothing is
    embedded and ``SearchResult.search_ms`` is the search alone."""

    model_id = MODEL_ID
    dimension = DIMENSION
    max_tokens = BuiltinEmbedder.max_tokens

    def __init__(self) -> None:
        self.vector = np.zeros(DIMENSION, dtype=np.float32)

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        return np.tile(self.vector, (len(texts), 1))

    def count_tokens(self, text_: str) -> int:
        return len(text_.split())


@dataclass(frozen=True)
class Budget:
    """Time limits: per timed scenario (stop early) and per query (cancel it)."""

    scenario_s: float
    query_s: float


@contextmanager
def query_timeout(session: Session, seconds: float) -> Iterator[None]:
    """Cancel the statements of ``session`` running after ``seconds``: ``statement_timeout``
    on PostgreSQL, ``sqlite3_interrupt`` from a timer thread on SQLite."""
    connection = session.connection()
    if connection.dialect.name == "postgresql":
        session.execute(text(f"SET LOCAL statement_timeout = {int(seconds * 1000)}"))
        yield
        return
    timer = threading.Timer(seconds, connection.connection.dbapi_connection.interrupt)
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def time_searches(
    database: Database,
    index: VectorIndex,
    principal: Principal,
    corpus: Corpus,
    query_ids: list[int],
    label: str,
    budget: Budget,
    allowed_document: int | None = None,
) -> Latencies:
    """Run :func:`search` for each query; ``wall_ms`` adds opening and closing the session.

    Stops early, after at least one query, once ``budget.scenario_s`` seconds have passed, and
    at the first query cancelled after ``budget.query_s`` seconds.
    """
    settings = KnowledgeSettings()
    embedder = FixedVectorEmbedder()
    latencies = Latencies()
    deadline = time.perf_counter() + budget.scenario_s
    with progress(label, len(query_ids)) as advance:
        for q in query_ids:
            if latencies.search_ms and time.perf_counter() > deadline:
                log(f"{label}: time budget of {budget.scenario_s:.0f} s spent, stopping early")
                break
            embedder.vector = corpus.query_vectors[q]
            started = time.perf_counter()
            try:
                with database.session() as session, query_timeout(session, budget.query_s):
                    result = search(
                        session,
                        principal,
                        corpus.query_texts[q],
                        SEARCH_K,
                        embedder=embedder,
                        index=index,
                        settings=settings,
                    )
            except StorageError as exc:
                latencies.timed_out = budget.query_s
                log(f"{label}: query cancelled after {budget.query_s:.0f} s ({exc}); stopping")
                break
            latencies.wall_ms.append((time.perf_counter() - started) * 1000)
            latencies.search_ms.append(result.search_ms)
            latencies.embed_ms.append(result.embed_ms)
            latencies.vector_ms.append(result.timings["vector_ms"])
            latencies.lexical_ms.append(result.timings["lexical_ms"])
            latencies.returned.append(len(result.hits))
            if allowed_document is not None:
                latencies.foreign_hits += sum(
                    h.document_id != allowed_document for h in result.hits
                )
            advance(1)
    return latencies


def exact_top_k(corpus: Corpus, query_ids: list[int], k: int) -> list[set[int]]:
    """Exact top-``k`` chunk ids by dot product over every vector (brute force)."""
    found: list[set[int]] = []
    for start in range(0, len(query_ids), 100):
        part = corpus.query_vectors[query_ids[start : start + 100]]
        scores = corpus.vectors @ part.T
        top = np.argpartition(-scores, k - 1, axis=0)[:k]
        found.extend({int(i) + 1 for i in top[:, j]} for j in range(top.shape[1]))
    return found


@dataclass
class RecallPoint:
    ef_search: int | None
    recall: float
    p50_ms: float
    index_scans: int | None = None


def hnsw_index_scans(database: Database) -> int:
    time.sleep(1.2)  # statistics are flushed to the cumulative view at most once a second
    with database.engine.connect() as conn:
        conn.execute(text("SELECT pg_stat_clear_snapshot()"))
        value = conn.execute(
            text("SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = :name"),
            {"name": PgVectorIndex.index_name(MODEL_ID)},
        ).scalar()
    return int(value or 0)


def measure_recall(
    database: Database, index: VectorIndex, corpus: Corpus, query_ids: list[int]
) -> list[RecallPoint]:
    """Recall@10 of the vector index (no access filter) against exact brute force."""
    truth = exact_top_k(corpus, query_ids, SEARCH_K)
    if database.backend == "postgresql":
        candidates: list[tuple[int | None, VectorIndex]] = [
            (ef, PgVectorIndex(ef_search=ef)) for ef in EF_SEARCH_VALUES
        ]
    else:
        candidates = [(None, index)]
    points = []
    for ef, candidate in candidates:
        before = hnsw_index_scans(database) if database.backend == "postgresql" else None
        overlap = 0
        timings = []
        label = f"recall@10 ({database.backend}" + (f", ef_search={ef})" if ef else ")")
        with progress(label, len(query_ids)) as advance:
            for q, expected in zip(query_ids, truth, strict=True):
                started = time.perf_counter()
                with database.session() as session:
                    hits = candidate.search(
                        session, corpus.query_vectors[q], MODEL_ID, SEARCH_K, None
                    )
                timings.append((time.perf_counter() - started) * 1000)
                overlap += len({h.chunk_id for h in hits} & expected)
                advance(1)
        scans = None
        if before is not None:
            scans = hnsw_index_scans(database) - before
        points.append(
            RecallPoint(ef, overlap / (SEARCH_K * len(query_ids)), percentile(timings, 50), scans)
        )
    return points


def restrict_access(database: Database, corpus: Corpus, hr_document: int) -> None:
    """Restrict every document to group ``eng`` except ``hr_document`` (group ``hr``)."""
    rows = [
        {"document_id": d, "principal": "group:hr" if d == hr_document else "group:eng"}
        for d in range(1, corpus.documents + 1)
    ]
    with database.engine.begin() as conn:
        conn.execute(update(Document.__table__).values(is_public=False))
        conn.execute(insert(DocumentAccess.__table__), rows)
        if database.backend == "postgresql":
            conn.execute(text("ANALYZE documents, document_access"))


@dataclass
class SyntheticResult:
    chunks: int
    insert_seconds: float
    index_seconds: float | None = None
    analyze_seconds: float | None = None
    first_query_ms: float = math.nan
    public: Latencies = field(default_factory=Latencies)
    eng: Latencies = field(default_factory=Latencies)
    hr: Latencies = field(default_factory=Latencies)
    eng_vector_ms: list[float] = field(default_factory=list)
    hr_vector_ms: list[float] = field(default_factory=list)
    recall: list[RecallPoint] = field(default_factory=list)
    recall_queries: int = 0
    pg: dict[str, str] = field(default_factory=dict)


def time_vector_retriever(
    database: Database,
    index: VectorIndex,
    principal: Principal,
    corpus: Corpus,
    query_ids: list[int],
    who: str,
) -> list[float]:
    """Time the vector retriever alone, as :func:`search` calls it (depth ``candidates``)."""
    depth = KnowledgeSettings().candidates
    timings = []
    with progress(f"vector retriever alone ({who} user)", len(query_ids)) as advance:
        for q in query_ids:
            with database.session() as session:
                readable = readable_filter(session, principal)
                started = time.perf_counter()
                index.search(session, corpus.query_vectors[q], MODEL_ID, depth, readable)
                timings.append((time.perf_counter() - started) * 1000)
            advance(1)
    return timings


def run_synthetic(
    databases: Databases, corpus: Corpus, args: argparse.Namespace
) -> SyntheticResult:
    """Load the corpus into a fresh database, build indexes, time searches and recall."""
    budget = Budget(args.budget, args.query_timeout)
    warmup_budget = Budget(min(args.budget, 30.0), args.query_timeout)
    with databases.fresh("synthetic") as database:
        log(f"[bold]{database.backend}[/bold]: loading {corpus.size:,} chunks")
        result = SyntheticResult(corpus.size, bulk_load(database, corpus, args.batch))
        log(f"inserted in {result.insert_seconds:.1f} s")
        if database.backend == "postgresql":
            result.pg = pg_settings(database)
            log("building the HNSW index (after the load) and running ANALYZE")
            result.index_seconds, result.analyze_seconds = build_pg_index(
                database, args.pg_maintenance_work_mem
            )
            log(f"HNSW index built in {result.index_seconds:.1f} s")
        settings = KnowledgeSettings()
        index = open_vector_index(
            database, settings.hnsw_ef_search, settings.exact_search_max_chunks
        )
        n_held_out = len(corpus.query_vectors)
        measured = list(range(args.queries))
        warmup = list(range(n_held_out - WARMUP_QUERIES, n_held_out))
        public = Principal(user_id=1, email="everyone@example.com", groups=())
        # The first query loads the NumPy matrix on SQLite (cold); PostgreSQL reads its buffers.
        result.first_query_ms = time_searches(
            database, index, public, corpus, warmup[:1], "first query", budget
        ).search_ms[0]
        time_searches(database, index, public, corpus, warmup[1:], "warm-up", warmup_budget)
        result.public = time_searches(
            database, index, public, corpus, measured, "searches, all documents public", budget
        )
        recall_ids = list(range(max(args.queries, RECALL_MIN_QUERIES)))
        result.recall_queries = len(recall_ids)
        result.recall = measure_recall(database, index, corpus, recall_ids)
        hr_document = corpus.documents // 2
        restrict_access(database, corpus, hr_document)
        eng = Principal(user_id=2, email="eng@example.com", groups=("eng",))
        hr = Principal(user_id=3, email="hr@example.com", groups=("hr",))
        few = measured[:VECTOR_ALONE_QUERIES]
        result.eng_vector_ms = time_vector_retriever(database, index, eng, corpus, few, "eng")
        result.hr_vector_ms = time_vector_retriever(database, index, hr, corpus, few, "hr")
        time_searches(database, index, eng, corpus, warmup, "warm-up (eng)", warmup_budget)
        result.eng = time_searches(
            database, index, eng, corpus, measured, "searches, eng user (all docs but one)", budget
        )
        time_searches(
            database, index, hr, corpus, warmup, "warm-up (hr)", warmup_budget, hr_document
        )
        result.hr = time_searches(
            database, index, hr, corpus, measured, "searches, hr user (1 doc)", budget, hr_document
        )
    return result


def synthetic_table(results: dict[str, SyntheticResult], mwm: str | None) -> Table:
    rs = list(results.values())
    size = rs[0].chunks
    docs = math.ceil(size / CHUNKS_PER_DOCUMENT)
    eng_docs = f"{docs - 1:,} of {docs:,} docs"

    def parts(latencies: Latencies) -> str:
        return (
            f"{fmt_ms(percentile(latencies.vector_ms, 50))} / "
            f"{fmt_ms(percentile(latencies.lexical_ms, 50))}"
        )

    def recall(r: SyntheticResult) -> str:
        point = r.recall[0]
        name = "exact NumPy" if point.ef_search is None else f"HNSW, ef_search={point.ef_search}"
        return f"{point.recall:.3f} ({name})"

    def optional(value: float | None, digits: int = 1) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    def counted(latencies: Latencies) -> str:
        cancelled = "" if latencies.timed_out is None else "+1 cancelled"
        return f"{len(latencies.search_ms)}{cancelled}"

    rows = [
        (
            "queries timed: public / eng / hr (fewer = time budget spent)",
            [f"{counted(r.public)} / {counted(r.eng)} / {counted(r.hr)}" for r in rs],
        ),
        (
            "insert throughput, chunks/s (storage only, embeddings precomputed)",
            [f"{r.chunks / r.insert_seconds:,.0f}" for r in rs],
        ),
        ("insert seconds", [f"{r.insert_seconds:.1f}" for r in rs]),
        (
            f"HNSW index build after the load, s (maintenance_work_mem: {mwm or 'server'})",
            [optional(r.index_seconds) for r in rs],
        ),
        ("ANALYZE, s", [optional(r.analyze_seconds) for r in rs]),
        (
            "first query, ms (SQLite: includes the cold load of the NumPy matrix)",
            [fmt_ms(r.first_query_ms) for r in rs],
        ),
        ("all documents public: search p50 / p95, ms", [search_cell(r.public) for r in rs]),
        ("  vector / lexical p50, ms", [parts(r.public) for r in rs]),
        (
            "  p50 including opening and committing the session, ms",
            [fmt_ms(percentile(r.public.wall_ms, 50)) for r in rs],
        ),
        (
            f"eng user ({eng_docs}): search p50 / p95, ms",
            [search_cell(r.eng) for r in rs],
        ),
        ("  vector / lexical p50, ms", [parts(r.eng) for r in rs]),
        (
            f"  vector retriever alone p50, ms ({VECTOR_ALONE_QUERIES} queries)",
            [fmt_ms(percentile(r.eng_vector_ms, 50)) for r in rs],
        ),
        (
            f"hr user (1 of {docs:,} docs): search p50 / p95, ms",
            [search_cell(r.hr) for r in rs],
        ),
        ("  vector / lexical p50, ms", [parts(r.hr) for r in rs]),
        (
            f"  vector retriever alone p50, ms ({VECTOR_ALONE_QUERIES} queries)",
            [fmt_ms(percentile(r.hr_vector_ms, 50)) for r in rs],
        ),
        (
            f"  queries returning k={SEARCH_K} hits / hits outside the allowed document",
            [
                f"{sum(n == SEARCH_K for n in r.hr.returned)}/{len(r.hr.returned)} / "
                f"{r.hr.foreign_hits}"
                for r in rs
            ],
        ),
        (
            f"vector recall@10 vs brute force ({rs[0].recall_queries} queries, default settings)",
            [recall(r) for r in rs],
        ),
    ]
    title = (
        f"Synthetic corpus: {size:,} chunks in {docs:,} "
        f"documents, k={SEARCH_K}, search timed without the query embedding"
    )
    return metric_table(title, list(results), rows)


def ef_search_table(result: SyntheticResult) -> Table:
    table = Table(title="PostgreSQL HNSW: recall@10 and vector-only latency by hnsw.ef_search")
    for column in ("ef_search", "recall@10", "vector search p50, ms", "HNSW index scans"):
        table.add_column(column, justify="right")
    for point in result.recall:
        table.add_row(
            str(point.ef_search),
            f"{point.recall:.3f}",
            fmt_ms(point.p50_ms),
            "-" if point.index_scans is None else str(point.index_scans),
        )
    reaching = [p.ef_search for p in result.recall if p.recall >= TARGET_RECALL]
    table.caption = (
        f"smallest ef_search reaching recall@10 >= {TARGET_RECALL}: {reaching[0]}"
        if reaching
        else f"no ef_search tried reaches recall@10 >= {TARGET_RECALL}"
    )
    return table


def targets_table(results: dict[str, SyntheticResult]) -> Table:
    size = next(iter(results.values())).chunks
    note = "" if size >= 100_000 else " (corpus below the 100,000 chunks of the target)"
    table = Table(title=f"Targets at {size:,} chunks{note}")
    for column in ("target", "backend", "measured", "verdict"):
        table.add_column(column)
    latency = f"search p50 < {TARGET_P50_MS:.0f} ms without embedding"
    for backend, r in results.items():
        for who, latencies in (("public", r.public), ("eng user", r.eng), ("hr user", r.hr)):
            p50 = latencies.p50()
            ok = p50 < TARGET_P50_MS and latencies.timed_out is None
            measured = f"{p50:.1f} ms" if math.isfinite(p50) else ""
            if latencies.timed_out is not None:
                measured += f" (a query ran > {latencies.timed_out:.0f} s)"
            table.add_row(f"{latency}, {who}", backend, measured.strip(), verdict(ok))
        point = r.recall[0]
        name = "" if point.ef_search is None else f" (ef_search={point.ef_search}, default)"
        table.add_row(
            f"recall@10 >= {TARGET_RECALL}",
            backend,
            f"{point.recall:.3f}{name}",
            verdict(point.recall >= TARGET_RECALL),
        )
    return table


# --------------------------------------------------------------------------------------------
# 3. SQLite vector options: sqlite-vec vec0 against exact NumPy


def sqlite_vec_comparison(corpus: Corpus, queries: int) -> Table | str:
    """Time vec0 brute-force KNN and NumPy exact top-10 over the same in-memory vectors."""
    try:
        import sqlite_vec
    except ImportError as exc:
        return f"skipped: sqlite-vec is not installed ({exc})"
    try:
        from pysqlite3 import dbapi2 as sqlite3
    except ImportError:
        import sqlite3
    conn = sqlite3.connect(":memory:")
    if not hasattr(conn, "enable_load_extension"):
        return "skipped: this sqlite3 module cannot load extensions (install pysqlite3-binary)"
    try:
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
        version = conn.execute("SELECT vec_version()").fetchone()[0]
        conn.execute(
            f"CREATE VIRTUAL TABLE vectors USING vec0(embedding float[{DIMENSION}] "
            "distance_metric=cosine)"
        )
        started = time.perf_counter()
        with progress("sqlite-vec insert", corpus.size) as advance:
            for start in range(0, corpus.size, 10_000):
                part = corpus.vectors[start : start + 10_000]
                conn.executemany(
                    "INSERT INTO vectors(rowid, embedding) VALUES (?, ?)",
                    ((start + i + 1, row.tobytes()) for i, row in enumerate(part)),
                )
                advance(len(part))
        conn.commit()
        insert_s = time.perf_counter() - started
        query_ids = list(range(min(queries, 100)))
        truth = exact_top_k(corpus, query_ids, SEARCH_K)
        vec_ms, numpy_ms = [], []
        vec_overlap = numpy_overlap = 0
        matrix = corpus.vectors
        with progress("sqlite-vec vs NumPy queries", len(query_ids)) as advance:
            for q, expected in zip(query_ids, truth, strict=True):
                query = corpus.query_vectors[q]
                started = time.perf_counter()
                rows = conn.execute(
                    "SELECT rowid, distance FROM vectors WHERE embedding MATCH ? AND k = ?",
                    (query.tobytes(), SEARCH_K),
                ).fetchall()
                vec_ms.append((time.perf_counter() - started) * 1000)
                vec_overlap += len({int(r[0]) for r in rows} & expected)
                started = time.perf_counter()
                scores = matrix @ query
                top = np.argpartition(-scores, SEARCH_K - 1)[:SEARCH_K]
                top = top[np.argsort(-scores[top], kind="stable")]
                numpy_ms.append((time.perf_counter() - started) * 1000)
                numpy_overlap += len({int(i) + 1 for i in top} & expected)
                advance(1)
    except Exception as exc:  # never fail the benchmark for the optional comparison
        return f"skipped: sqlite-vec failed: {type(exc).__name__}: {exc}"
    finally:
        conn.close()
    n = len(query_ids) * SEARCH_K
    title = (
        f"SQLite vector options: exact top-{SEARCH_K} over {corpus.size:,} x {DIMENSION} "
        f"float32 vectors in memory, {len(query_ids)} queries"
    )
    table = Table(title=title)
    for column in ("method", "p50, ms", "p95, ms", "recall@10", "load"):
        table.add_column(column, justify="left" if column == "method" else "right")
    table.add_row(
        f"sqlite-vec {version}: vec0 brute-force KNN (cosine)",
        fmt_ms(percentile(vec_ms, 50)),
        fmt_ms(percentile(vec_ms, 95)),
        f"{vec_overlap / n:.3f}",
        f"insert {insert_s:.1f} s",
    )
    table.add_row(
        "NumPy: matrix @ query + argpartition (NumpyVectorIndex's kernel)",
        fmt_ms(percentile(numpy_ms, 50)),
        fmt_ms(percentile(numpy_ms, 95)),
        f"{numpy_overlap / n:.3f}",
        "in process",
    )
    return table


# --------------------------------------------------------------------------------------------
# Main


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000, help="synthetic corpus size")
    parser.add_argument("--queries", type=int, default=200, help="timed queries per scenario")
    parser.add_argument("--backends", default="sqlite,postgresql", help="comma-separated")
    parser.add_argument("--skip-handbook", action="store_true", help="skip the real corpus")
    parser.add_argument("--skip-sqlite-vec", action="store_true", help="skip the vec0 comparison")
    parser.add_argument("--handbook-rounds", type=int, default=5, help="passes over questions")
    parser.add_argument("--batch", type=int, default=5_000, help="chunks per INSERT batch")
    parser.add_argument("--seed", type=int, default=20_261_129)
    parser.add_argument(
        "--query-timeout",
        type=float,
        default=60.0,
        help="seconds after which one search is cancelled (and its scenario stopped)",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=90.0,
        help="seconds per timed search scenario; slower scenarios stop early (n is reported)",
    )
    parser.add_argument(
        "--pg-maintenance-work-mem",
        default=None,
        help="maintenance_work_mem for the HNSW build, e.g. 1GB (default: the server's)",
    )
    args = parser.parse_args()
    args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = set(args.backends) - {"sqlite", "postgresql"}
    if unknown:
        parser.error(f"unknown backends: {', '.join(sorted(unknown))}")
    if args.chunks < CHUNKS_PER_DOCUMENT or args.queries < 1:
        parser.error("--chunks must be at least 100 and --queries at least 1")
    return args


def main() -> None:
    args = parse_args()
    # SIGTERM (kill, timeout) unwinds like Ctrl-C, so the PostgreSQL server and temp files go too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    started = time.perf_counter()
    console.rule("search2o search benchmark")
    log(
        f"chunks={args.chunks:,} queries={args.queries} backends={','.join(args.backends)} "
        f"cpus={os.cpu_count()} python={platform.python_version()} numpy={np.__version__} "
        f"load average={load_average()}"
    )
    tables: list[Table | str] = []
    with (
        tempfile.TemporaryDirectory(prefix="search2o-bench-") as folder,
        postgres_server("postgresql" in args.backends) as server,
    ):
        databases = {b: Databases(b, Path(folder), server) for b in args.backends}
        if not args.skip_handbook:
            log("loading the built-in embedding model (not timed)")
            model = BuiltinEmbedder()
            model.embed(["warm up the model"])
            model.count_tokens("warm up the tokenizer")
            handbook: dict[str, HandbookResult] = {}
            for backend, dbs in databases.items():
                with dbs.fresh("handbook") as database:
                    log(f"[bold]{backend}[/bold]: handbook ingestion and searches")
                    handbook[backend] = run_handbook(database, model, args.handbook_rounds)
            tables.append(handbook_table(handbook, args.handbook_rounds))
        held_out = max(args.queries, RECALL_MIN_QUERIES) + WARMUP_QUERIES
        log(f"generating the synthetic corpus ({args.chunks:,} chunks, {held_out} queries)")
        corpus = CorpusMaker(args.seed).make(args.chunks, held_out)
        synthetic: dict[str, SyntheticResult] = {}
        for backend, dbs in databases.items():
            synthetic[backend] = run_synthetic(dbs, corpus, args)
        tables.append(synthetic_table(synthetic, args.pg_maintenance_work_mem))
        if "postgresql" in synthetic:
            tables.append(ef_search_table(synthetic["postgresql"]))
            tables.append(
                "PostgreSQL: "
                + ", ".join(f"{k}={v}" for k, v in synthetic["postgresql"].pg.items())
            )
        tables.append(targets_table(synthetic))
    if args.skip_sqlite_vec:
        tables.append("SQLite vector options: skipped (--skip-sqlite-vec)")
    else:
        tables.append(sqlite_vec_comparison(corpus, args.queries))
    console.rule("results")
    for item in tables:
        console.print(item)
        console.print()
    finish(started)


if __name__ == "__main__":
    main()
