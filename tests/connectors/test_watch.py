"""While ``serve`` runs, an edited file of a folder source is searchable within 10 s."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from search2o.api.app import create_app
from search2o.connectors.wiring import sources_of, sync_engine
from search2o.runtime import Runtime
from tests.api.test_api import serve


@pytest.mark.slow
def test_a_changed_file_is_searchable_within_ten_seconds(runtime: Runtime, tmp_path: Path) -> None:
    folder = tmp_path / "handbook"
    folder.mkdir()
    (folder / "travel.md").write_text("# Travel\n\nBook trains through the travel desk.\n")
    sources_of(runtime).add("handbook", "folder", {"path": str(folder), "public": True})
    sync_engine(runtime).sync("handbook")
    admin = runtime.local_principal()
    question = "where do bicycles go, the underground bike cellar"

    def found() -> bool:
        hits = runtime.knowledge.search(admin, question, 3).hits
        return any("bike cellar" in hit.text for hit in hits)

    with serve(create_app(runtime.settings, runtime=runtime)):
        time.sleep(1.5)  # the watch starts with the app
        (folder / "bikes.md").write_text("# Bikes\n\nBicycles go to the underground bike cellar.\n")
        started = time.monotonic()
        while not found():
            assert time.monotonic() - started < 10, "the change was not searchable within 10 s"
            time.sleep(0.2)
    assert sources_of(runtime).get("handbook").documents == 2
