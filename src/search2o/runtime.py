"""The runtime: everything one process builds from its settings, opened and closed together.

The CLI and the app factory create one :class:`Runtime`; nothing is created at import time.
The embedding model is built lazily, so commands that do not embed (``users``, ``db``) never
load it.
"""

from __future__ import annotations

from functools import cached_property
from types import TracebackType
from typing import TYPE_CHECKING

from search2o.accounts import Principal, ensure_user, get_user
from search2o.agents.registry import AgentRegistry
from search2o.agents.runner import AgentRunner
from search2o.chat import ChatService, RunStore
from search2o.config import Settings
from search2o.crypto.keys import build_key_provider
from search2o.crypto.vault import Vault
from search2o.errors import ConfigError, KeyUnavailableError
from search2o.knowledge.store import KnowledgeStore
from search2o.memory.store import MemoryStore
from search2o.providers.chat import ChatModel, ChatModels
from search2o.providers.embeddings import Embedder, build_embedder
from search2o.query.conversations import Conversations
from search2o.query.turn import TurnEngine
from search2o.query.websearch import build_web_search
from search2o.state import StateStore, build_state_store
from search2o.state.store import DatabaseStateStore
from search2o.storage.db import Database

if TYPE_CHECKING:
    from search2o.jobs.queue import JobQueue

__all__ = ["Runtime"]

_OVERRIDABLE = frozenset({"knowledge", "memory"})


class Runtime:
    """The database, embedder, Knowledge Store and Query Engine of one process.

    Args:
        settings: the validated settings.
        migrate: apply pending migrations when opening the database.
        embedder: use this embedding model instead of building the configured one (tests,
            benchmarks: e.g. one model loaded once for many runtimes).
        chat_model: use this model for the active chat profile (``chat.profile``).
        overrides: any other part to use instead of building it: ``knowledge``, ``memory``
            (benchmarks wrap them to time them).

    Raises:
        ConfigError, StorageError: the database URL is bad or the database cannot be reached.

    """

    def __init__(
        self,
        settings: Settings,
        *,
        migrate: bool = True,
        embedder: Embedder | None = None,
        chat_model: ChatModel | None = None,
        **overrides: object,
    ) -> None:
        unknown = set(overrides) - _OVERRIDABLE
        if unknown:
            raise TypeError(f"Runtime cannot take {', '.join(sorted(unknown))}")
        self.settings = settings
        self._chat_model_override = chat_model
        # The parts are cached properties: an override is the value they would have cached.
        parts: dict[str, object] = {"embedder": embedder, **overrides}
        self.__dict__.update({name: part for name, part in parts.items() if part is not None})
        self.key_provider = build_key_provider(settings.keys, settings.data_dir)
        self.database = Database(
            settings.resolved_database_url, migrate=migrate, key_provider=self.key_provider
        )
        self.vault = Vault(self.database, self.key_provider, settings.keys.cache_size)
        try:
            self._check_key_provider()
        except BaseException:
            self.database.close()
            raise

    def _check_key_provider(self) -> None:
        """Refuse a key provider that cannot unwrap the stored data keys.

        A keyring file that went missing (or a mistyped ``keys.keyring_path``) would otherwise
        be replaced by a new one: every stored conversation unreadable, new ones sealed under a
        key nobody backed up. A keyring created by this very start is removed again.

        Raises:
            ConfigError: stored data keys are wrapped by another key-encryption key.

        """
        try:
            held = self.key_provider.key_id
        except KeyUnavailableError:  # a key service that is down: checked on first use
            return
        foreign = sorted({key_id for key_id, _ in self.vault.versions_in_use()} - {held})
        if not foreign:
            return
        found = f"keys.provider {self.settings.keys.provider!r} holds {held!r}"
        path = getattr(self.key_provider, "path", None)
        if getattr(self.key_provider, "created", False) and path is not None:
            path.unlink(missing_ok=True)
            found = f"the keyring {path} did not exist; none was created"
        raise ConfigError(
            f"the database holds data keys wrapped by key {', '.join(foreign)}, but {found}: "
            "configure the keyring or key those conversations were sealed with (restore it from "
            "backup)"
        )

    @cached_property
    def embedder(self) -> Embedder:
        """The configured embedding model (built on first use).

        An unset ``embedding.onnx_dir`` is ``<data_dir>/models``.
        """
        settings = self.settings.embedding
        if settings.onnx_dir is None:
            settings = settings.model_copy(update={"onnx_dir": self.settings.data_dir / "models"})
        return build_embedder(settings)

    @cached_property
    def knowledge(self) -> KnowledgeStore:
        """The Knowledge Store (built on first use)."""
        return KnowledgeStore(self.database, self.embedder, self.settings.knowledge)

    @cached_property
    def chat_models(self) -> ChatModels:
        """The chat models of this process, one per profile (built on first use)."""
        return ChatModels(self.settings.chat, self.embedder, self._chat_model_override)

    @property
    def chat_model(self) -> ChatModel:
        """The model of the active chat profile (the Query Engine's)."""
        return self.chat_models.get()

    @cached_property
    def turns(self) -> TurnEngine:
        """The Query Engine's turn runner (built on first use).

        Raises:
            ConfigError: the chat model or web search provider is unknown or misconfigured.

        """
        return TurnEngine(
            self.database,
            self.knowledge,
            self.chat_model,
            self.settings.chat,
            self.vault,
            build_web_search(self.settings.chat.web_search),
            self.settings.retention,
        )

    @cached_property
    def state_store(self) -> StateStore:
        """Where agent conversation state is kept: our database, or the enterprise's hooks.

        Raises:
            ConfigError: ``state.hooks`` names a hook that cannot be loaded.

        """
        return build_state_store(self.settings, self.database, self.vault)

    @cached_property
    def validation_state_store(self) -> StateStore:
        """The store of validation runs: always our database, even when hooks are set."""
        if not self.settings.state.hooks:
            return self.state_store
        return build_state_store(self.settings, self.database, self.vault, validation=True)

    @cached_property
    def memory(self) -> MemoryStore:
        """Long-term memories of users (built on first use; embeds with :attr:`embedder`)."""
        return MemoryStore(self.database, self.vault, self.embedder, self.settings.memory)

    @cached_property
    def agents(self) -> AgentRegistry:
        """Stored agent definitions, checked against the ``chat.profiles`` of the settings."""
        return AgentRegistry(self.database, self.memory, lambda: tuple(self.settings.chat.profiles))

    @cached_property
    def agent_runner(self) -> AgentRunner:
        """The Agent Engine's runner (built on first use)."""
        return AgentRunner(
            database=self.database,
            vault=self.vault,
            state_store=self.state_store,
            validation_state_store=self.validation_state_store,
            memory=self.memory,
            knowledge=self.knowledge,
            settings=self.settings,
            models=self.chat_models,
        )

    @cached_property
    def chat(self) -> ChatService:
        """The chat service every surface answers messages through (built on first use)."""
        return ChatService(
            self.settings,
            lambda: self.turns,
            lambda: self.agent_runner,
            self.agents,
            RunStore(self.database, self.vault, self.settings.runs),
        )

    @cached_property
    def jobs(self) -> JobQueue:
        """The job queue of this process (opened on first use; its consumer is not started).

        Our state store hands its compactions to it from then on. ``search2o serve`` starts a
        consumer in the server; ``search2o worker`` runs one in the foreground.

        Raises:
            ConfigError, StorageError: the queue's settings or its transport are unusable.

        """
        from search2o.jobs.kinds import COMPACT, open_job_queue

        queue = open_job_queue(self)
        store = self.state_store
        if isinstance(store, DatabaseStateStore):
            store.use_scheduler(
                lambda conversation: queue.enqueue(
                    COMPACT,
                    {"conversation": conversation},
                    dedupe_key=f"{COMPACT}:{conversation}:{store.pending_changes(conversation)}",
                )
            )
        return queue

    @cached_property
    def conversations(self) -> Conversations:
        """Conversation and message operations."""
        return Conversations(self.database, self.vault, self.settings.retention, self.state_store)

    def local_principal(self) -> Principal:
        """Return the single local user of ``auth_mode=local``, creating it once.

        It is an admin on the ``paid`` plan (its conversations do not expire by default).
        """
        with self.database.session() as session:
            # The one user of a laptop install owns it: plan paid, so nothing expires by default.
            user = ensure_user(session, self.settings.local_user_email, is_admin=True, plan="paid")
            return Principal.of(user)

    def principal_for(self, email: str | None) -> Principal:
        """Return the principal of ``email``, or the local user when ``email`` is ``None``.

        Raises:
            NotFoundError: no user with that email.

        """
        if email is None:
            return self.local_principal()
        with self.database.session() as session:
            return Principal.of(get_user(session, email))

    def close(self) -> None:
        """Stop the job queue and the state stores' background work, then the database."""
        queue = self.__dict__.pop("jobs", None)
        if queue is not None:
            queue.close()
        for name in ("validation_state_store", "state_store"):
            store = self.__dict__.pop(name, None)
            if store is not None:
                store.close()
        self.database.close()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
