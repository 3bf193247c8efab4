"""``POST /v1/chat``: one chat turn, streamed as Server-Sent Events (or one JSON body)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from search2o.accounts import Principal
from search2o.api.chat_schemas import ChatRequest
from search2o.api.deps import CurrentUser, RuntimeDep
from search2o.api.errors import status_for_name
from search2o.api.jsonbody import StrictJsonRoute
from search2o.api.openapi import error_responses
from search2o.api.sse import SSE_HEADERS, stream_events
from search2o.errors import InputError
from search2o.query.turn import TurnEvent
from search2o.runtime import Runtime

router = APIRouter(prefix="/v1", tags=["chat"], route_class=StrictJsonRoute)

_EXAMPLE = """event: conversation
data: {"conversation_id": "5b0c...e1", "title": "How many vacation days do we get?", \
"created": true, "user_message_id": "9f2a...07"}

event: tool_call
data: {"id": "call_1", "name": "search_knowledge", \
"arguments": {"query": "How many vacation days do we get?"}}

event: citation
data: {"number": 1, "title": "Benefits and perks", "source": "/data/handbook/benefits.md", \
"heading_path": ["Paid Time Off"], "document_id": 3, "chunk_ids": [41], "url": null}

event: delta
data: {"text": "We get 20 days"}

event: delta
data: {"text": " of vacation a year. [1]"}

event: done
data: {"conversation_id": "5b0c...e1", "message_id": "c41d...9a", \
"text": "We get 20 days of vacation a year. [1]", "citations": [{"number": 1, ...}], \
"searched": true, "timings": {"total_ms": 84.1, "first_token_ms": 80.2, ...}}
"""

DESCRIPTION = f"""
Send one user message. Without `conversation_id` a new conversation starts (its id is in the
first event); with it, the message continues that conversation (404 if it is missing or
another user's). Validation and ownership are checked before the stream starts, so bad input
gets a normal 422/404 JSON error and changes nothing.

With `"stream": true` (default) the answer is a `text/event-stream`:

| event | data |
|---|---|
| `conversation` | `conversation_id`, `title`, `created`, `user_message_id` — always first |
| `tool_call` | `id`, `name` (`search_knowledge` or `web_search`), `arguments` (the model's query) |
| `citation` | the source a `[n]` marker in the answer points to, on its first use |
| `delta` | `text`: the next piece of the answer |
| `done` | `message_id`, `text`, `citations`, `searched`, `timings` — last on success |
| `error` | `error` (class), `message`, `message_id` (partial answer, if stored) — last |

Lines starting with `:` are heartbeats, sent when nothing happened for `chat.heartbeat_s`.
If the client disconnects, the partial answer is stored with status `interrupted`.

Example:

```
{_EXAMPLE}```
"""


@router.post(
    "/chat",
    description=DESCRIPTION,
    responses={
        200: {
            "description": 'an event stream, or one JSON body with `"stream": false`',
            "content": {"text/event-stream": {"example": _EXAMPLE}, "application/json": {}},
        },
        **error_responses(401, 404, 409, 413, 422, 502, 503),
    },
)
async def chat(body: ChatRequest, user: CurrentUser, runtime: RuntimeDep) -> Any:
    """Run one chat turn or agent run (see the description for the event stream)."""
    events = await run_in_threadpool(_start, body, user, runtime)
    if body.stream:
        return StreamingResponse(
            stream_events(events, runtime.settings.chat.heartbeat_s),
            media_type="text/event-stream",
            headers=SSE_HEADERS,
        )
    result: dict[str, Any] = {"tool_calls": []}
    async for event in events:
        if event.kind == "conversation":
            result["conversation_id"] = event.data["conversation_id"]
        elif event.kind == "tool_call":
            result["tool_calls"].append(event.data)
        elif event.kind == "done":
            result.update(event.data)
        elif event.kind == "error":
            return JSONResponse(
                {"detail": {**event.data, "conversation_id": result.get("conversation_id")}},
                status_code=status_for_name(event.data["error"]),
            )
    return JSONResponse(jsonable_encoder(result))


def _start(body: ChatRequest, user: Principal, runtime: Runtime) -> AsyncIterator[TurnEvent]:
    """Validate the request (nothing written) and return its events: an agent run or a turn.

    An agent runs when ``agent`` is named, or when the conversation has a run waiting on
    ``ask`` (the message is the answer).

    Raises:
        InputError, NotFoundError: bad input, an unknown agent or conversation.

    """
    agent = body.agent
    if agent is None and body.conversation_id is not None:
        agent = runtime.agent_runner.waiting_agent(user, body.conversation_id)
        if agent is not None and agent not in {a.name for a in runtime.agents.list()}:
            agent = None  # its agent was deleted: the question is moot, the chat goes on
    if agent is None:
        if body.inputs is not None:
            raise InputError("inputs", "only with `agent`")
        engine = runtime.turns  # built on first use (loads models)
        return engine.run(engine.prepare(user, body.message, body.conversation_id))
    runner = runtime.agent_runner
    definition = runtime.agents.get(agent)
    return runner.run(
        runner.prepare(user, definition, body.message, body.conversation_id, body.inputs)
    )
