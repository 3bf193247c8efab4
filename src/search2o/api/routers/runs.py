"""``/v1/runs``: follow an answer in flight from the last event seen, or stop it.

Every answer of ``POST /v1/chat`` is a run whose id is in its first event. Its events can be
replayed after a reconnect — ``Last-Event-ID`` (WHATWG HTML, "Server-sent events") or
``?after=`` — and then followed live, from any API process on the same database; a stop is
honoured by whichever process writes the answer. Another user's run is answered exactly like a
missing one (404).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Path, Query
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from search2o.api.deps import CurrentUser, RuntimeDep
from search2o.api.jsonbody import StrictJsonRoute
from search2o.api.openapi import error_responses
from search2o.api.sse import SSE_HEADERS, stream_events
from search2o.chat import RunInfo
from search2o.errors import InputError
from search2o.wire.fields import INT32_MAX
from search2o.wire.runs import RunPublic

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["chat"], route_class=StrictJsonRoute)

EVENT_SCHEMA = "#/components/schemas/ChatEvent"
RunId = Annotated[str, Path(max_length=64, description="the run's id (first event of the answer)")]


def _public(info: RunInfo) -> RunPublic:
    """Describe a run to its owner."""
    return RunPublic(
        id=info.id,
        conversation_id=info.conversation_id,
        status=info.status,
        last_event_id=info.last_seq,
        stop_requested=info.stop_requested,
    )


def _after(last_event_id: str | None, after: int | None) -> int:
    """Return the number to replay after: ``?after=``, else ``Last-Event-ID``, else 0.

    Raises:
        InputError: ``Last-Event-ID`` is not a number of ours.

    """
    if after is not None:
        return after
    if last_event_id is None or not last_event_id.strip():
        return 0
    text = last_event_id.strip()
    if not text.isascii() or not text.isdigit() or int(text) > INT32_MAX:
        raise InputError("Last-Event-ID", f"must be an event number, got {text[:40]!r}")
    return int(text)


@router.get(
    "/runs/{run_id}/events",
    responses={
        200: {
            "description": "the run's events after the given one, then live ones, as SSE",
            "content": {
                "text/event-stream": {"schema": {"$ref": "#/components/schemas/ChatEvent"}}
            },
        },
        **error_responses(401, 404, 422, 503),
    },
)
async def run_events(
    run_id: RunId,
    user: CurrentUser,
    runtime: RuntimeDep,
    last_event_id: Annotated[
        # No max_length here: _after refuses a long value naming the header as it is spelt
        # (FastAPI's own check would name the lower-case alias); the server bounds headers.
        str | None, Header(description="the id of the last event received")
    ] = None,
    after: Annotated[
        int | None, Query(ge=0, le=INT32_MAX, description="replay events after this number")
    ] = None,
) -> StreamingResponse:
    """Replay a run's events after the last one seen, then follow it until it ends."""
    start = _after(last_event_id, after)
    service = runtime.chat
    await run_in_threadpool(service.runs.info, user, run_id)  # 404 before the stream starts
    return StreamingResponse(
        stream_events(service.follow(user, run_id, start), runtime.settings.chat.heartbeat_s),
        media_type="text/event-stream",
        headers=SSE_HEADERS,
    )


@router.get("/runs/{run_id}", responses=error_responses(401, 404, 422, 503))
def get_run(run_id: RunId, user: CurrentUser, runtime: RuntimeDep) -> RunPublic:
    """Return a run's status and the number of its last event."""
    return _public(runtime.chat.runs.info(user, run_id))


@router.post("/runs/{run_id}/stop", responses=error_responses(401, 404, 422, 503))
def stop_run(run_id: RunId, user: CurrentUser, runtime: RuntimeDep) -> RunPublic:
    """Stop a run, whichever API process writes it; the partial answer is kept interrupted."""
    return _public(runtime.chat.stop(user, run_id))
