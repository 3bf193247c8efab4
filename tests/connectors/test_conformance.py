"""The connector conformance suite on the folder connector and on the in-repo fake service."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from search2o.config import Settings
from search2o.connectors.conformance import CHECKS, ConformanceError, SyncTarget
from search2o.connectors.settings import ConnectorsSettings
from search2o.runtime import Runtime
from tests.conftest import MemoEmbedder
from tests.connectors.doubles import FakeConnector, FakeDouble, FolderDouble, InstrumentedFolder

KINDS = {"folder": InstrumentedFolder, "fake": FakeConnector}


class CountingEmbedder(MemoEmbedder):
    """The session's model, counting the texts it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.texts = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        self.texts += len(texts)
        return super().embed(texts)


@pytest.fixture(params=["folder", "fake"])
def target(
    request: pytest.FixtureRequest, settings: Settings, tmp_path: Path
) -> Iterator[SyncTarget]:
    double = (
        FolderDouble(tmp_path / "folder")
        if request.param == "folder"
        else FakeDouble(uuid.uuid4().hex)
    )
    section = ConnectorsSettings(mass_delete_floor=1, max_delete_share=0.5)
    embedder = CountingEmbedder()
    runtime = Runtime(settings.model_copy(update={"connectors": section}), embedder=embedder)
    try:
        yield SyncTarget(runtime, KINDS, double, lambda: embedder.texts)
    finally:
        runtime.close()


@pytest.mark.parametrize("check", CHECKS, ids=lambda check: check.__name__.removeprefix("check_"))
def test_connector_conformance(check, target: SyncTarget) -> None:  # type: ignore[no-untyped-def]
    check(target)


def test_a_connector_that_breaks_the_contract_fails_the_suite(target: SyncTarget) -> None:
    """Negative control: a double whose deletions the source never reports fails a check."""
    if target.double.kind != "fake":
        pytest.skip("one negative control is enough")
    double = target.double
    double.remove = lambda key: None  # type: ignore[method-assign]  # the source "forgets"
    check = next(c for c in CHECKS if c.__name__ == "check_a_deletion_in_the_source_is_removed")
    with pytest.raises(ConformanceError, match="deleted"):
        check(target)
