"""The chat service: one entry for every surface (turn or agent run), typed events, runs.

See :mod:`search2o.chat.service` and :mod:`search2o.chat.runs`; the events are
:mod:`search2o.events`.
"""

from search2o.chat.runs import LiveRuns, RunInfo, RunStore, SweepReport
from search2o.chat.service import ChatService, PreparedAnswer

__all__ = ["ChatService", "LiveRuns", "PreparedAnswer", "RunInfo", "RunStore", "SweepReport"]
