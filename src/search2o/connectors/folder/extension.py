"""The folder connector's registration (entry point ``folder`` of ``search2o.extensions``).

Names its connector class by import path, so that loading the registry (which the root settings
do while they are built) imports nothing more than this module.
"""

from __future__ import annotations

from search2o.extensions import Extension

__all__ = ["EXTENSION"]

EXTENSION = Extension(
    name="folder", connectors=("search2o.connectors.folder.connector:FolderConnector",)
)
"""The folder connector's :class:`~search2o.extensions.Extension`."""
