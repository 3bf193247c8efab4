"""The sources and the sync engine of one runtime (what the CLI, the API and the jobs use)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from search2o.connectors.contract import Connector
from search2o.connectors.engine import SyncEngine
from search2o.connectors.fanout import FanOut
from search2o.connectors.registry import connector_kinds
from search2o.connectors.settings import connectors_settings
from search2o.connectors.sources import Sources

if TYPE_CHECKING:
    from search2o.runtime import Runtime

__all__ = ["sources_of", "sync_engine"]


def sources_of(
    runtime: Runtime, kinds: Mapping[str, type[Connector]] | None = None, remote: bool = False
) -> Sources:
    """Return the sources of ``runtime``'s database; ``kinds`` default to the installed ones.

    ``remote``: for the API (connectors' ``check_new`` apply their rules for remote callers).
    """
    return Sources(
        runtime.database,
        runtime.key_provider,
        kinds if kinds is not None else connector_kinds(),
        connectors_settings(runtime.settings),
        remote,
    )


def sync_engine(
    runtime: Runtime,
    kinds: Mapping[str, type[Connector]] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> SyncEngine:
    """Return the sync engine of ``runtime`` (its Knowledge Store, sources and settings).

    With ``connectors.fan_out``, its batches run as jobs on ``runtime.jobs``.
    """
    settings = connectors_settings(runtime.settings)
    return SyncEngine(
        runtime.knowledge,
        sources_of(runtime, kinds),
        settings,
        sleep=sleep,
        fan_out=FanOut(runtime.jobs) if settings.fan_out else None,
    )
