"""search2o: a self-hosted server for conversations with an enterprise's knowledge and agents.

The public names are re-exported here; everything else is internal.
"""

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
