"""The public HTTP API (FastAPI): every surface is a thin client of it."""

from search2o.api.app import create_app

__all__ = ["create_app"]
