"""A fanned-out sync across two real ``search2o worker`` processes, one killed halfway.

PostgreSQL (pgserver) holds the data and the job queue; the embedder is an OpenAI-compatible
fake on loopback with a fixed latency (:mod:`tests.connectors.fleet`). One worker is killed
with SIGKILL once a third of the documents are in: whether it held the sync itself or only
batches, its jobs are taken over when their leases run out, and the sync ends with every
document stored once and nothing failed. The rates (one worker against two) are
``bench/scaleout.py``'s, never a timed test's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.connectors.fleet import run_sync

pytestmark = pytest.mark.slow

FILES = 60


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_worker_killed_mid_sync_loses_nothing(tmp_path: Path, database_url: str) -> None:
    outcome = run_sync(
        tmp_path, database_url, workers=2, files=FILES, latency_s=0.05, kill_at_share=0.3
    )
    assert outcome.killed
    assert outcome.documents == FILES, outcome
    assert outcome.chunks == FILES  # one chunk per file, none doubled
    assert outcome.summary.endswith(" 0 failed"), outcome.summary
    # Every text reached the model; only the kill's in-flight documents may have reached it
    # twice (embedded, never stored, embedded again by the batch's next attempt).
    assert outcome.embedded_texts >= FILES
    assert outcome.texts_embedded_twice <= 2 * 4  # at most the killed worker's two batches
