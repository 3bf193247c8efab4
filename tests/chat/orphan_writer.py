"""A process that starts one answer and reports how far it got, to be killed there.

Run by ``tests/chat/test_orphans.py``, which kills it with SIGKILL, as a crash or an OOM kill
would. Arguments: the data folder, the database URL, and where to stop:

* ``answer`` (the default): a slow chat answer; prints ``started <conversation> <run>`` once
  it has written five pieces;
* ``turn`` or ``agent``: a chat turn, or a run of an agent whose first command calls the
  model; the model blocks at that call and the process prints ``asked`` — the question is
  stored and the run has recorded no event yet (the heartbeat and the batches are a minute
  away), the point a process killed right after storing the question leaves behind.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from pathlib import Path

from search2o.config import Settings
from search2o.providers.chat import ChatMessage, ToolSpec
from search2o.runtime import Runtime
from tests.query.doubles import ScriptedChatModel, Step, answering

WAITER = {
    "name": "waiter",
    "description": "Asks the model, which never answers",
    "functions": {"main": {"llm": {}, "end": {"output": "{ result }"}}},
}


def _blocked(messages: list[ChatMessage], tools: list[ToolSpec]) -> Iterable[Step]:
    def wait_to_be_killed() -> None:
        print("asked", flush=True)
        time.sleep(3600)

    return [wait_to_be_killed]


def main() -> None:
    stage = sys.argv[3] if len(sys.argv) > 3 else "answer"
    quiet = {"flush_s": 10, "heartbeat_s": 60, "stale_s": 300}
    settings = Settings(
        data_dir=Path(sys.argv[1]),
        database_url=sys.argv[2],
        runs=quiet if stage != "answer" else {"flush_s": 0.05, "heartbeat_s": 0.1, "stale_s": 0.5},
    )
    if stage != "answer":
        runtime = Runtime(settings, chat_model=ScriptedChatModel(_blocked))
        principal = runtime.local_principal()
        agent = None
        if stage == "agent":
            runtime.agents.put(WAITER, admin=principal)
            agent = "waiter"
        for _ in runtime.chat.run_sync(runtime.chat.prepare(principal, "Anyone?", agent=agent)):
            pass
        return
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
