"""Storage: the database, its schema and migrations, and vector search per backend."""

from search2o.storage.db import Backend, Database

__all__ = ["Backend", "Database"]
