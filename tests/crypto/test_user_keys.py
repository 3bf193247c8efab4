"""Per-user data keys (memories): creation, isolation, rotation and retirement, both backends."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import select, text

from search2o import accounts
from search2o.accounts import Principal
from search2o.config import Settings
from search2o.crypto import vault as vault_module
from search2o.crypto.vault import Vault
from search2o.errors import IntegrityCheckError, KeyUnavailableError, NotFoundError
from search2o.runtime import Runtime
from search2o.storage.memory_models import UserKey


@pytest.fixture
def keys_runtime(settings: Settings) -> Iterator[Runtime]:
    """A runtime on each backend; no embedding model is needed here."""
    runtime = Runtime(settings)
    try:
        yield runtime
    finally:
        runtime.close()


def _users(runtime: Runtime, count: int) -> list[Principal]:
    with runtime.database.session() as session:
        return [
            Principal.of(accounts.create_user(session, f"user{i}@example.com"))
            for i in range(count)
        ]


def _seal_for(runtime: Runtime, users: list[Principal]) -> dict[int, bytes]:
    """Give each user a data key and seal one record with it."""
    blobs: dict[int, bytes] = {}
    with runtime.database.session() as session:
        for user in users:
            sealer = runtime.vault.user_sealer(session, user.user_id, create=True)
            blobs[user.user_id] = sealer.seal("memory", {"text": f"secret of {user.email}"})
    return blobs


def _open_all(runtime: Runtime, blobs: dict[int, bytes]) -> dict[int, str]:
    """Open every record with a fresh vault (no cached keys), as a new process would."""
    fresh = Vault(runtime.database, runtime.key_provider, cache_size=0)
    with runtime.database.session() as session:
        return {
            user_id: fresh.user_sealer(session, user_id).open("memory", blob)["text"]
            for user_id, blob in blobs.items()
        }


def test_user_keys_are_rewrapped_by_a_rotation_and_survive_retirement(
    keys_runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vault_module, "_REWRAP_BATCH", 2)  # several batches of user keys
    users = _users(keys_runtime, 5)
    blobs = _seal_for(keys_runtime, users)
    before = _open_all(keys_runtime, blobs)
    assert before == {u.user_id: f"secret of {u.email}" for u in users}
    provider = keys_runtime.key_provider
    assert keys_runtime.vault.versions_in_use() == {(provider.key_id, 1): 5}

    assert provider.add_version() == 2
    report = keys_runtime.vault.rewrap_all()
    assert (report.version, report.rewrapped, report.unchanged) == (2, 5, 0)
    assert keys_runtime.vault.versions_in_use() == {(provider.key_id, 2): 5}
    assert keys_runtime.vault.rewrap_all().rewrapped == 0  # idempotent
    provider.retire(1)
    assert _open_all(keys_runtime, blobs) == before
    # the running vault's cache follows the re-wrapped blob, and still opens
    with keys_runtime.database.session() as session:
        sealer = keys_runtime.vault.user_sealer(session, users[0].user_id)
        assert sealer.open("memory", blobs[users[0].user_id])["text"] == before[users[0].user_id]

    # a user key still wrapped by the retired version no longer opens
    with keys_runtime.database.session() as session:
        session.execute(
            text("UPDATE user_keys SET kek_version = 1 WHERE user_id = :u"),
            {"u": users[1].user_id},
        )
    with pytest.raises(KeyUnavailableError, match="version 1 is retired"):
        _open_all(keys_runtime, {users[1].user_id: blobs[users[1].user_id]})


def test_a_users_record_does_not_open_for_another_user(keys_runtime: Runtime) -> None:
    ann, ben = _users(keys_runtime, 2)
    blobs = _seal_for(keys_runtime, [ann, ben])
    with keys_runtime.database.session() as session:
        sealer = keys_runtime.vault.user_sealer(session, ben.user_id)
        with pytest.raises(IntegrityCheckError):
            sealer.open("memory", blobs[ann.user_id])
        with pytest.raises(IntegrityCheckError):
            sealer.open("message", blobs[ben.user_id])  # another kind of record


def test_no_key_without_create_and_a_rolled_back_key_is_never_used(
    keys_runtime: Runtime,
) -> None:
    (ann,) = _users(keys_runtime, 1)
    with keys_runtime.database.session() as session, pytest.raises(NotFoundError):
        keys_runtime.vault.user_sealer(session, ann.user_id)

    class AbortError(Exception):
        pass

    with pytest.raises(AbortError), keys_runtime.database.session() as session:
        lost = keys_runtime.vault.user_sealer(session, ann.user_id, create=True)
        lost_blob = lost.seal("memory", {"text": "never stored"})
        raise AbortError
    blobs = _seal_for(keys_runtime, [ann])
    with keys_runtime.database.session() as session:
        sealer = keys_runtime.vault.user_sealer(session, ann.user_id)
        assert sealer.open("memory", blobs[ann.user_id]) == {"text": f"secret of {ann.email}"}
        with pytest.raises(IntegrityCheckError):
            sealer.open("memory", lost_blob)


def test_concurrent_first_uses_agree_on_one_key(keys_runtime: Runtime) -> None:
    (ann,) = _users(keys_runtime, 1)
    start = threading.Barrier(6)
    blobs: list[bytes] = []
    errors: list[BaseException] = []

    def first_use() -> None:
        try:
            start.wait()
            with keys_runtime.database.session() as session:
                sealer = keys_runtime.vault.user_sealer(session, ann.user_id, create=True)
                blobs.append(sealer.seal("memory", {"text": "same key"}))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=first_use) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with keys_runtime.database.session() as session:
        assert len(list(session.scalars(select(UserKey)))) == 1
    fresh = Vault(keys_runtime.database, keys_runtime.key_provider, cache_size=0)
    with keys_runtime.database.session() as session:
        sealer = fresh.user_sealer(session, ann.user_id)
        assert [sealer.open("memory", b)["text"] for b in blobs] == ["same key"] * 6


def test_key_counts_of_a_database_not_yet_at_0006(database_url: str, settings: Settings) -> None:
    from search2o.crypto.keys import build_key_provider
    from search2o.storage.db import Database

    database = Database(database_url, migrate=False)
    try:
        database.upgrade("0005")  # user_keys does not exist yet: `search2o db upgrade` reads this
        provider = build_key_provider(settings.keys, settings.data_dir)
        assert Vault(database, provider).versions_in_use() == {}
    finally:
        database.close()
