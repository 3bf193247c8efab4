"""A process that writes one slow answer and prints ``started <conversation> <run>``.

Run by ``tests/chat/test_orphans.py``, which kills it with SIGKILL mid-answer, as a crash or an
OOM kill would. Arguments: the data folder, the database URL.
"""

from __future__ import annotations

import sys
from pathlib import Path

from search2o.config import Settings
from search2o.runtime import Runtime
from tests.query.doubles import ScriptedChatModel, answering


def main() -> None:
    settings = Settings(
        data_dir=Path(sys.argv[1]),
        database_url=sys.argv[2],
        runs={"flush_s": 0.05, "heartbeat_s": 0.1, "stale_s": 0.5},
    )
    model = ScriptedChatModel(answering(" ".join(f"word{i}" for i in range(10_000)), pause=0.05))
    runtime = Runtime(settings, chat_model=model)
    prepared = runtime.chat.prepare(runtime.local_principal(), "Talk to me")
    deltas = 0
    for event in runtime.chat.run_sync(prepared):
        if event.kind == "conversation":
            ids = f"{event.data['conversation_id']} {event.data['run_id']}"
        if event.kind == "delta":
            deltas += 1
            if deltas == 5:
                print(f"started {ids}", flush=True)


if __name__ == "__main__":
    main()
