"""Per-conversation data keys: create, unwrap (cached), seal and open records, re-wrap.

Each conversation gets a random 256-bit data key when it is created, stored only wrapped by the
KEK of the configured :class:`~search2o.crypto.keys.KeyProvider` (table ``conversation_keys``).
Records of the conversation — title, messages, summary, traces, agent state — are sealed with
that data key and associated data naming the kind, the conversation and its owner
(:mod:`search2o.crypto.envelope`). Deleting the conversation deletes the key with it.

Each user also gets a data key (table ``user_keys``) for what belongs to the user across
conversations — long-term memories (:mod:`search2o.memory`) — with associated data naming the
kind, the scope ``user:<id>`` and the owner. Deleting the user deletes the key.

Unwrapped data keys are kept in a bounded in-process LRU cache (``keys.cache_size``), so a turn
unwraps at most once; a rotation changes only the wrapping, never the data keys, so the cache
stays valid.
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter as Tally
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from sqlalchemy import bindparam, func, inspect, select
from sqlalchemy.orm import Session

from search2o.crypto.envelope import associated_data, new_data_key, open_json, seal_json
from search2o.crypto.keys import KeyProvider, WrappedKey
from search2o.errors import NotFoundError
from search2o.storage import dialect
from search2o.storage.db import Database
from search2o.storage.memory_models import UserKey
from search2o.storage.models import ConversationKey, Source, utcnow

__all__ = ["RewrapReport", "Sealer", "Vault"]

_REWRAP_BATCH = 500
_KEY_TABLES = (ConversationKey, UserKey, Source)
"""Every table whose rows hold a data key wrapped by the KEK (``kek_id``, ``kek_version``)."""


@dataclass(frozen=True)
class RewrapReport:
    """What a re-wrap did: keys re-wrapped to ``version``, keys already there."""

    version: int
    rewrapped: int
    unchanged: int


@dataclass(frozen=True)
class Sealer:
    """Seals and opens the records of one conversation (its data key, id and owner).

    A user's sealer (:meth:`Vault.user_sealer`) has the scope ``user:<id>`` in place of the
    conversation id.
    """

    conversation_id: str
    owner_id: int
    _key: bytes

    def seal(self, kind: str, value: Any) -> bytes:
        """Seal ``value`` (JSON-serialisable) as a record of ``kind``.

        Raises:
            TypeError: ``value`` is not JSON-serialisable.

        """
        return seal_json(self._key, value, self._aad(kind))

    def open(self, kind: str, blob: bytes, what: str | None = None) -> Any:
        """Open a record of ``kind`` sealed for this conversation and owner.

        Raises:
            IntegrityCheckError: altered, or sealed for another conversation, owner or kind.

        """
        label = what or f"{kind} of conversation {self.conversation_id}"
        return open_json(self._key, blob, self._aad(kind), label)

    def derive(self, purpose: str) -> bytes:
        """Return a 32-byte key for ``purpose``, derived from the data key of this scope.

        HKDF-SHA256 (RFC 5869) with ``info`` = purpose + scope + owner, so keys of two
        purposes, scopes or owners are unrelated; the data key itself never leaves the sealer.
        """
        info = f"search2o/{purpose}/{self.conversation_id}/{self.owner_id}".encode()
        return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(self._key)

    def _aad(self, kind: str) -> bytes:
        return associated_data(kind, self.conversation_id, self.owner_id)


_USER_KEY = select(UserKey.kek_id, UserKey.kek_version, UserKey.wrapped).where(
    UserKey.user_id == bindparam("user_id")
)


class Vault:
    """Data keys of conversations and users, wrapped by ``provider``'s KEK.

    Args:
        database: where ``conversation_keys`` lives.
        provider: the key provider.
        cache_size: how many unwrapped data keys to keep in memory (0 = none).

    """

    def __init__(self, database: Database, provider: KeyProvider, cache_size: int = 4096) -> None:
        self._db = database
        self.provider = provider
        self._cache: OrderedDict[str, bytes] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def create(self, session: Session, conversation_id: str, owner_id: int) -> Sealer:
        """Give a new conversation its data key (inside the caller's transaction)."""
        data_key = new_data_key()
        wrapped = self.provider.wrap(data_key)
        session.add(
            ConversationKey(
                conversation_id=conversation_id,
                kek_id=wrapped.key_id,
                kek_version=wrapped.version,
                wrapped=wrapped.blob,
            )
        )
        self._remember(conversation_id, data_key)
        return Sealer(conversation_id, owner_id, data_key)

    def sealer(self, session: Session, conversation_id: str, owner_id: int) -> Sealer:
        """Return the sealer of an existing conversation.

        Raises:
            NotFoundError: the conversation has no data key (it was deleted).
            KeyUnavailableError: the KEK version that wraps it is retired or unreachable.
            IntegrityCheckError: the wrapped key was altered.

        """
        with self._lock:
            data_key = self._cache.get(conversation_id)
            if data_key is not None:
                self._cache.move_to_end(conversation_id)
        if data_key is None:
            row = session.get(ConversationKey, conversation_id)
            if row is None:
                raise NotFoundError(f"conversation {conversation_id!r} not found")
            data_key = self.provider.unwrap(
                WrappedKey(row.kek_id, row.kek_version, bytes(row.wrapped))
            )
            self._remember(conversation_id, data_key)
        return Sealer(conversation_id, owner_id, data_key)

    def forget(self, conversation_id: str) -> None:
        """Drop a deleted conversation's key from the cache."""
        with self._lock:
            self._cache.pop(conversation_id, None)

    def user_sealer(self, session: Session, user_id: int, create: bool = False) -> Sealer:
        """Return the sealer of one user's own records (memories): scope ``user:<user_id>``.

        The key row is read on every call (one primary-key lookup); its unwrapped data key is
        cached by the wrapped blob, so a key created in a transaction that rolled back is never
        used again.

        Args:
            session: the caller's transaction; a new key is written inside it.
            user_id: the owner.
            create: give the user a data key when they have none (concurrent creations
                agree on one: ``INSERT ... ON CONFLICT DO NOTHING``, then the stored row).

        Raises:
            NotFoundError: the user has no data key and ``create`` is false.
            KeyUnavailableError: the KEK version that wraps it is retired or unreachable.
            IntegrityCheckError: the wrapped key was altered.

        """
        row: Any = session.connection().execute(_USER_KEY, {"user_id": user_id}).first()
        if row is None:
            if not create:
                raise NotFoundError(f"user {user_id} has no data key")
            row = self._create_user_key(session, user_id)
        return self.user_sealer_of(user_id, WrappedKey(row.kek_id, row.kek_version, row.wrapped))

    def user_sealer_of(self, user_id: int, wrapped: WrappedKey) -> Sealer:
        """Return the sealer of ``user_id`` from their key row, read by the caller.

        For a caller that reads the ``user_keys`` row together with other data in one statement
        (:meth:`search2o.memory.store.MemoryStore.search`); :meth:`user_sealer` reads it itself.

        Args:
            user_id: the owner.
            wrapped: the row's ``kek_id``, ``kek_version`` and ``wrapped`` blob.

        Raises:
            KeyUnavailableError: the KEK version that wraps it is retired or unreachable.
            IntegrityCheckError: the wrapped key was altered.

        """
        blob = bytes(wrapped.blob)
        cache_key = f"user:{user_id}:{hashlib.sha256(blob).hexdigest()[:32]}"
        with self._lock:
            data_key = self._cache.get(cache_key)
            if data_key is not None:
                self._cache.move_to_end(cache_key)
        if data_key is None:
            data_key = self.provider.unwrap(WrappedKey(wrapped.key_id, wrapped.version, blob))
            self._remember(cache_key, data_key)
        return Sealer(f"user:{user_id}", user_id, data_key)

    def _create_user_key(self, session: Session, user_id: int) -> UserKey:
        wrapped = self.provider.wrap(new_data_key())
        session.execute(
            dialect.insert(session, UserKey)
            .values(
                user_id=user_id,
                kek_id=wrapped.key_id,
                kek_version=wrapped.version,
                wrapped=wrapped.blob,
                created_at=utcnow(),
            )
            .on_conflict_do_nothing(index_elements=["user_id"])
        )
        return session.scalars(
            select(UserKey)
            .where(UserKey.user_id == user_id)
            .execution_options(populate_existing=True)
        ).one()

    def versions_in_use(self) -> dict[tuple[str, int], int]:
        """How many data keys (conversations', users', sources') each KEK version wraps.

        A key table the database does not have yet (not migrated so far) holds none.
        """
        tally: Tally[tuple[str, int]] = Tally()
        with self._db.session() as session:
            inspector = inspect(session.connection())
            for model in _KEY_TABLES:
                if not inspector.has_table(model.__tablename__):
                    continue
                rows = session.execute(
                    select(model.kek_id, model.kek_version, func.count())
                    .where(model.kek_id.is_not(None))  # a source without credentials
                    .group_by(model.kek_id, model.kek_version)
                )
                for kek_id, version, count in rows:
                    tally[(str(kek_id), int(version or 0))] += int(count)
        return dict(tally)

    def rewrap_all(self) -> RewrapReport:
        """Re-wrap every data key (conversations', users', sources') not under the current version.

        Content is never decrypted: each data key is unwrapped with its old version and wrapped
        with the current one, in batches of 500 per transaction (a crash leaves every key
        readable: old versions stay usable until retired).

        Raises:
            KeyUnavailableError, IntegrityCheckError: a data key could not be unwrapped.

        """
        current = next(v.version for v in self.provider.versions() if v.current)
        rewrapped = unchanged = 0
        for model, key in (
            (ConversationKey, "conversation_id"),
            (UserKey, "user_id"),
            (Source, "id"),
        ):
            done, same = self._rewrap_table(model, key, current)
            rewrapped, unchanged = rewrapped + done, unchanged + same
        return RewrapReport(current, rewrapped, unchanged)

    def _rewrap_table(
        self, model: type[ConversationKey] | type[UserKey] | type[Source], key: str, current: int
    ) -> tuple[int, int]:
        """Re-wrap the rows of one key table in batches; return (re-wrapped, unchanged)."""
        column = getattr(model, key)
        rewrapped = unchanged = 0
        after: Any = None
        while True:
            with self._db.session() as session:
                query = (
                    select(model)
                    .where(model.kek_id.is_not(None))  # a source without credentials
                    .order_by(column)
                    .limit(_REWRAP_BATCH)
                )
                if after is not None:
                    query = query.where(column > after)
                rows: list[Any] = list(session.scalars(query))
                for row in rows:
                    if row.kek_id == self.provider.key_id and row.kek_version == current:
                        unchanged += 1
                        continue
                    data_key = self.provider.unwrap(
                        WrappedKey(row.kek_id, int(row.kek_version), bytes(row.wrapped))
                    )
                    wrapped = self.provider.wrap(data_key)
                    row.kek_id, row.kek_version, row.wrapped = (
                        wrapped.key_id,
                        wrapped.version,
                        wrapped.blob,
                    )
                    rewrapped += 1
            if len(rows) < _REWRAP_BATCH:
                return rewrapped, unchanged
            after = getattr(rows[-1], key)

    def _remember(self, conversation_id: str, data_key: bytes) -> None:
        if self._cache_size == 0:
            return
        with self._lock:
            self._cache[conversation_id] = data_key
            self._cache.move_to_end(conversation_id)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
