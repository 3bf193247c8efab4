"""``/v1/agents``: store, read and delete agent definitions (admins), list them (everyone).

A definition that breaks rules answers 422 with every problem and its JSON path in
``detail.problems`` (:mod:`search2o.api.errors`) and stores nothing. Deleting an agent also
deletes every memory it stored, for every user, in the same transaction.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from search2o.api.agent_schemas import (
    AgentDeletedPublic,
    AgentListPublic,
    AgentPutPublic,
    AgentSummaryPublic,
    AgentValidateRequest,
)
from search2o.api.deps import AdminUser, CurrentUser, RuntimeDep
from search2o.api.jsonbody import StrictJsonRoute
from search2o.api.openapi import error_responses
from search2o.api.params import AgentName
from search2o.errors import InputError

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["agents"], route_class=StrictJsonRoute)

_JSON_TYPES = frozenset({"application/json"})
_YAML_TYPES = frozenset({"application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml"})

_EXAMPLE = {
    "name": "travel",
    "description": "Remembers the airline you like",
    "prompts": {"main": {"system": "You are a travel assistant.", "scope": "conversation"}},
    "functions": {
        "main": {
            "memory": {"query": "{ sys.query }", "limit": 5},
            "llm": {},
            "end": {"output": "{ result }"},
        }
    },
}

_PUT_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "the definition document (docs/agents.md), as JSON or as YAML with "
        "`Content-Type: application/yaml` or `text/yaml`",
        "content": {
            # YAML (``application/yaml``, ``text/yaml``) is read too, as the description says;
            # it is not listed, since no schema of a string can say which YAML is a definition.
            "application/json": {"schema": {"type": "object"}, "example": _EXAMPLE},
        },
    }
}


def _format(content_type: str | None) -> str | None:
    """Return the definition format a ``Content-Type`` announces (``None``: try JSON, then YAML).

    Raises:
        InputError: field ``content-type``: neither JSON nor YAML.

    """
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if not media:
        return None
    if media in _JSON_TYPES or media.endswith("+json"):
        return "json"
    if media in _YAML_TYPES:
        return "yaml"
    raise InputError(
        "content-type",
        f"must be application/json or application/yaml (text/yaml), got {media!r}",
    )


@router.put(
    "/agents/{name}",
    openapi_extra=_PUT_BODY,
    responses={
        201: {"model": AgentPutPublic, "description": "a new agent was stored"},
        **error_responses(401, 403, 409, 413, 422, 503),
    },
)
async def put_agent(
    name: AgentName, request: Request, response: Response, admin: AdminUser, runtime: RuntimeDep
) -> AgentPutPublic:
    """Store an agent definition under ``name`` (admins only): 201 when new, 200 when replaced.

    The body is the definition as JSON, or as YAML with ``Content-Type: application/yaml`` or
    ``text/yaml``; its ``name`` must equal the path's (409 when it does not: RFC 9110,
    section 9.3.4, a representation inconsistent with its target). A definition that breaks
    rules answers 422 listing every problem with its JSON path (``detail.problems``) and stores
    nothing.
    """
    fmt = _format(request.headers.get("content-type"))
    data = await request.body()  # bounded by api.max_definition_bytes (api.ingress)
    definition, created = await run_in_threadpool(
        runtime.agents.put, data, name=name, fmt=fmt, admin=admin
    )
    response.status_code = 201 if created else 200
    return AgentPutPublic(
        name=definition.name,
        description=definition.description,
        created=created,
        memory_labels=list(definition.memory_labels),
        functions=list(definition.functions),
    )


@router.get("/agents", responses=error_responses(401, 503))
def list_agents(user: CurrentUser, runtime: RuntimeDep) -> AgentListPublic:
    """List every stored agent, ordered by name (any authenticated user)."""
    return AgentListPublic(
        agents=[
            AgentSummaryPublic(name=a.name, description=a.description)
            for a in runtime.agents.list()
        ]
    )


@router.get("/agents/{name}", responses=error_responses(401, 403, 404, 422, 503))
def get_agent(name: AgentName, admin: AdminUser, runtime: RuntimeDep) -> dict[str, Any]:
    """Return an agent's stored definition document as it was given (admins only)."""
    return runtime.agents.source(name)


@router.delete("/agents/{name}", responses=error_responses(401, 403, 404, 422, 503))
def delete_agent(name: AgentName, admin: AdminUser, runtime: RuntimeDep) -> AgentDeletedPublic:
    """Delete an agent and every memory it stored, for every user (admins only)."""
    count = runtime.agents.delete(name)
    return AgentDeletedPublic(deleted=name, memories_deleted=count)


@router.post(
    "/agents/{name}/validate",
    responses=error_responses(401, 403, 404, 409, 413, 422, 502, 503),
)
def validate_agent(
    name: AgentName, body: AgentValidateRequest, admin: AdminUser, runtime: RuntimeDep
) -> dict[str, Any]:
    """Run the stored agent as a validation run and return the trace of every command.

    The run happens in a throwaway conversation of the caller (or ``conversation_id``, to
    answer a question it asked); it never stores memories and keeps its state in our store
    even when state hooks are configured. The body holds the last event's data (``done`` or
    ``error``) with ``trace``.
    """
    runner = runtime.agent_runner
    prepared = runner.prepare(
        admin,
        runtime.agents.get(name),
        body.query,
        body.conversation_id,
        body.inputs,
        validation=True,
    )
    events = list(runner.run_sync(prepared))
    return {"event": events[-1].kind, **events[-1].data}
