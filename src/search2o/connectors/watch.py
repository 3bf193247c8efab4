"""While ``serve`` runs, a change in a ``folder`` source starts its sync within seconds.

One thread watches every folder source (watchfiles, Rust ``notify``; events debounced by
``connectors.watch_debounce_ms``) and queues a ``sources.sync`` job for the source of each changed
path; the list of folders is read again every few seconds, so a source added or removed while
serving is picked up. The watch only hastens a sync: the periodic sync (and its complete
listing) remains the source of truth, and an event lost (a folder on a network mount, a full
inotify queue) is caught by the next one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from search2o.connectors.jobs import SYNC, sync_payload
from search2o.connectors.settings import ConnectorsSettings, connectors_settings
from search2o.connectors.wiring import sources_of

if TYPE_CHECKING:
    from search2o.runtime import Runtime

__all__ = ["watching"]

log = logging.getLogger("search2o.connectors")

_RESCAN_MS = 5000  # how often the list of folder sources is read again


@asynccontextmanager
async def watching(runtime: Runtime) -> AsyncIterator[None]:
    """Watch the folder sources while the block runs (``connectors.watch``)."""
    settings = connectors_settings(runtime.settings)
    if not settings.watch:
        yield
        return
    stop = threading.Event()
    thread = threading.Thread(
        target=_watch, args=(runtime, settings, stop), name="search2o-folder-watch", daemon=True
    )
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(10)


def _folders(runtime: Runtime) -> dict[Path, str]:
    """Return the folder sources that exist now: their resolved folder and name."""
    found = {}
    for info in sources_of(runtime).all():
        if info.kind == "folder" and info.status in ("idle", "interrupted"):
            path = Path(str(info.settings.get("path", "")))
            if path.is_dir():
                found[path.resolve()] = info.name
    return found


def _watch(runtime: Runtime, settings: ConnectorsSettings, stop: threading.Event) -> None:
    from watchfiles import watch

    while not stop.is_set():
        try:
            folders = _folders(runtime)
        except Exception:  # the database is briefly unreachable: try again later
            log.exception("source.watch_failed")
            stop.wait(_RESCAN_MS / 1000)
            continue
        if not folders:
            stop.wait(_RESCAN_MS / 1000)
            continue
        try:
            for changes in watch(
                *folders,
                debounce=settings.watch_debounce_ms,
                stop_event=stop,
                yield_on_timeout=True,
                rust_timeout=_RESCAN_MS,
                raise_interrupt=False,
            ):
                touched = {
                    name
                    for _, changed in changes
                    for folder, name in folders.items()
                    if Path(changed).is_relative_to(folder)
                }
                for name in sorted(touched):
                    slot = int(time.time())  # one job per source and second of changes
                    runtime.jobs.enqueue(
                        SYNC, sync_payload(name), dedupe_key=f"{SYNC}:{name}:watch:{slot}"
                    )
                if _folders(runtime) != folders:
                    break
        except Exception:  # a folder vanished under the watcher: read the list again
            log.warning("source.watch_restarted", exc_info=True)
            stop.wait(1)
