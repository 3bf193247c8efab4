"""Retrieval against what users would pick instead, in one process, on the same corpus and model.

Systems, side by side:

* **search2o**: :func:`search2o.knowledge.search.search` through ``KnowledgeStore.search``:
  vector + lexical (FTS5 BM25 on SQLite, ``ts_rank`` on PostgreSQL) fused by Reciprocal Rank
  Fusion.
* **Open WebUI hybrid**, built as Open WebUI's ``query_doc_with_hybrid_search`` builds it
  (``backend/open_webui/retrieval/utils.py``; defaults from ``config.py``): LangChain's
  ``BM25Retriever.from_texts`` (``rank_bm25``'s BM25Okapi over whitespace tokens, no lower-casing,
  Open WebUI's default) and a vector retriever over a **Chroma** collection (``hnsw:space``
  cosine, as Open WebUI's ``ChromaClient`` creates it), fused by LangChain's
  ``EnsembleRetriever`` with weights ``[RAG_HYBRID_BM25_WEIGHT, 1 - weight]`` = ``[0.5, 0.5]``
  (weighted RRF, ``c`` = 60), then Open WebUI's compression step: with no reranking model
  configured (the default), every fused document is re-scored by the cosine of its embedding to
  the query's and the best ``top_k_reranker`` kept (``RAG_RELEVANCE_THRESHOLD`` 0: nothing cut).
  Open WebUI's defaults ``RAG_TOP_K`` = ``RAG_TOP_K_RERANKER`` = 3 are raised to the depth every
  system here ranks (30), so recall@5 can be measured. The cosine re-scoring uses the stored
  chunk vectors (what Chroma holds), so nothing is embedded twice.
* **BM25**: ``bm25s`` (Lucene BM25, k1 1.5, b 0.75) with its English stop words and PyStemmer's
  English stemmer.
* **vector (Chroma)**: the same Chroma collection alone: Open WebUI's retrieval when hybrid
  search is off (its default).

Every system ranks the same chunks (those search2o's ingestion made) with the same vectors
(built-in all-MiniLM-L6-v2, stored by search2o and handed to Chroma) and the same query text.

Sets:

1. **Handbook** (``../shared/data/handbook`` and ``handbook-eval/public.jsonl``): each
   conversation is played through the real turn engine (built-in chat model), and the query the
   model wrote for each grounded turn is what every system is asked. Hit@3 (a gold file among
   the first 3 distinct documents) and recall@5 (share of the turn's gold files among the first
   5 distinct documents).
2. **MTRAG-UN** (``../shared/data/mtrag-un``, as ``bench/qa_eval.py`` runs it): the corpus is
   the union of the tasks' gold contexts; each task's earlier turns are stored as the
   conversation's history and its last user turn is run through the turn engine; the query the
   model wrote is what every system is asked. Recall@5 (distinct documents, against the qrels)
   per turn type. A turn on which the model did not search counts 0 for every system.
3. **Synthetic corpus** (``bench/search.py``'s generator, ``--chunks`` default 100,000): search
   latency p50/p95 **without the query embedding**: ours on SQLite and PostgreSQL (pgserver)
   through :func:`search2o.knowledge.search.search` given the query vector; the peers given the
   same vector (Chroma ``query_embeddings``; the Open WebUI pipeline's embedding function is a
   stand-in returning it). Open WebUI also rebuilds the BM25 index from the whole collection on
   every query (``VECTOR_DB_CLIENT.get`` + ``BM25Retriever.from_texts``); that is timed apart on
   a few queries (``--rebuild-queries``) and the ensemble row keeps the index built once.

Each system ranks ``DEPTH`` = 30 chunks; the first 5 distinct documents are judged, as
``bench/qa_eval.py`` does for ours.

Targets (issue item 7), printed PASS/FAIL: our recall@5 at least every peer's on both sets; our
search p50 at 100,000 chunks at most 10 ms on SQLite and 15 ms on PostgreSQL.

Run from the repository root (peers are bench-only dependencies: ``.venv/bin/pip install -e
'.[bench]'``; a missing one is skipped with the reason)::

    .venv/bin/python bench/retrieval.py                          # about 40 minutes on 2 cores
    .venv/bin/python bench/retrieval.py --skip-synthetic --mtrag-limit 50
    .venv/bin/python bench/retrieval.py --skip-handbook --skip-mtrag --backends sqlite
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import platform
import signal
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")  # Chroma's telemetry switch

import numpy as np
import numpy.typing as npt
import qa_eval
import search as searchbench
from benchkit import (
    console,
    finish,
    load_average,
    log,
    p50_p95,
    percentile,
    postgres_server,
    verdict,
)
from rich.table import Table
from sqlalchemy import select

from search2o.accounts import Principal
from search2o.config import load_settings
from search2o.knowledge.access import AccessList
from search2o.knowledge.settings import KnowledgeSettings
from search2o.runtime import Runtime
from search2o.storage.models import Chunk, ChunkEmbedding, Document
from search2o.storage.vectors import open_vector_index

DEPTH = 30
DOCS = 5
SEARCH_K = 10
OURS = "search2o"
OPENWEBUI = "Open WebUI hybrid"
BM25 = "BM25 (bm25s)"
VECTOR = "vector (Chroma)"
SYSTEMS = (OURS, OPENWEBUI, BM25, VECTOR)
OPENWEBUI_BM25_WEIGHT = 0.5  # RAG_HYBRID_BM25_WEIGHT's default
TARGET_P50_MS = {"sqlite": 10.0, "postgresql": 15.0}
MTRAG_KINDS = ("First turn", "Follow-up", "Clarification")
Vector = npt.NDArray[np.float32]


# --------------------------------------------------------------------------------------------
# The corpus every system ranks


@dataclass
class Corpus:
    """Chunks as search2o stored them: ids, their documents' sources, texts and unit vectors."""

    chunk_ids: list[int]
    sources: list[str]
    texts: list[str]
    vectors: Vector

    def __len__(self) -> int:
        return len(self.chunk_ids)


def stored_corpus(runtime: Runtime) -> Corpus:
    """Read every chunk with its document's source and its vector from search2o's database."""
    model = runtime.embedder.model_id
    with runtime.database.session() as session:
        rows = session.execute(
            select(Chunk.id, Document.source, Chunk.text, ChunkEmbedding.embedding)
            .join(Document, Document.id == Chunk.document_id)
            .join(ChunkEmbedding, ChunkEmbedding.chunk_id == Chunk.id)
            .where(ChunkEmbedding.model_id == model)
            .order_by(Chunk.id)
        ).all()
    vectors = np.vstack([np.asarray(r[3], dtype=np.float32) for r in rows])
    return Corpus([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], vectors)


# --------------------------------------------------------------------------------------------
# Peers: each ranks corpus positions for a query text and its vector


class Ranker(Protocol):
    """A retrieval system: ``rank(text, vector, depth)`` -> corpus positions, best first."""

    name: str

    def rank(self, text: str, vector: Vector, depth: int) -> list[int]:
        """Return at most ``depth`` corpus positions for the query, best first."""
        ...


class Bm25sRanker:
    """bm25s with English stop words and PyStemmer's English stemmer."""

    name = BM25

    def __init__(self, texts: list[str]) -> None:
        import bm25s
        import Stemmer

        logging.getLogger("bm25s").setLevel(logging.WARNING)
        self._bm25s = bm25s
        self._stem = Stemmer.Stemmer("english").stemWords
        self.size = len(texts)
        self.retriever = bm25s.BM25()
        self.retriever.index(self._tokens(texts, True), show_progress=False)

    def _tokens(self, texts: list[str], ids: bool) -> Any:
        return self._bm25s.tokenize(
            texts, stopwords="en", stemmer=self._stem, show_progress=False, return_ids=ids
        )

    def rank(self, text: str, vector: Vector, depth: int) -> list[int]:
        docs, scores = self.retriever.retrieve(
            self._tokens([text], False), k=min(depth, self.size), show_progress=False
        )
        return [int(d) for d, s in zip(docs[0], scores[0], strict=True) if s > 0]


class ChromaRanker:
    """A Chroma collection as Open WebUI's ``ChromaClient`` makes it (persistent, cosine)."""

    name = VECTOR

    def __init__(self, folder: Path, texts: list[str], vectors: Vector) -> None:
        import chromadb
        from chromadb.config import Settings
        from chromadb.utils.batch_utils import create_batches

        self.client = chromadb.PersistentClient(
            path=str(folder), settings=Settings(allow_reset=True, anonymized_telemetry=False)
        )
        self.collection = self.client.get_or_create_collection(
            name="knowledge", metadata={"hnsw:space": "cosine"}
        )
        ids = [str(i) for i in range(len(texts))]
        metadatas = [{"position": i} for i in range(len(texts))]
        for batch in create_batches(
            api=self.client,
            ids=ids,
            embeddings=vectors.tolist(),
            metadatas=metadatas,  # type: ignore[arg-type]
            documents=texts,
        ):
            self.collection.add(*batch)

    def query(self, vector: Vector, depth: int) -> dict[str, Any]:
        """Chroma's ``query`` as Open WebUI's ``ChromaClient.search`` calls it."""
        result: dict[str, Any] = self.collection.query(
            query_embeddings=[vector.tolist()], n_results=depth
        )  # type: ignore[assignment]
        return result

    def rank(self, text: str, vector: Vector, depth: int) -> list[int]:
        return [int(i) for i in self.query(vector, depth)["ids"][0]]


class OpenWebUIRanker:
    """Open WebUI's hybrid search with LangChain (see the module docstring).

    The embedding function is a stand-in: the query's vector is set before each ``rank`` and
    documents are looked up by their corpus position, so no model runs inside the pipeline.
    """

    name = OPENWEBUI

    def __init__(self, chroma: ChromaRanker, texts: list[str], vectors: Vector) -> None:
        from langchain_classic.retrievers import ContextualCompressionRetriever, EnsembleRetriever
        from langchain_community.retrievers import BM25Retriever
        from langchain_core.callbacks import CallbackManagerForRetrieverRun
        from langchain_core.documents import BaseDocumentCompressor, Document
        from langchain_core.retrievers import BaseRetriever

        self.chroma = chroma
        self.texts = texts
        self.vectors = vectors
        self.query_vector = np.zeros(vectors.shape[1], dtype=np.float32)
        self.depth = DEPTH
        owner = self
        self._document = Document

        class ChromaRetriever(BaseRetriever):
            """Open WebUI's ``VectorSearchRetriever``: the collection's top ``top_k``."""

            def _get_relevant_documents(
                self, query: str, *, run_manager: CallbackManagerForRetrieverRun
            ) -> list[Document]:
                found = owner.chroma.query(owner.query_vector, owner.depth)
                return [
                    Document(page_content=text, metadata=dict(meta))
                    for text, meta in zip(found["documents"][0], found["metadatas"][0], strict=True)
                ]

        class CosineRescore(BaseDocumentCompressor):
            """Open WebUI's compressor without a reranking model: cosine to the query, top n."""

            top_n: int = DEPTH

            def compress_documents(
                self, documents: Any, query: str, callbacks: Any = None
            ) -> list[Document]:
                docs = list(documents)
                if not docs:
                    return []
                positions = [int(d.metadata["position"]) for d in docs]
                scores = owner.vectors[positions] @ owner.query_vector
                order = np.argsort(-scores, kind="stable")[: self.top_n]
                return [docs[int(i)] for i in order]

        self._bm25_class = BM25Retriever
        self.bm25 = self._bm25(texts, [{"position": i} for i in range(len(texts))])
        self.vector_retriever = ChromaRetriever()
        self.ensemble = EnsembleRetriever(
            retrievers=[self.bm25, self.vector_retriever],
            weights=[OPENWEBUI_BM25_WEIGHT, 1.0 - OPENWEBUI_BM25_WEIGHT],
        )
        self.pipeline = ContextualCompressionRetriever(
            base_compressor=CosineRescore(), base_retriever=self.ensemble
        )

    def _bm25(self, texts: list[str], metadatas: list[Any]) -> Any:
        """``BM25Retriever.from_texts`` as Open WebUI calls it (default preprocessing)."""
        retriever = self._bm25_class.from_texts(texts=texts, metadatas=metadatas)
        retriever.k = self.depth
        return retriever

    def rebuild_seconds(self) -> float:
        """Time Open WebUI's per-query step: fetch the whole collection, build BM25 from it."""
        started = time.perf_counter()
        everything = self.chroma.collection.get()
        self._bm25(list(everything["documents"] or []), list(everything["metadatas"] or []))
        return time.perf_counter() - started

    def rank(self, text: str, vector: Vector, depth: int) -> list[int]:
        self.query_vector = vector
        self.depth = depth
        self.bm25.k = depth
        self.pipeline.base_compressor.top_n = depth  # type: ignore[attr-defined]
        found = self.pipeline.invoke(text)
        return [int(d.metadata["position"]) for d in found]


class OursRanker:
    """search2o's hybrid search through the Knowledge Store (the query is embedded inside)."""

    name = OURS

    def __init__(self, runtime: Runtime, corpus: Corpus) -> None:
        self.runtime = runtime
        self.principal = runtime.local_principal()
        self.position = {cid: i for i, cid in enumerate(corpus.chunk_ids)}

    def rank(self, text: str, vector: Vector, depth: int) -> list[int]:
        hits = self.runtime.knowledge.search(self.principal, text, depth).hits
        return [self.position[h.chunk_id] for h in hits]


def make_peers(
    corpus: Corpus, folder: Path, wanted: Iterable[str]
) -> tuple[list[Ranker], list[str]]:
    """Build every peer that installs here; return them and one line per peer skipped."""
    peers: list[Ranker] = []
    skipped: list[str] = []
    wanted = set(wanted)
    chroma: ChromaRanker | None = None
    if wanted & {VECTOR, OPENWEBUI}:
        try:
            chroma = ChromaRanker(folder, corpus.texts, corpus.vectors)
        except ImportError as exc:
            skipped.append(f"{VECTOR} and {OPENWEBUI} skipped: {exc} (pip install -e '.[bench]')")
    if chroma is not None and OPENWEBUI in wanted:
        try:
            peers.append(OpenWebUIRanker(chroma, corpus.texts, corpus.vectors))
        except ImportError as exc:
            skipped.append(f"{OPENWEBUI} skipped: {exc} (pip install -e '.[bench]')")
    if BM25 in wanted:
        try:
            peers.append(Bm25sRanker(corpus.texts))
        except ImportError as exc:
            skipped.append(f"{BM25} skipped: {exc} (pip install -e '.[bench]')")
    if chroma is not None and VECTOR in wanted:
        peers.append(chroma)
    return peers, skipped


# --------------------------------------------------------------------------------------------
# Recall on the handbook and MTRAG-UN


@dataclass
class Asked:
    """One judged turn: its kind, the query the model wrote (``None``: it did not search)."""

    kind: str
    query: str | None
    gold: frozenset[str]


@dataclass
class RecallSet:
    """Per system, per turn kind, the recall@5 (and hit@3) of every judged turn."""

    name: str
    chunks: int
    turns: int
    recall: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    hit3: dict[str, list[float]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)


def first_documents(corpus: Corpus, positions: list[int], n: int) -> list[str]:
    """Return the sources of the first ``n`` distinct documents among ranked positions."""
    seen: dict[str, None] = {}
    for position in positions:
        seen.setdefault(corpus.sources[position], None)
        if len(seen) == n:
            break
    return list(seen)


def judge(
    name: str,
    runtime: Runtime,
    asked: list[Asked],
    folder: Path,
    key: Callable[[str], str],
    systems: Iterable[str],
) -> RecallSet:
    """Ask every system each turn's written query; ``key`` maps a source to a gold id."""
    corpus = stored_corpus(runtime)
    log(f"{name}: {len(corpus):,} chunks; building the peers' indexes over them")
    peers, skipped = make_peers(corpus, folder, systems)
    rankers: list[Ranker] = [OursRanker(runtime, corpus), *peers]
    result = RecallSet(name, len(corpus), len(asked), skipped=skipped)
    queries = sorted({a.query for a in asked if a.query})
    vectors = dict(zip(queries, runtime.embedder.embed(queries), strict=True)) if queries else {}
    for ranker in rankers:
        by_kind: dict[str, list[float]] = defaultdict(list)
        hits: list[float] = []
        for turn in asked:
            docs: list[str] = []
            if turn.query:
                ranked = ranker.rank(turn.query, vectors[turn.query], DEPTH)
                docs = [key(s) for s in first_documents(corpus, ranked, DOCS)]
            share = len(turn.gold & set(docs)) / len(turn.gold)
            by_kind[turn.kind].append(share)
            by_kind["all"].append(share)
            hits.append(float(bool(turn.gold & set(docs[:3]))))
        result.recall[ranker.name] = dict(by_kind)
        result.hit3[ranker.name] = hits
    return result


def handbook_turns(runtime: Runtime) -> list[Asked]:
    """Play the handbook conversations; return each grounded turn's written query and gold."""
    principal = runtime.local_principal()
    runtime.knowledge.ingest_paths([qa_eval.DATA / "handbook"], AccessList())
    asked = []
    for line in (qa_eval.DATA / "handbook-eval" / "public.jsonl").read_text().splitlines():
        conversation = None
        for spec in json.loads(line)["turns"]:
            turn = qa_eval._events(runtime, principal, spec["user"], conversation)
            conversation = turn["conversation_id"]
            if spec["expect"] == "grounded" and spec.get("gold_files"):
                calls = turn["tool_calls"]
                query = calls[0]["arguments"]["query"] if calls else None
                asked.append(Asked("grounded", query, frozenset(spec["gold_files"])))
    return asked


def mtrag_turns(runtime: Runtime, limit: int | None) -> list[Asked]:
    """Run each MTRAG-UN task's last turn after its stored history (as ``qa_eval.py`` does)."""
    principal = runtime.local_principal()
    with tempfile.TemporaryDirectory() as folder:
        qa_eval._mtrag_corpus(Path(folder), limit)
        runtime.knowledge.ingest_paths([Path(folder)], AccessList())
    relevant = qa_eval._qrels()
    tasks = [
        json.loads(line)
        for line in (qa_eval.DATA / "mtrag-un" / "reference.jsonl").read_text().splitlines()
    ][:limit]
    asked = []
    for n, task in enumerate(tasks, start=1):
        gold = relevant.get(task["task_id"], set())
        if not gold:
            continue
        history, last = task["input"][:-1], task["input"][-1]
        kind = task["Multi-Turn"][0] if task["Multi-Turn"] != ["N/A"] and history else "First turn"
        seeded = qa_eval._seed(runtime, principal, history)
        turn = qa_eval._events(runtime, principal, last["text"], seeded)
        calls = turn["tool_calls"]
        asked.append(
            Asked(kind, calls[0]["arguments"]["query"] if calls else None, frozenset(gold))
        )
        if n % 50 == 0:
            log(f"MTRAG-UN: {n}/{len(tasks)} turns run")
    return asked


def recall_sets(args: argparse.Namespace, folder: Path) -> list[RecallSet]:
    """Run the handbook and MTRAG-UN sets, each in a fresh runtime (SQLite)."""
    sets = []
    if not args.skip_handbook:
        with (
            tempfile.TemporaryDirectory(dir=folder) as data_dir,
            Runtime(load_settings(data_dir=Path(data_dir))) as runtime,
        ):
            log("handbook: playing the conversations through the turn engine")
            asked = handbook_turns(runtime)
            sets.append(
                judge("handbook", runtime, asked, Path(data_dir) / "chroma", _file_name, SYSTEMS)
            )
    if not args.skip_mtrag:
        with (
            tempfile.TemporaryDirectory(dir=folder) as data_dir,
            Runtime(load_settings(data_dir=Path(data_dir))) as runtime,
        ):
            log("MTRAG-UN: ingesting the contexts and running each task's last turn")
            asked = mtrag_turns(runtime, args.mtrag_limit)
            sets.append(
                judge("MTRAG-UN", runtime, asked, Path(data_dir) / "chroma", _stem, SYSTEMS)
            )
    return sets


def _file_name(source: str) -> str:
    return Path(source).name


def _stem(source: str) -> str:
    return Path(source).stem


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else math.nan


def recall_table(result: RecallSet) -> Table:
    kinds = ["grounded"] if result.name == "handbook" else [*MTRAG_KINDS]
    table = Table(
        title=f"{result.name}: recall@5 of the model-written query (first {DOCS} distinct "
        f"documents of {DEPTH} chunks; {result.chunks:,} chunks, {result.turns} judged turns)"
    )
    table.add_column("system")
    first = next(iter(result.recall.values()), {})
    for kind in [*kinds, "all"] if len(kinds) > 1 else kinds:
        table.add_column(f"{kind}\n({len(first.get(kind, []))})", justify="right")
    table.add_column("hit@3", justify="right")
    for system, by_kind in result.recall.items():
        cells = [
            f"{_mean(by_kind.get(k, [])):.3f}"
            for k in ([*kinds, "all"] if len(kinds) > 1 else kinds)
        ]
        table.add_row(system, *cells, f"{_mean(result.hit3[system]):.3f}")
    return table


# --------------------------------------------------------------------------------------------
# Latency on the synthetic corpus


@dataclass
class Timed:
    """Per-query latencies (ms) of one system on the synthetic corpus."""

    system: str
    ms: list[float] = field(default_factory=list)
    build_s: float = math.nan
    note: str = ""


def time_ours(
    databases: searchbench.Databases, corpus: searchbench.Corpus, args: argparse.Namespace
) -> Timed:
    """Load the corpus on one backend and time :func:`search` without the embedding."""
    backend = databases.backend
    result = Timed(f"{OURS} {backend}")
    with databases.fresh("retrieval") as database:
        started = time.perf_counter()
        searchbench.bulk_load(database, corpus, args.batch)
        if backend == "postgresql":
            searchbench.build_pg_index(database, None)
        result.build_s = time.perf_counter() - started
        settings = KnowledgeSettings()
        index = open_vector_index(
            database, settings.hnsw_ef_search, settings.exact_search_max_chunks
        )
        public = Principal(user_id=1, email="everyone@example.com", groups=())
        budget = searchbench.Budget(args.budget, args.query_timeout)
        held_out = len(corpus.query_vectors)
        warmup = list(range(held_out - searchbench.WARMUP_QUERIES, held_out))
        searchbench.time_searches(database, index, public, corpus, warmup, "warm-up", budget)
        latencies = searchbench.time_searches(
            database, index, public, corpus, list(range(args.queries)), f"ours ({backend})", budget
        )
        result.ms = latencies.search_ms
        result.note = (
            f"vector / lexical p50 {percentile(latencies.vector_ms, 50):.2f} / "
            f"{percentile(latencies.lexical_ms, 50):.2f} ms"
        )
    return result


def time_peers(corpus: searchbench.Corpus, folder: Path, args: argparse.Namespace) -> list[Timed]:
    """Build each peer over the synthetic corpus and time its queries (vector given)."""
    texts = corpus.texts
    results: list[Timed] = []
    started = time.perf_counter()
    log(f"peers: building Chroma, rank_bm25 and bm25s indexes over {len(texts):,} chunks")
    peers, skipped = make_peers(
        Corpus(list(range(len(texts))), [""] * len(texts), texts, corpus.vectors),
        folder,
        SYSTEMS,
    )
    log(f"peers built in {time.perf_counter() - started:.0f} s")
    for line in skipped:
        log(line)
    for peer in peers:
        timed = Timed(peer.name)
        deadline = time.perf_counter() + args.budget
        for q in range(searchbench.WARMUP_QUERIES):
            peer.rank(corpus.query_texts[-1 - q], corpus.query_vectors[-1 - q], SEARCH_K)
        for q in range(args.queries):
            if timed.ms and time.perf_counter() > deadline:
                timed.note = (
                    f"time budget of {args.budget:.0f} s spent after {len(timed.ms)} queries"
                )
                break
            t0 = time.perf_counter()
            peer.rank(corpus.query_texts[q], corpus.query_vectors[q], SEARCH_K)
            timed.ms.append((time.perf_counter() - t0) * 1000)
        results.append(timed)
        if isinstance(peer, OpenWebUIRanker) and args.rebuild_queries:
            rebuild = Timed(f"{OPENWEBUI}: per-query BM25 rebuild (Open WebUI's code path)")
            for _ in range(args.rebuild_queries):
                rebuild.ms.append(peer.rebuild_seconds() * 1000)
            rebuild.note = "collection.get() + BM25Retriever.from_texts, added to every query"
            results.append(rebuild)
    return results


def latency_table(rows: list[Timed], chunks: int) -> Table:
    table = Table(
        title=f"Synthetic corpus, {chunks:,} chunks: search latency without the query "
        f"embedding, ms (top {SEARCH_K})"
    )
    for column in ("system", "queries", "p50 / p95", "note"):
        table.add_column(column, justify="left" if column in ("system", "note") else "right")
    for row in rows:
        table.add_row(row.system, str(len(row.ms)), p50_p95(row.ms), row.note)
    return table


# --------------------------------------------------------------------------------------------
# Targets and main


def targets_table(sets: list[RecallSet], timed: list[Timed], chunks: int) -> Table:
    table = Table(title="Targets (issue item 7)")
    for column in ("target", "measured", "verdict"):
        table.add_column(column)
    for result in sets:
        mine = _mean(result.recall[OURS]["all"])
        peers = {s: _mean(r["all"]) for s, r in result.recall.items() if s != OURS}
        measured = f"{mine:.3f} vs " + ", ".join(f"{s} {v:.3f}" for s, v in peers.items())
        ok = all(mine >= v for v in peers.values()) if peers else None
        table.add_row(f"{result.name}: our recall@5 >= every peer's", measured, verdict(ok))
    for row in timed:
        backend = row.system.removeprefix(f"{OURS} ")
        if backend in TARGET_P50_MS and row.ms:
            p50 = percentile(row.ms, 50)
            limit = TARGET_P50_MS[backend]
            table.add_row(
                f"our search p50 at {chunks:,} chunks on {backend} <= {limit:g} ms",
                f"{p50:.2f} ms (p95 {percentile(row.ms, 95):.2f})",
                verdict(p50 <= limit),
            )
    return table


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-handbook", action="store_true")
    parser.add_argument("--skip-mtrag", action="store_true")
    parser.add_argument("--mtrag-limit", type=int, default=None, help="first N tasks only")
    parser.add_argument("--skip-synthetic", action="store_true")
    parser.add_argument("--chunks", type=int, default=100_000, help="synthetic corpus size")
    parser.add_argument("--queries", type=int, default=200, help="timed queries per system")
    parser.add_argument("--backends", default="sqlite,postgresql", help="ours, comma-separated")
    parser.add_argument("--skip-peer-latency", action="store_true", help="time ours only")
    parser.add_argument(
        "--rebuild-queries", type=int, default=3, help="Open WebUI per-query rebuilds timed"
    )
    parser.add_argument("--budget", type=float, default=120.0, help="seconds per timed system")
    parser.add_argument("--query-timeout", type=float, default=60.0)
    parser.add_argument("--batch", type=int, default=5_000, help="chunks per INSERT batch")
    parser.add_argument("--seed", type=int, default=20_261_129)
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if set(args.backends) - {"sqlite", "postgresql"}:
        parser.error("--backends takes sqlite and/or postgresql")
    if args.chunks < searchbench.CHUNKS_PER_DOCUMENT or args.queries < 1:
        parser.error("--chunks must be at least 100 and --queries at least 1")
    return args


def main() -> None:
    args = parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    warnings.filterwarnings("ignore")
    logging.basicConfig(level=logging.WARNING)
    started = time.perf_counter()
    console.rule("search2o retrieval against Open WebUI hybrid, BM25 and vector search")
    log(
        f"cpus={os.cpu_count()} python={platform.python_version()} numpy={np.__version__} "
        f"load average={load_average()}"
    )
    timed: list[Timed] = []
    with tempfile.TemporaryDirectory(prefix="search2o-bench-retrieval-") as tmp:
        folder = Path(tmp)
        sets = recall_sets(args, folder)
        if not args.skip_synthetic:
            held_out = args.queries + searchbench.WARMUP_QUERIES
            log(f"generating the synthetic corpus ({args.chunks:,} chunks)")
            corpus = searchbench.CorpusMaker(args.seed).make(args.chunks, held_out)
            with postgres_server("postgresql" in args.backends) as server:
                for backend in args.backends:
                    log(f"[bold]{OURS}[/bold] on {backend} (load {load_average()})")
                    databases = searchbench.Databases(backend, folder, server)
                    timed.append(time_ours(databases, corpus, args))
            if not args.skip_peer_latency:
                log(f"peers (load {load_average()})")
                timed.extend(time_peers(corpus, folder / "synthetic-chroma", args))
    console.rule("results")
    for result in sets:
        console.print(recall_table(result))
        for line in result.skipped:
            console.print(line, style="yellow", markup=False)
    if timed:
        console.print(latency_table(timed, args.chunks))
    console.print(targets_table(sets, timed, args.chunks))
    finish(
        started,
        args.json,
        {
            "recall": [
                {
                    "set": r.name,
                    "chunks": r.chunks,
                    "recall@5": {
                        s: {k: round(_mean(v), 4) for k, v in by.items()}
                        for s, by in r.recall.items()
                    },
                    "hit@3": {s: round(_mean(v), 4) for s, v in r.hit3.items()},
                }
                for r in sets
            ],
            "latency_ms": {
                t.system: [round(percentile(t.ms, q), 3) for q in (50, 95)] for t in timed if t.ms
            },
        },
    )


if __name__ == "__main__":
    main()
