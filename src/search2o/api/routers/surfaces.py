"""``/v1/surfaces``: what a surface needs besides chat — link accounts, map threads.

* ``POST /v1/surfaces/link-codes``: a signed-in user mints a one-time code for themselves (the
  Web App's "link an account" page); not through a surface token.
* ``POST``, ``GET``, ``DELETE /v1/surfaces/identities...``: a surface token links an external
  account (by code or verified email), looks it up, unlinks it. It needs no
  ``X-Search2o-Act-As``; the surface is the token's.
* ``GET``, ``PUT /v1/surfaces/threads/{workspace}/{channel}/{thread}``: the conversation a
  thread continues, for the principal the surface token acts as.

See ``docs/surfaces.md`` and :mod:`search2o.surfaces`.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response, status

from search2o.api.deps import RuntimeDep, SelfUser, SurfaceName, SurfaceUser
from search2o.api.jsonbody import StrictJsonRoute
from search2o.api.openapi import ErrorBody, error_responses
from search2o.api.params import ExternalId, Workspace
from search2o.errors import InputError, NotFoundError
from search2o.surfaces import identity, threads
from search2o.wire.surfaces import (
    IdentityPublic,
    LinkCodePublic,
    LinkCodeRequest,
    LinkRequest,
    ThreadPublic,
    ThreadRequest,
)

__all__ = ["router"]

router = APIRouter(prefix="/v1/surfaces", tags=["surfaces"], route_class=StrictJsonRoute)


def _responses(refused: str, *statuses: int) -> dict[int | str, dict[str, Any]]:
    """Document the error body for ``statuses`` and 403 with the reason ``refused``."""
    return {
        **error_responses(*statuses),
        403: {"model": ErrorBody, "description": refused},
    }


_SURFACE_ONLY = "not a surface's service token"
_SELF_ONLY = "a surface token acting for the user (only the user mints their codes)"
_ACTING = "not a surface token, or X-Search2o-Act-As names an account not linked on its surface"


@router.post(
    "/link-codes",
    status_code=status.HTTP_201_CREATED,
    responses=_responses(_SELF_ONLY, 401, 413, 422, 503),
)
def create_link_code(body: LinkCodeRequest, user: SelfUser, runtime: RuntimeDep) -> LinkCodePublic:
    """Mint a one-time code that links an external account to the caller (shown once).

    The caller types it where the surface asks for it (e.g. a direct message to the Slack
    app). It expires after ``minutes``; minting another drops the earlier unused one.
    """
    with runtime.database.session() as session:
        issued = identity.issue_link_code(
            session, user.user_id, surface=body.surface, minutes=body.minutes
        )
    return LinkCodePublic(code=issued.code, surface=issued.surface, expires_at=issued.expires_at)


@router.post("/identities", responses=_responses(_SURFACE_ONLY, 401, 404, 413, 422, 503))
def link_identity(body: LinkRequest, surface: SurfaceName, runtime: RuntimeDep) -> IdentityPublic:
    """Link an external account of the token's surface by a link code or a verified email.

    A code is used up and (re)links the account to its user; an unknown, used, expired or
    other surface's code is one 422 naming ``code``. An email links the user who has it, and
    keeps an existing link; no such user is a 404 (show the person how to link with a code).
    """
    if (body.code is None) == (body.email is None):
        raise InputError("body", "give `code` or `email`, one of them")
    with runtime.database.session() as session:
        if body.code is not None:
            found = identity.link(
                session, surface, body.workspace, body.external_user_id, body.code
            )
        else:
            assert body.email is not None
            linked = identity.link_by_email(
                session, surface, body.workspace, body.external_user_id, body.email
            )
            if linked is None:
                raise NotFoundError(
                    "no user has this email; the person links with a code from the Web App or "
                    "`search2o users link-code EMAIL`"
                )
            found = linked
    return IdentityPublic.model_validate(found, from_attributes=True)


@router.get(
    "/identities/{workspace}/{external_user_id}",
    responses=_responses(_SURFACE_ONLY, 401, 404, 422, 503),
)
def get_identity(
    workspace: Workspace, external_user_id: ExternalId, surface: SurfaceName, runtime: RuntimeDep
) -> IdentityPublic:
    """Return the link of an external account of the token's surface (404: not linked)."""
    with runtime.database.session() as session:
        found = identity.find_identity(session, surface, workspace, external_user_id)
    if found is None:
        raise NotFoundError(f"the {surface} account {workspace}:{external_user_id} is not linked")
    return IdentityPublic.model_validate(found, from_attributes=True)


@router.delete(
    "/identities/{workspace}/{external_user_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=_responses(_SURFACE_ONLY, 401, 404, 422, 503),
)
def delete_identity(
    workspace: Workspace, external_user_id: ExternalId, surface: SurfaceName, runtime: RuntimeDep
) -> Response:
    """Unlink an external account of the token's surface (the person asked to)."""
    with runtime.database.session() as session:
        identity.unlink(session, surface, workspace, external_user_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get(
    "/threads/{workspace}/{channel}/{thread}",
    responses=_responses(_ACTING, 401, 404, 422, 503),
)
def get_thread(
    workspace: Workspace,
    channel: ExternalId,
    thread: ExternalId,
    user: SurfaceUser,
    runtime: RuntimeDep,
) -> ThreadPublic:
    """Return the conversation the acting principal continues in a thread.

    404 when the thread is new, or mapped to another principal's conversation (the same).
    """
    assert user.surface is not None  # SurfaceUser
    with runtime.database.session() as session:
        found = threads.conversation_for_thread(
            session, user.surface, workspace, channel, thread, user
        )
    if found is None:
        raise NotFoundError(f"the thread {channel}/{thread} continues no conversation of yours")
    return ThreadPublic(
        surface=user.surface,
        workspace=workspace,
        channel=channel,
        thread=thread,
        conversation_id=found,
        created=False,
    )


@router.put(
    "/threads/{workspace}/{channel}/{thread}",
    responses=_responses(_ACTING, 401, 404, 409, 413, 422, 503),
)
def put_thread(
    workspace: Workspace,
    channel: ExternalId,
    thread: ExternalId,
    body: ThreadRequest,
    user: SurfaceUser,
    runtime: RuntimeDep,
) -> ThreadPublic:
    """Map a thread to the acting principal's conversation (its first answer's).

    The first mapping wins: a thread mapped already answers the conversation it has, with
    ``created: false``. 404: the conversation is missing or another principal's; 409: the
    thread continues another principal's conversation.
    """
    assert user.surface is not None  # SurfaceUser
    with runtime.database.session() as session:
        link = threads.remember_thread(
            session,
            user.surface,
            workspace,
            channel,
            thread,
            body.conversation_id,
            user,
            runtime.settings.retention,
        )
    return ThreadPublic.model_validate(link, from_attributes=True)
