"""Request dependencies as ``Annotated`` aliases: the runtime, the caller, an admin caller."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from search2o.accounts import Principal, authenticate
from search2o.errors import AuthenticationError, PermissionDeniedError
from search2o.runtime import Runtime

__all__ = ["AdminUser", "CurrentUser", "RuntimeDep"]

_bearer = HTTPBearer(auto_error=False, description="An API token from `search2o users add`.")


def get_runtime(request: Request) -> Runtime:
    """Return the runtime the app factory stored on the app."""
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def get_principal(
    runtime: RuntimeDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """Authenticate the request.

    A bearer token always identifies its owner. Without one, ``auth_mode=local`` acts as the
    single local user; ``auth_mode=token`` refuses.

    Raises:
        AuthenticationError: missing (in token mode), unknown or revoked token.

    """
    if credentials is not None:
        with runtime.database.session() as session:
            return authenticate(session, credentials.credentials)
    if runtime.settings.auth_mode == "local":
        return runtime.local_principal()
    raise AuthenticationError("missing API token: send `Authorization: Bearer <token>`")


CurrentUser = Annotated[Principal, Depends(get_principal)]


def get_admin(user: CurrentUser) -> Principal:
    """Return the authenticated caller if they are an admin.

    Raises:
        AuthenticationError: as :func:`get_principal`.
        PermissionDeniedError: the caller is not an admin.

    """
    if not user.is_admin:
        raise PermissionDeniedError("only admins may do this; ask an admin of this server")
    return user


AdminUser = Annotated[Principal, Depends(get_admin)]
