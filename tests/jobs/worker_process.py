"""A real worker process for the tests: ``python -m tests.jobs.worker_process``.

Settings come from the environment (``SEARCH2O_DATABASE_URL``, ``SEARCH2O_DATA_DIR``,
``SEARCH2O_JOBS__*``), the kinds from :func:`tests.jobs.kinds.build_registry`; it runs
:meth:`JobQueue.run_worker`, what ``search2o worker`` runs, until SIGTERM or SIGINT, and
prints ``ready <worker id>`` once consuming and ``released <ids>`` at the end.
"""

from __future__ import annotations

import sys
import threading
import time

from search2o.config import load_settings
from search2o.jobs import JobQueue
from search2o.storage.db import Database
from tests.jobs.kinds import build_registry


def main() -> None:
    settings = load_settings()
    database = Database(settings.resolved_database_url)
    queue = JobQueue(settings.jobs, database, build_registry(database), data_dir=settings.data_dir)

    def announce() -> None:
        while not queue.consuming:
            time.sleep(0.01)
        print("ready", queue.worker_id, flush=True)

    threading.Thread(target=announce, daemon=True).start()
    try:
        released = queue.run_worker(1)
        print("released", ",".join(released) or "-", flush=True)
    finally:
        queue.close()
        database.close()
    sys.exit(0)


if __name__ == "__main__":
    main()
