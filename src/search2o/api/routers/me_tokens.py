"""``/v1/me/tokens``: the caller creates, lists and revokes their own device tokens.

Only a user acting for themselves may (not a surface token acting for them). See
:mod:`search2o.own_tokens` for the rules.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Path, Response

from search2o.api.deps import RuntimeDep, SelfUser
from search2o.api.jsonbody import StrictJsonRoute
from search2o.api.openapi import error_responses
from search2o.api.token_schemas import (
    OwnTokenCreate,
    OwnTokenCreated,
    OwnTokenListPublic,
    OwnTokenPublic,
)
from search2o.own_tokens import issue_own_token, list_own_tokens, revoke_own_token

__all__ = ["router"]

router = APIRouter(prefix="/v1/me", tags=["me"], route_class=StrictJsonRoute)

TokenId = Annotated[int, Path(ge=1, le=2_147_483_647, description="the token's id")]


@router.post(
    "/tokens", status_code=201, responses=error_responses(401, 403, 404, 409, 413, 422, 503)
)
def create_token(body: OwnTokenCreate, user: SelfUser, runtime: RuntimeDep) -> OwnTokenCreated:
    """Create a device token for the caller; its secret is in this answer only."""
    local_only = runtime.settings.auth_mode == "local"
    with runtime.database.session() as session:
        token, secret = issue_own_token(session, user, body.name, local_only=local_only)
    return OwnTokenCreated(**asdict(token), token=secret)


@router.get("/tokens", responses=error_responses(401, 403, 503))
def list_tokens(user: SelfUser, runtime: RuntimeDep) -> OwnTokenListPublic:
    """List the caller's tokens, active and revoked, newest first (never a secret)."""
    with runtime.database.session() as session:
        tokens = list_own_tokens(session, user)
    return OwnTokenListPublic(tokens=[OwnTokenPublic(**asdict(t)) for t in tokens])


@router.delete(
    "/tokens/{token_id}", status_code=204, responses=error_responses(401, 403, 404, 422, 503)
)
def revoke_token(token_id: TokenId, user: SelfUser, runtime: RuntimeDep) -> Response:
    """Revoke one of the caller's active tokens: requests carrying it get 401 from now on."""
    with runtime.database.session() as session:
        revoke_own_token(session, user, token_id)
    return Response(status_code=204)
