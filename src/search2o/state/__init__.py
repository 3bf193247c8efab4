"""Conversation state of the Agent Engine: the model, the stores, the hooks, the contract.

* :mod:`search2o.state.model`: :class:`ConversationState`, the :class:`StateChanges` a run
  adds, and :func:`apply`;
* :mod:`search2o.state.store`: the :class:`StateStore` protocol and our encrypted
  :class:`DatabaseStateStore` (compare-and-swap saves, appended changes, compaction);
* :mod:`search2o.state.hooks`: :class:`HookStateStore` over an enterprise's hook (entry point
  or signed HTTP), and :func:`build_state_store`;
* :mod:`search2o.state.conformance`: the checks every store and hook must pass.

See docs/conversation-state.md.
"""

from search2o.state.changes import StateChanges, apply
from search2o.state.contract import StateStore, conversation_owner
from search2o.state.hooks import (
    HookStateStore,
    HttpStateHook,
    StateHook,
    build_state_store,
    load_state_hook,
)
from search2o.state.model import ConversationState
from search2o.state.records import Pause, Prompt, PromptChange, PromptKey, RunRecord, prompt_key
from search2o.state.store import DatabaseStateStore
from search2o.state.values import check_json

__all__ = [
    "ConversationState",
    "DatabaseStateStore",
    "HookStateStore",
    "HttpStateHook",
    "Pause",
    "Prompt",
    "PromptChange",
    "PromptKey",
    "RunRecord",
    "StateChanges",
    "StateHook",
    "StateStore",
    "apply",
    "build_state_store",
    "check_json",
    "conversation_owner",
    "load_state_hook",
    "prompt_key",
]
