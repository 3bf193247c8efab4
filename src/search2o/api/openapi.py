"""What the OpenAPI document says about errors and limits, so it describes what the server does.

* :class:`ErrorBody` is the one error body (:mod:`search2o.api.errors`); :func:`error_responses`
  documents it for the statuses an operation can answer. Passing 422 this way also keeps
  FastAPI from documenting its own ``HTTPValidationError``, which the server never sends.
* Some limits are settings (``knowledge.max_query_chars``, ``chat.max_message_chars`` ...), so a
  model cannot declare them statically. :func:`apply_setting_limits` writes the configured
  values into the generated document (``maxLength``, ``maximum``); the code enforces the same
  settings, so the document and the server agree on every install.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, Field

from search2o.config import Settings
from search2o.events import EVENT_TYPES

__all__ = [
    "ErrorBody",
    "ErrorDetail",
    "apply_setting_limits",
    "error_responses",
    "event_schemas",
    "install_openapi",
]


class ProblemPublic(BaseModel):
    """One problem of an agent definition, at its JSON path."""

    path: str = Field(description="JSON path, e.g. $.functions.main")
    reason: str


class ValidationItem(BaseModel):
    """One failed rule of a request's validation."""

    loc: list[str]
    msg: str


class ErrorDetail(BaseModel):
    """What went wrong: the error class, a sentence, and for bad input the field and rule."""

    error: str = Field(description="the error class, e.g. InputError, NotFoundError")
    message: str = Field(description="a sentence for a person, with the fix where there is one")
    field: str | None = Field(default=None, description="bad input: the field, e.g. query")
    reason: str | None = Field(default=None, description="bad input: the rule it broke")
    errors: list[ValidationItem] | None = Field(
        default=None, description="request validation: every failed rule"
    )
    problems: list[ProblemPublic] | None = Field(
        default=None, description="an agent definition: every problem with its path"
    )
    conversation_id: str | None = Field(default=None, description="chat: the conversation")
    message_id: str | None = Field(default=None, description="chat: the partial answer kept")


class ErrorBody(BaseModel):
    """The body of every error response."""

    detail: ErrorDetail


_DESCRIPTIONS = {
    400: "the request cannot be understood",
    401: "no token, or an unknown or revoked one (token mode); `WWW-Authenticate: Bearer`",
    403: "reserved for admins",
    404: "missing, or another user's (both answer the same)",
    405: "the path does not serve this method; `Allow` lists those it does",
    409: "changed meanwhile, already exists, or vectors of another embedding model",
    413: "the body is larger than its bound (api.* settings)",
    422: "bad input: names the field and the rule; nothing was changed",
    500: "a sealed record failed its integrity check",
    502: "a model provider or an enterprise hook failed",
    503: "the database or the key service is unavailable",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """Return FastAPI ``responses`` documenting :class:`ErrorBody` for each status."""
    return {
        status: {"model": ErrorBody, "description": _DESCRIPTIONS[status]} for status in statuses
    }


# (schema name, property) -> (keyword, settings -> value)
_SETTING_LIMITS: dict[tuple[str, str], tuple[str, Callable[[Settings], int]]] = {
    ("SearchRequest", "query"): ("maxLength", lambda s: s.knowledge.max_query_chars),
    ("SearchRequest", "k"): ("maximum", lambda s: s.knowledge.max_k),
    ("ChatRequest", "message"): ("maxLength", lambda s: s.chat.max_message_chars),
    ("PageContext", "text"): ("maxLength", lambda s: s.chat.max_page_chars),
    ("RatingRequest", "comment"): ("maxLength", lambda s: s.chat.max_feedback_comment_chars),
    ("AgentValidateRequest", "query"): ("maxLength", lambda s: s.chat.max_message_chars),
    ("MemorySearchRequest", "query"): ("maxLength", lambda s: s.memory.max_query_chars),
    ("MemorySearchRequest", "limit"): ("maximum", lambda s: s.memory.max_limit),
}


def apply_setting_limits(document: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """Write the limits that settings hold into an OpenAPI document (in place; returned)."""
    schemas = document.get("components", {}).get("schemas", {})
    for (name, prop), (keyword, value) in _SETTING_LIMITS.items():
        target = schemas.get(name, {}).get("properties", {}).get(prop)
        if target is not None:
            target[keyword] = value(settings)
    return document


def event_schemas() -> dict[str, Any]:
    """Return the schemas of the answer events (:mod:`search2o.events`) and ``ChatEvent``.

    ``ChatEvent`` describes one Server-Sent Event of ``POST /v1/chat`` and
    ``GET /v1/runs/{id}/events`` the way OpenAPI 3.2 describes event streams (an object of the
    event's fields: ``event`` its name, ``id`` its number in the run, ``data`` the JSON text
    whose ``contentSchema`` is the event's model).
    """
    schemas: dict[str, Any] = {}
    frames = []
    for kind, cls in EVENT_TYPES.items():
        schema = cls.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[cls.__name__] = schema
        frames.append(
            {
                "type": "object",
                "title": f"{kind} event",
                "properties": {
                    "event": {"const": kind},
                    "id": {"type": "string", "pattern": "^[1-9][0-9]*$"},
                    "data": {
                        "type": "string",
                        "contentMediaType": "application/json",
                        "contentSchema": {"$ref": f"#/components/schemas/{cls.__name__}"},
                    },
                },
                "required": ["event", "id", "data"],
            }
        )
    schemas["ChatEvent"] = {
        "description": "one Server-Sent Event of an answer: its `event`, `id` and `data` fields",
        "oneOf": frames,
    }
    return schemas


def install_openapi(app: FastAPI, settings: Settings) -> None:
    """Make ``app.openapi()`` build the document once, with :func:`apply_setting_limits`."""

    def build() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            document.setdefault("components", {}).setdefault("schemas", {}).update(event_schemas())
            app.openapi_schema = apply_setting_limits(document, settings)
        return app.openapi_schema

    app.openapi = build  # type: ignore[method-assign]
