"""search2o: a self-hosted server for conversations with an enterprise's knowledge and agents.

The public names are re-exported here, imported on first use (:mod:`search2o.lazy`), so
importing one module of the package does not load them all; everything else is internal.
"""

from typing import TYPE_CHECKING

from search2o.lazy import lazy_exports

if TYPE_CHECKING:
    from search2o.accounts import Principal
    from search2o.api.app import create_app
    from search2o.config import Settings, load_settings
    from search2o.errors import (
        AuthenticationError,
        ConfigError,
        ConflictError,
        CorruptFileError,
        IndexMismatchError,
        InputError,
        NotFoundError,
        PermissionDeniedError,
        ProviderError,
        Search2oError,
        StorageError,
        UnsupportedFileError,
    )
    from search2o.knowledge import AccessList, KnowledgeStore, SearchHit, SearchResult
    from search2o.providers.embeddings import Embedder
    from search2o.runtime import Runtime
    from search2o.storage.db import Database

__all__ = [
    "AccessList",
    "AuthenticationError",
    "ConfigError",
    "ConflictError",
    "CorruptFileError",
    "Database",
    "Embedder",
    "IndexMismatchError",
    "InputError",
    "KnowledgeStore",
    "NotFoundError",
    "PermissionDeniedError",
    "Principal",
    "ProviderError",
    "Runtime",
    "Search2oError",
    "SearchHit",
    "SearchResult",
    "Settings",
    "StorageError",
    "UnsupportedFileError",
    "create_app",
    "load_settings",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "AccessList": "search2o.knowledge",
        "AuthenticationError": "search2o.errors",
        "ConfigError": "search2o.errors",
        "ConflictError": "search2o.errors",
        "CorruptFileError": "search2o.errors",
        "Database": "search2o.storage.db",
        "Embedder": "search2o.providers.embeddings",
        "IndexMismatchError": "search2o.errors",
        "InputError": "search2o.errors",
        "KnowledgeStore": "search2o.knowledge",
        "NotFoundError": "search2o.errors",
        "PermissionDeniedError": "search2o.errors",
        "Principal": "search2o.accounts",
        "ProviderError": "search2o.errors",
        "Runtime": "search2o.runtime",
        "Search2oError": "search2o.errors",
        "SearchHit": "search2o.knowledge",
        "SearchResult": "search2o.knowledge",
        "Settings": "search2o.config",
        "StorageError": "search2o.errors",
        "UnsupportedFileError": "search2o.errors",
        "create_app": "search2o.api.app",
        "load_settings": "search2o.config",
    },
)
