"""Request and response bodies of the chat, conversation and message endpoints."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr

from search2o.wire.fields import NAME_PATTERN, at_least_one, text_field
from search2o.wire.names import json_rule

__all__ = [
    "ChatRequest",
    "ConversationDetailPublic",
    "ConversationListPublic",
    "ConversationPatch",
    "ConversationPublic",
    "MessagePublic",
    "PageContext",
    "RatingRequest",
    "Reason",
]

Reason = Literal["wrong_source", "missing_information", "outdated", "unsupported_citation"]
"""Why an answer was rated down (:data:`search2o.query.feedback.REASONS` lists them in order)."""


class PageContext(BaseModel):
    """The page the user is reading, sent as context for the question (untrusted data).

    The model reads its text as one numbered source, labelled as data and never as
    instructions; citing it gives a citation with ``source: "this page"``, the page's title and
    URL. The page grants no access: ``search_knowledge`` still reads only what the caller may.
    The text is kept only inside the conversation's sealed user message.
    """

    model_config = ConfigDict(extra="forbid")

    url: StrictStr | None = Field(
        default=None,
        max_length=8000,
        description="the page's address: http:// or https:// with a host (shown as the link)",
    )
    title: StrictStr | None = Field(
        default=None, max_length=500, description="the page's title (shown on the citation)"
    )
    text: StrictStr = text_field(
        "the page's readable text, as the user saw and edited it; not empty, at most "
        "chat.max_page_chars characters; cut to the model's window when longer"
    )


class ChatRequest(BaseModel):
    """``POST /v1/chat``: one user message, in a new or an existing conversation.

    The document also states the rules between fields (JSON Schema 2020-12 ``not``): a page
    goes with no agent, and ``inputs`` only with one.
    """

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "allOf": [
                {
                    "not": {
                        "required": ["agent", "page"],
                        "properties": {"agent": {"type": "string"}, "page": {"type": "object"}},
                    }
                },
                {
                    "not": {
                        "required": ["inputs"],
                        "properties": {"inputs": {"type": "object"}},
                        "not": {"required": ["agent"], "properties": {"agent": {"type": "string"}}},
                    }
                },
            ]
        },
    )

    message: StrictStr = text_field(
        "the user's message; not empty, at most chat.max_message_chars characters"
    )
    conversation_id: StrictStr | None = Field(
        default=None,
        max_length=64,
        description="continue this conversation; omit to start a new one",
    )
    agent: StrictStr | None = Field(
        default=None,
        max_length=100,
        json_schema_extra=json_rule(NAME_PATTERN, 100),
        description="run this agent in the conversation instead of a chat turn; a message "
        "without it answers an agent's waiting question when there is one",
    )
    inputs: dict[str, Any] | None = Field(
        default=None, description="the agent's inputs (only with `agent`)"
    )
    page: PageContext | None = Field(
        default=None,
        description="the page the user is reading, as context for a chat turn (not an agent)",
    )
    stream: StrictBool = Field(
        default=True,
        description="true: Server-Sent Events; false: one JSON body (the `done` event's data "
        "plus `conversation_id` and `tool_calls`) when the answer is complete",
    )


class ConversationPublic(BaseModel):
    """A conversation as listed."""

    id: str
    title: str
    pinned: bool
    created_at: datetime
    last_used_at: datetime
    message_count: int


class ConversationListPublic(BaseModel):
    """The caller's conversations: pinned first, then most recently used."""

    conversations: list[ConversationPublic]


class MessagePublic(BaseModel):
    """One message of a conversation.

    ``status``: ``complete``; ``interrupted`` (the client left mid-answer; the partial text is
    kept); ``failed`` (the model or a tool failed; the text is what was written before).
    """

    id: str
    conversation_id: str
    role: str
    text: str
    citations: list[dict[str, Any]]
    status: str
    searched: bool
    rating: str | None
    agent: str | None
    created_at: datetime
    rating_reasons: list[str] = Field(
        default_factory=list, description="the caller's reasons for a down rating"
    )
    rating_comment: str | None = Field(
        default=None, description="the caller's comment on a down rating"
    )


class ConversationDetailPublic(ConversationPublic):
    """A conversation with its messages in order."""

    messages: list[MessagePublic]


class ConversationPatch(BaseModel):
    """``PATCH /v1/conversations/{id}``: rename and/or pin; at least one of them not null."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra=at_least_one({"title": "string", "pinned": "boolean"})
    )

    title: StrictStr | None = Field(
        default=None,
        description="1..200 printable characters",
        json_schema_extra={"minLength": 1, "maxLength": 200},
    )
    pinned: StrictBool | None = None


class RatingRequest(BaseModel):
    """``PUT /v1/messages/{id}/rating``: ``up``, ``down``, or ``null`` to clear.

    ``reasons`` and ``comment`` only with ``down`` (:func:`search2o.query.feedback.
    check_feedback`); every request replaces the previous rating with its reasons and comment.
    """

    model_config = ConfigDict(extra="forbid")

    rating: Literal["up", "down"] | None
    reasons: list[Reason] | None = Field(
        default=None,
        description="why it is wrong, each at most once; only with rating down",
    )
    comment: StrictStr | None = text_field(
        "free text; only with rating down; at most chat.max_feedback_comment_chars",
        default=None,
    )
