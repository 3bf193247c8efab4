"""Agent definitions the registry, API and CLI tests share, and a helper to add users."""

from __future__ import annotations

import copy
from typing import Any

from search2o import accounts
from search2o.accounts import Principal
from search2o.runtime import Runtime

TRAVEL: dict[str, Any] = {
    "name": "travel",
    "description": "Remembers the airline you like",
    "prompts": {"main": {"system": "You are a travel assistant.", "scope": "conversation"}},
    "functions": {
        "main": {
            "memory": {"query": "{ sys.query }", "limit": 5},
            "prompt": {
                "user": '{ f\'What I remember: {[m["text"] for m in result]}. '
                "Question: {sys.query}' }"
            },
            "llm": {},
            "memory.note": {"store": {"last_question": "{ sys.query }"}},
            "end": {"output": "{ result }"},
        }
    },
}

TRAVEL_YAML = """\
name: travel
description: Se souvient de la compagnie aérienne que vous préférez
prompts:
  main: {system: "Vous êtes un assistant de voyage.", scope: conversation}
functions:
  main:
    memory: {query: "{ sys.query }", limit: 5}
    llm: {}
    memory.note:
      store: {last_question: "{ sys.query }"}
    end: {output: "{ result }"}
"""

BROKEN: dict[str, Any] = {
    "name": "travel",
    "description": "",
    "functions": {"main": {"llm": {"profile": "gpt9"}, "memory": {}}},
}
"""Three problems, in document order."""

BROKEN_PATHS = ["$.description", "$.functions.main.llm.profile", "$.functions.main.memory"]


def travel(**changes: Any) -> dict[str, Any]:
    """A copy of :data:`TRAVEL` with top-level fields changed."""
    document = copy.deepcopy(TRAVEL)
    document.update(changes)
    return document


def add_user(runtime: Runtime, email: str, *, admin: bool = False) -> tuple[Principal, str]:
    """Create a user with an API token; return the principal and the token."""
    with runtime.database.session() as session:
        user = accounts.create_user(session, email, is_admin=admin)
        token = accounts.issue_token(session, user, "tests")
        return Principal.of(user), token
