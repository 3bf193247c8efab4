"""Users, for admins: ``GET``/``POST /v1/users``, ``PATCH``/``DELETE /v1/users/{email}``.

A change takes effect on the user's next request (:mod:`search2o.user_admin`): a demoted admin
is refused the admin routes, a removed user's tokens and sessions stop working. The last admin
can be neither demoted nor removed (409).
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from search2o import accounts
from search2o.api.deps import AdminUser, RuntimeDep
from search2o.api.jsonbody import StrictJsonRoute
from search2o.api.me_schemas import UserCreate, UserListPublic, UserPatch, UserPublic
from search2o.api.openapi import error_responses
from search2o.api.params import UserEmail
from search2o.storage.models import User
from search2o.user_admin import UserChange, remove_user, update_user

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["admin"], route_class=StrictJsonRoute)


def _public(user: User) -> UserPublic:
    return UserPublic(
        email=user.email,
        groups=list(user.groups),
        is_admin=user.is_admin,
        plan=user.plan,
        created_at=user.created_at,
    )


@router.get("/users", responses=error_responses(401, 403, 503))
def users(admin: AdminUser, runtime: RuntimeDep) -> UserListPublic:
    """List every user with groups, admin flag and plan (admins only; tokens never shown)."""
    with runtime.database.session() as session:
        return UserListPublic(users=[_public(u) for u in accounts.list_users(session)])


@router.post("/users", status_code=201, responses=error_responses(401, 403, 409, 413, 422, 503))
def add_user(body: UserCreate, admin: AdminUser, runtime: RuntimeDep) -> UserPublic:
    """Add a user (409 if the email exists).

    No token is issued: they sign in with the company's identity provider or a sign-in link
    (``search2o users login-link``).
    """
    with runtime.database.session() as session:
        user = accounts.create_user(
            session, body.email, groups=body.groups, is_admin=body.is_admin, plan=body.plan
        )
        return _public(user)


@router.patch("/users/{email}", responses=error_responses(401, 403, 404, 409, 413, 422, 503))
def change_user(
    email: UserEmail, body: UserPatch, admin: AdminUser, runtime: RuntimeDep
) -> UserPublic:
    """Change a user's groups, admin flag and/or plan (409 if it demotes the last admin)."""
    change = UserChange(groups=body.groups, is_admin=body.is_admin, plan=body.plan)
    with runtime.database.session() as session:
        return _public(update_user(session, email, change))


@router.delete(
    "/users/{email}", status_code=204, responses=error_responses(401, 403, 404, 409, 422, 503)
)
def delete_user(email: UserEmail, admin: AdminUser, runtime: RuntimeDep) -> Response:
    """Remove a user: conversations, memories, tokens, sessions (409 for the last admin)."""
    with runtime.database.session() as session:
        remove_user(session, email)
    return Response(status_code=204)
