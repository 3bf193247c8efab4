"""Bodies of the Web App's own endpoints.

The caller, their conversation pages, and the admin views of users (and their changes),
feedback and settings.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr

from search2o.accounts import Plan
from search2o.api.params import GroupName
from search2o.wire.chat import ConversationPublic
from search2o.wire.fields import EMAIL_PATTERN, at_least_one
from search2o.wire.names import json_rule

__all__ = [
    "ConversationPagePublic",
    "FeedbackItemPublic",
    "FeedbackPublic",
    "MePublic",
    "PagedConversationPublic",
    "ServerSettingsPublic",
    "UserCreate",
    "UserListPublic",
    "UserPatch",
    "UserPublic",
]


class MePublic(BaseModel):
    """The caller: who they are, what they may do, and how long their conversations live."""

    email: str
    groups: list[str]
    is_admin: bool
    plan: str = Field(description="free or paid")
    auth_mode: str = Field(description="local (single user) or token")
    retention_days: int | None = Field(
        description="days an unpinned conversation lives after its last use; null: forever"
    )


class PagedConversationPublic(ConversationPublic):
    """A conversation of a page, with when it expires under retention."""

    expires_at: datetime | None = Field(
        description="when it expires unless used again; null: pinned or never expires"
    )


class ConversationPagePublic(BaseModel):
    """One page of the caller's conversations: pinned first, then most recently used."""

    conversations: list[PagedConversationPublic]
    next_cursor: str | None = Field(description="pass as `cursor` for the next page; null: end")


class UserPublic(BaseModel):
    """A user as an admin sees it (never a token)."""

    email: str
    groups: list[str]
    is_admin: bool
    plan: str
    created_at: datetime


class UserCreate(BaseModel):
    """``POST /v1/users``: a new user (they sign in with OIDC or a sign-in link; no token)."""

    model_config = ConfigDict(extra="forbid")

    email: StrictStr = Field(
        max_length=320,
        description="name@domain; the user's identity",
        json_schema_extra=json_rule(EMAIL_PATTERN, 320),
    )
    groups: list[GroupName] = Field(default_factory=list, max_length=100)
    is_admin: StrictBool = False
    plan: Plan = "free"


class UserPatch(BaseModel):
    """``PATCH /v1/users/{email}``: what to change; an absent field is left as it is.

    ``groups`` replaces the user's groups. Demoting the last admin is refused (409).
    """

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra=at_least_one(
            {"groups": "array", "is_admin": "boolean", "plan": "string"}
        ),
    )

    groups: list[GroupName] | None = Field(default=None, max_length=100)
    is_admin: StrictBool | None = None
    plan: Plan | None = None


class UserListPublic(BaseModel):
    """Every user, ordered by email."""

    users: list[UserPublic]


class FeedbackItemPublic(BaseModel):
    """One rated answer: who rated it, how, when, why, and whether its retrieval trace exists."""

    message_id: str = Field(description="the answer; its trace is GET /v1/messages/{id}/trace")
    conversation_id: str
    user_email: str
    rating: str = Field(description="up or down")
    rated_at: datetime
    searched: bool
    agent: str | None
    has_trace: bool
    reasons: list[str] = Field(description="why it was rated down (see RatingRequest)")
    comment: str | None = Field(description="the rater's comment on a down rating")


class FeedbackPublic(BaseModel):
    """Rated answers, most recently rated first."""

    feedback: list[FeedbackItemPublic]


class ServerSettingsPublic(BaseModel):
    """The settings an admin may see (read-only; set them in the environment or TOML file)."""

    auth_mode: str
    database: str = Field(description="sqlite or postgresql")
    chat_provider: str = Field(description="the active chat profile's provider")
    chat_model: str | None
    web_search: bool = Field(description="whether the web_search tool is on")
    web_search_provider: str | None
    retention_days: dict[str, int | None] = Field(description="per plan; null: never")
