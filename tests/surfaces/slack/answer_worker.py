"""A real worker process running Slack answers: ``python -m tests.surfaces.slack.answer_worker``.

Its one argument is JSON: the data folder, database URL, fake Slack URL, surface token and the
server's port (:func:`tests.surfaces.slack.conftest.settings_for`). It runs the Slack jobs as
``search2o worker`` does (the answers come from the server's chat model, over the API), so the
test can kill it in the middle of an answer. It prints ``ready`` once consuming.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

from search2o.logs import configure_logging
from search2o.runtime import Runtime
from tests.surfaces.slack.conftest import settings_for


def main() -> None:
    config = json.loads(sys.argv[1])
    configure_logging("INFO", "text")
    settings = settings_for(
        Path(config["data_dir"]),
        config["database_url"],
        config["api_url"],
        config["token"],
        config["port"],
    )
    runtime = Runtime(settings)
    queue = runtime.jobs

    def announce() -> None:
        while not queue.consuming:
            time.sleep(0.01)
        print("ready", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    queue.run_worker(1)


if __name__ == "__main__":
    main()
