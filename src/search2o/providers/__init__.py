"""Model providers: embeddings now; chat models and tokenizers join them later."""

from search2o.providers.embeddings import Embedder, build_embedder

__all__ = ["Embedder", "build_embedder"]
