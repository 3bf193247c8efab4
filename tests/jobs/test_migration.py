"""Migration 0010 (the job ledger) on SQLite and PostgreSQL: columns, refusals, atomicity."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text

from search2o.errors import StorageError
from search2o.jobs import ledger
from search2o.storage.db import Database
from search2o.storage.models import new_id, utcnow

COLUMNS = {
    "id",
    "kind",
    "dedupe_key",
    "state",
    "attempts",
    "max_attempts",
    "run_after",
    "lease_owner",
    "lease_expires_at",
    "payload",
    "progress",
    "result",
    "error",
    "owner_id",
    "created_at",
    "updated_at",
    "started_at",
    "finished_at",
}


def _job(database: Database) -> str:
    job_id = new_id()
    ledger.insert(
        database,
        job_id=job_id,
        kind="k",
        payload={},
        dedupe_key=None,
        owner_id=None,
        max_attempts=1,
        now=utcnow(),
    )
    return job_id


def test_the_jobs_table_has_its_columns_and_a_unique_dedupe_key(database: Database) -> None:
    inspector = inspect(database.engine)
    assert {c["name"] for c in inspector.get_columns("jobs")} == COLUMNS
    uniques = inspector.get_unique_constraints("jobs")
    assert [u["column_names"] for u in uniques] == [["dedupe_key"]]
    indexes = {i["name"] for i in inspector.get_indexes("jobs")}
    assert {"ix_jobs_state_run_after", "ix_jobs_state_lease"} <= indexes


def test_a_downgrade_is_refused_while_jobs_wait_and_round_trips_without(
    database: Database,
) -> None:
    job_id = _job(database)
    with pytest.raises(StorageError, match=r"while 1 job\(s\) are queued or running"):
        database.downgrade("0011")
    assert database.current_revision() == Database.head_revision()
    assert ledger.get(database, job_id) is not None
    with database.session() as session:
        session.execute(text("DELETE FROM jobs"))
    database.downgrade("0011")
    assert "jobs" not in inspect(database.engine).get_table_names()
    database.upgrade()
    assert database.current_revision() == Database.head_revision()


def test_a_refused_step_of_a_longer_downgrade_leaves_the_jobs_table(database: Database) -> None:
    # 0008 refuses while agents are defined; later revisions were undone before it in the same run.
    with database.session() as session:
        session.execute(
            text(
                "INSERT INTO agents (name, description, definition, created_at, updated_at) "
                "VALUES ('travel', 'd', '{}', :now, :now)"
            ),
            {"now": utcnow()},
        )
    with pytest.raises(StorageError, match="while agents are defined"):
        database.downgrade("0007")
    assert database.current_revision() == Database.head_revision()
    assert "jobs" in inspect(database.engine).get_table_names()
    assert ledger.get(database, _job(database)) is not None
