"""The ``jobs`` settings section and what the queue refuses when it opens."""

from __future__ import annotations

from pathlib import Path

import pytest

from search2o.config import load_settings
from search2o.errors import ConfigError, StorageError
from search2o.jobs import JobQueue
from search2o.jobs.settings import JobSettings
from search2o.storage.db import Database
from tests.conftest import free_port


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SEARCH2O_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("SEARCH2O_CONFIG", raising=False)


def test_the_defaults_are_the_embedded_queue() -> None:
    jobs = load_settings().jobs
    assert (jobs.backend, jobs.sqlite_path, jobs.server_workers) == ("sqlite", None, 2)
    assert (jobs.lease_s, jobs.max_attempts, jobs.poll_max_s) == (60.0, 5, 0.2)


def test_the_environment_sets_jobs_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEARCH2O_JOBS__BACKEND", "redis")
    monkeypatch.setenv("SEARCH2O_JOBS__REDIS_URL", "redis://:pw@redis.internal:6379/2")
    monkeypatch.setenv("SEARCH2O_JOBS__LEASE_S", "5")
    jobs = load_settings().jobs
    assert jobs.backend == "redis" and jobs.lease_s == 5.0
    assert jobs.redis_url is not None and "pw" not in repr(jobs)


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"SEARCH2O_JOBS__BACKEND": "redis"}, "needs jobs.redis_url"),
        ({"SEARCH2O_JOBS__REDIS_URL": "http://x"}, "must start with redis://"),
        ({"SEARCH2O_JOBS__BACKEND": "rabbitmq"}, "setting jobs.backend"),
        ({"SEARCH2O_JOBS__LEASE_S": "0.1"}, "setting jobs.lease_s"),
        ({"SEARCH2O_JOBS__LEASE": "5"}, "SEARCH2O_JOBS__LEASE"),  # an unknown key
        ({"SEARCH2O_JOBS__BACKOFF_MAX_S": "1"}, "backoff_max_s must be at least"),
        ({"SEARCH2O_JOBS__QUEUE_NAME": "a b"}, "setting jobs.queue_name"),
    ],
)
def test_bad_jobs_settings_name_the_setting(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], needle: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=needle):
        load_settings()


def test_the_postgres_transport_needs_a_postgresql_database(tmp_path: Path) -> None:
    database = Database(f"sqlite:///{tmp_path / 'db.sqlite'}")
    try:
        with pytest.raises(ConfigError, match=r"jobs\.backend postgres keeps the queue"):
            JobQueue(JobSettings(backend="postgres"), database, data_dir=tmp_path)
    finally:
        database.close()


def test_an_unreachable_redis_is_a_storage_error_without_its_password(tmp_path: Path) -> None:
    database = Database(f"sqlite:///{tmp_path / 'db.sqlite'}")
    url = f"redis://:s3cret-pass@127.0.0.1:{free_port()}/0"
    try:
        with pytest.raises(StorageError) as caught:
            JobQueue(JobSettings(backend="redis", redis_url=url), database, data_dir=tmp_path)
    finally:
        database.close()
    assert "cannot reach Redis at redis://:***@127.0.0.1" in caught.value.message
    assert "s3cret" not in caught.value.message


def test_the_embedded_queue_file_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    database = Database(f"sqlite:///{tmp_path / 'db.sqlite'}")
    try:
        with JobQueue(JobSettings(), database, data_dir=tmp_path / "data"):
            pass
    finally:
        database.close()
    assert (tmp_path / "data" / "jobs.db").stat().st_mode & 0o077 == 0
    assert (tmp_path / "data").stat().st_mode & 0o077 == 0


def test_an_unwritable_queue_file_is_a_storage_error(tmp_path: Path) -> None:
    database = Database(f"sqlite:///{tmp_path / 'db.sqlite'}")
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    try:
        with pytest.raises(StorageError, match="cannot open the job queue file"):
            JobQueue(JobSettings(sqlite_path=blocker / "jobs.db"), database, data_dir=tmp_path)
    finally:
        database.close()
