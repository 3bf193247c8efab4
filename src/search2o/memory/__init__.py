"""Long-term memory: facts of each user kept across conversations, found by meaning.

* :mod:`search2o.memory.changes`: :class:`MemoryChanges`, the unit of work one run records
  (stores and deletes, checked per command), and the naming rules;
* :mod:`search2o.memory.store`: :class:`MemoryStore` — apply a completed run's changes in the
  caller's transaction, search, list, delete, delete an agent's memories;
* :mod:`search2o.memory.ranking`: one user's memories scored by cosine plus a BM25 share
  (:mod:`search2o.memory.lexical`), per backend (NumPy, pgvector);
* :mod:`search2o.memory.model`: the results (:class:`MemoryHit`, :class:`MemoryRecord`,
  :class:`MemoryOutcome`, :class:`Rejection`).

See docs/memory.md.
"""

from search2o.memory.changes import (
    MAX_LABELS_PER_AGENT,
    MAX_STORES_PER_COMMAND,
    MemoryChanges,
    check_agent,
    check_definition_labels,
    check_label,
)
from search2o.memory.model import MemoryHit, MemoryOutcome, MemoryRecord, Rejection
from search2o.memory.store import MemoryStore

__all__ = [
    "MAX_LABELS_PER_AGENT",
    "MAX_STORES_PER_COMMAND",
    "MemoryChanges",
    "MemoryHit",
    "MemoryOutcome",
    "MemoryRecord",
    "MemoryStore",
    "Rejection",
    "check_agent",
    "check_definition_labels",
    "check_label",
]
