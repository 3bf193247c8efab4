"""Alembic migrations of search2o, run programmatically by :mod:`search2o.storage.db`."""
