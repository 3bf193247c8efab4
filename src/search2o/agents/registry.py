"""The agent registry: stored agent definitions, put, read, listed and deleted by name.

* **Storing.** :meth:`AgentRegistry.put` parses and checks a definition
  (:func:`search2o.agents.definition.parse_definition`, every problem at once) against the
  server's model profiles and stores it under its ``name``; storing a name again replaces the
  definition and keeps its ``created_at``. Only admins define agents.
* **Plain text.** A definition is admin configuration, not user content: the table keeps the
  document as given (JSON, key order kept) in plain text, unlike conversations and memories.
* **Reading.** :meth:`AgentRegistry.get` parses the stored document again with the profiles the
  server offers *now*, so a run never starts from a definition that names a profile which has
  since been removed; :meth:`AgentRegistry.source` returns the document unchecked (for an admin
  to fix it).
* **Deleting.** :meth:`AgentRegistry.delete` removes the definition and, in the same
  transaction, every memory the agent stored for every user
  (:meth:`search2o.memory.store.MemoryStore.delete_agent`): both go, or neither.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select

from search2o.accounts import Principal
from search2o.agents.definition import AgentDefinition, parse_definition
from search2o.errors import ConflictError, NotFoundError, PermissionDeniedError
from search2o.memory.store import MemoryStore
from search2o.storage import dialect
from search2o.storage.agent_models import Agent
from search2o.storage.db import Database
from search2o.storage.models import utcnow
from search2o.textrules import check_text

__all__ = ["AgentRegistry", "AgentSummary"]

Profiles = Callable[[], Collection[str]] | Collection[str]


@dataclass(frozen=True)
class AgentSummary:
    """One stored agent as listed: its name, what it does, and when it was last stored."""

    name: str
    description: str
    updated_at: datetime


class AgentRegistry:
    """Stored agent definitions by name (see the module doc).

    Args:
        database: where ``agents`` (and ``memories``) live.
        memory: the memory store; deleting an agent deletes its memories through it.
        profiles: the model profile names the server offers (an ``llm.profile`` must be one),
            or a function returning them, called at each check so the current settings apply.

    Thread-safe: it keeps no state between calls.
    """

    def __init__(self, database: Database, memory: MemoryStore, profiles: Profiles) -> None:
        self._db = database
        self._memory = memory
        self._profiles = profiles

    def profiles(self) -> tuple[str, ...]:
        """Return the model profile names definitions are checked against now."""
        found = self._profiles() if callable(self._profiles) else self._profiles
        return tuple(found)

    def parse(
        self, data: str | bytes | Mapping[str, Any], *, fmt: str | None = None
    ) -> AgentDefinition:
        """Parse and check a definition against the current profiles without storing it.

        Raises:
            DefinitionError: every problem found, each with its JSON path.
            InputError: ``fmt`` is neither ``json``, ``yaml`` nor ``None`` (field ``format``).

        """
        return parse_definition(data, profiles=self.profiles(), fmt=fmt)

    def put(
        self,
        data: str | bytes | Mapping[str, Any],
        *,
        name: str | None = None,
        fmt: str | None = None,
        admin: Principal,
    ) -> tuple[AgentDefinition, bool]:
        """Check a definition and store it under its name, replacing any stored one.

        Args:
            data: JSON or YAML text (``bytes`` must be UTF-8), or the parsed object.
            name: the name the caller addressed (the URL path); must equal the definition's.
            fmt: ``"json"`` or ``"yaml"`` to accept only that; ``None`` tries JSON, then YAML.
            admin: who stores it (recorded as ``updated_by``); must be an admin.

        Returns:
            The checked definition, and ``True`` when the name was new (``False`` when an
            existing definition was replaced; its ``created_at`` is kept).

        Raises:
            PermissionDeniedError: ``admin`` is not an admin.
            DefinitionError: the definition breaks rules; every problem with its JSON path.
            ConflictError: ``name`` differs from the definition's name (the API answers 409,
                RFC 9110 section 9.3.4).
            InputError: field ``format``: ``fmt`` is not ``json``, ``yaml`` or ``None``.

        Nothing is stored when an error is raised.
        """
        if not admin.is_admin:
            raise PermissionDeniedError("only admins define agents")
        definition = self.parse(data, fmt=fmt)
        if name is not None and name != definition.name:
            # RFC 9110, section 9.3.4: a PUT whose representation is inconsistent with the
            # target resource is answered 409 (Conflict).
            raise ConflictError(
                f"name: the definition is named {definition.name!r} but was sent as {name!r}; "
                "the two must be equal (store it under its own name, or rename it)"
            )
        document = json.dumps(definition.source, ensure_ascii=False, sort_keys=False)
        now = utcnow()
        with self._db.session() as session:
            replaced = {
                "description": definition.description,
                "definition": document,
                "updated_at": now,
                "updated_by": admin.user_id,
            }
            row = session.execute(
                dialect.insert(session, Agent)
                .values(name=definition.name, created_at=now, **replaced)
                .on_conflict_do_update(index_elements=["name"], set_=replaced)
                .returning(Agent.created_at, Agent.updated_at)
            ).one()
        # One statement, so two admins storing a new name at once cannot both "create" it:
        # the row was inserted exactly when it kept the creation time this call gave it.
        return definition, row.created_at == row.updated_at

    def get(self, name: str, *, field: str = "name") -> AgentDefinition:
        """Return the stored definition of ``name``, checked against the current profiles.

        Args:
            field: what the caller calls the name, for the error (``agent`` in a chat body).

        Raises:
            InputError: ``name`` holds a NUL or a lone surrogate (no backend stores it).
            NotFoundError: no agent of that name.
            DefinitionError: the stored definition no longer passes (e.g. it names a model
                profile the settings no longer offer); store a fixed one with :meth:`put`.

        """
        return parse_definition(self.source(name, field=field), profiles=self.profiles())

    def source(self, name: str, *, field: str = "name") -> dict[str, Any]:
        """Return the stored document of ``name`` as it was given, without checking it.

        Raises:
            InputError: ``name`` holds a NUL or a lone surrogate (``field`` is named).
            NotFoundError: no agent of that name.

        """
        # PostgreSQL refuses a NUL in ``text`` (once a 500) where SQLite answered 404: both 422.
        check_text(name, field, strip=False, allow_empty=True)
        with self._db.session() as session:
            stored = session.scalar(select(Agent.definition).where(Agent.name == name))
        if stored is None:
            raise NotFoundError(_missing(name))
        document: dict[str, Any] = json.loads(stored)
        return document

    def list(self) -> builtins.list[AgentSummary]:
        """Return every stored agent, ordered by name."""
        with self._db.session() as session:
            rows = session.execute(
                select(Agent.name, Agent.description, Agent.updated_at).order_by(Agent.name)
            ).all()
        return [AgentSummary(r.name, r.description, r.updated_at) for r in rows]

    def delete(self, name: str) -> int:
        """Delete the agent ``name`` and every memory it stored, for every user, at once.

        Returns:
            How many memories were deleted.

        Raises:
            InputError: ``name`` holds a NUL or a lone surrogate.
            NotFoundError: no agent of that name (nothing is deleted).

        """
        check_text(name, "name", strip=False, allow_empty=True)
        with self._db.session() as session:
            result = session.execute(delete(Agent).where(Agent.name == name))
            if not getattr(result, "rowcount", 0):
                raise NotFoundError(_missing(name))
            return self._memory.delete_agent(name, session=session)


def _missing(name: str) -> str:
    return f"agent {name!r} not found"
