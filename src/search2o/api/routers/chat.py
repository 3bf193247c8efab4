"""``POST /v1/chat``: one chat turn, streamed as Server-Sent Events (or one JSON body)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from search2o.api.deps import CurrentUser, RuntimeDep
from search2o.api.errors import status_for_name
from search2o.api.jsonbody import StrictJsonRoute
from search2o.api.openapi import error_responses
from search2o.api.sse import SSE_HEADERS, stream_events
from search2o.wire.chat import ChatRequest

router = APIRouter(prefix="/v1", tags=["chat"], route_class=StrictJsonRoute)

_EXAMPLE = """id: 1
event: conversation
data: {"conversation_id": "5b0c...e1", "title": "How many vacation days do we get?", \
"created": true, "user_message_id": "9f2a...07", "run_id": "77c1...d0"}

id: 2
event: tool_call
data: {"id": "call_1", "name": "search_knowledge", \
"arguments": {"query": "How many vacation days do we get?"}}

id: 3
event: citation
data: {"number": 1, "title": "Benefits and perks", "source": "/data/handbook/benefits.md", \
"heading_path": ["Paid Time Off"], "document_id": 3, "chunk_ids": [41], "url": null}

id: 4
event: delta
data: {"text": "We get 20 days"}

id: 5
event: delta
data: {"text": " of vacation a year. [1]"}

id: 6
event: done
data: {"conversation_id": "5b0c...e1", "message_id": "c41d...9a", \
"text": "We get 20 days of vacation a year. [1]", "citations": [{"number": 1, ...}], \
"searched": true, "timings": {"total_ms": 84.1, "first_token_ms": 80.2, ...}}
"""

DESCRIPTION = f"""
Send one user message. Without `conversation_id` a new conversation starts (its id is in the
first event); with it, the message continues that conversation (404 if it is missing or
another user's). With `page` (`url`, `title`, `text`), the page the user is reading goes to the
model as one source labelled as untrusted data, citable as "this page" (the citation's `source`
is `this page`, with the page's `title` and `url`); its text is kept only in the conversation's
sealed user message. Validation and ownership are checked before the stream starts, so bad input
gets a normal 422/404 JSON error and changes nothing.

With `"stream": true` (default) the answer is a `text/event-stream`:

| event | data |
|---|---|
| `conversation` | `conversation_id`, `title`, `created`, `user_message_id`, `run_id` (first) |
| `tool_call` | `id`, `name` (`search_knowledge` or `web_search`), `arguments` (the model's query) |
| `citation` | the source a `[n]` marker in the answer points to, on its first use |
| `step` | agent runs: `function`, `command` reached |
| `delta` | `text`: the next piece of the answer |
| `done` | `message_id`, `text`, `citations`, `searched`, `timings`, `status` — last on success |
| `error` | `error` (class), `message`, `message_id` (partial answer, if stored) — last |

Every event has an `id:` (its number in the run). The answer is a *run* that does not depend on
this connection: if the connection drops, the answer goes on; reconnect with
`GET /v1/runs/{{run_id}}/events` and `Last-Event-ID: <last id seen>` to get every later event once
(from any API process on the same database), or stop it with `POST /v1/runs/{{run_id}}/stop`
(the partial answer is stored with status `interrupted`, and `done` says
`"status": "interrupted"`). Lines starting with `:` are
heartbeats, sent when nothing happened for `chat.heartbeat_s`. The events' schemas are
`ChatEvent` in this document.

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
            "content": {
                "text/event-stream": {
                    "example": _EXAMPLE,
                    "schema": {"$ref": "#/components/schemas/ChatEvent"},
                },
                "application/json": {},
            },
        },
        **error_responses(401, 404, 409, 413, 422, 502, 503),
    },
)
async def chat(body: ChatRequest, user: CurrentUser, runtime: RuntimeDep) -> Any:
    """Answer one message: a chat turn or an agent run (see the description for the stream)."""
    service = runtime.chat
    page = (body.page.url, body.page.title, body.page.text) if body.page is not None else None
    prepared = await run_in_threadpool(
        service.prepare, user, body.message, body.conversation_id, body.agent, body.inputs, page
    )
    if body.stream:
        run_id = await service.start(prepared)
        return StreamingResponse(
            stream_events(service.follow(user, run_id), runtime.settings.chat.heartbeat_s),
            media_type="text/event-stream",
            headers=SSE_HEADERS,
        )
    result: dict[str, Any] = {"tool_calls": []}
    async for event in service.run(prepared):
        data = event.data
        if event.kind == "conversation":
            result["conversation_id"] = data["conversation_id"]
            result["run_id"] = data["run_id"]
        elif event.kind == "tool_call":
            result["tool_calls"].append(data)
        elif event.kind == "done":
            result.update(data)
        elif event.kind == "error":
            return JSONResponse(
                {"detail": {**data, "conversation_id": result.get("conversation_id")}},
                status_code=status_for_name(data["error"]),
            )
    return JSONResponse(jsonable_encoder(result))
