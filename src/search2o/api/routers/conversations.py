"""Conversations and messages: list, read, rename, pin, delete, rate, trace.

Another user's conversation or message is answered exactly like a missing one (404).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from search2o.api.deps import CurrentUser, RuntimeDep
from search2o.api.jsonbody import StrictJsonRoute
from search2o.api.openapi import error_responses
from search2o.api.params import ConversationId, MessageId
from search2o.errors import InputError
from search2o.query.conversations import MAX_OFFSET
from search2o.query.feedback import check_feedback
from search2o.wire.chat import (
    ConversationDetailPublic,
    ConversationListPublic,
    ConversationPatch,
    ConversationPublic,
    MessagePublic,
    RatingRequest,
)

router = APIRouter(prefix="/v1", tags=["conversations"], route_class=StrictJsonRoute)


@router.get("/conversations", responses=error_responses(401, 422, 503))
def list_conversations(
    user: CurrentUser,
    runtime: RuntimeDep,
    limit: Annotated[int, Query(ge=1, le=200, description="1..200")] = 50,
    offset: Annotated[
        int, Query(ge=0, le=MAX_OFFSET, description=f"rows to skip, 0..{MAX_OFFSET}")
    ] = 0,
) -> ConversationListPublic:
    """List the caller's conversations: pinned first, then most recently used first."""
    rows = runtime.conversations.list_conversations(user, limit, offset)
    return ConversationListPublic(conversations=[ConversationPublic(**asdict(r)) for r in rows])


@router.get(
    "/conversations/{conversation_id}", responses=error_responses(401, 404, 422, 500, 502, 503)
)
def get_conversation(
    conversation_id: ConversationId, user: CurrentUser, runtime: RuntimeDep
) -> ConversationDetailPublic:
    """Return one conversation with its messages (404 if missing or another user's)."""
    info = runtime.conversations.get(user, conversation_id)
    messages = runtime.conversations.messages(user, conversation_id)
    return ConversationDetailPublic(
        **asdict(info), messages=[MessagePublic(**asdict(m)) for m in messages]
    )


@router.patch(
    "/conversations/{conversation_id}", responses=error_responses(401, 404, 413, 422, 503)
)
def update_conversation(
    conversation_id: ConversationId, body: ConversationPatch, user: CurrentUser, runtime: RuntimeDep
) -> ConversationPublic:
    """Rename and/or pin or unpin a conversation (422 naming the field on a bad value)."""
    if body.title is None and body.pinned is None:
        raise InputError("body", "give `title`, `pinned` or both")
    info = runtime.conversations.update(user, conversation_id, title=body.title, pinned=body.pinned)
    return ConversationPublic(**asdict(info))


@router.delete(
    "/conversations/{conversation_id}",
    status_code=204,
    responses=error_responses(401, 404, 422, 502, 503),
)
def delete_conversation(
    conversation_id: ConversationId, user: CurrentUser, runtime: RuntimeDep
) -> Response:
    """Delete a conversation with its messages, ratings and traces."""
    runtime.conversations.delete(user, conversation_id)
    return Response(status_code=204)


@router.put("/messages/{message_id}/rating", responses=error_responses(401, 404, 413, 422, 503))
def rate_message(
    message_id: MessageId, body: RatingRequest, user: CurrentUser, runtime: RuntimeDep
) -> MessagePublic:
    """Rate an assistant answer ``up`` or ``down``, or clear the rating with ``null``.

    A ``down`` may carry ``reasons`` and a ``comment``; with another rating either is a 422
    naming the field. Clearing the rating clears them.
    """
    feedback = check_feedback(
        body.rating,
        body.reasons,
        body.comment,
        max_comment_chars=runtime.settings.chat.max_feedback_comment_chars,
    )
    return MessagePublic(**asdict(runtime.conversations.rate(user, message_id, feedback)))


@router.get("/messages/{message_id}/trace", responses=error_responses(401, 404, 422, 500, 503))
def message_trace(message_id: MessageId, user: CurrentUser, runtime: RuntimeDep) -> dict[str, Any]:
    """Return an answer's retrieval trace: tool calls, queries, hits, packing, timings.

    Readable by the conversation's owner and by admins.
    """
    return runtime.conversations.trace(user, message_id)
