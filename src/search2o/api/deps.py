"""Request dependencies as ``Annotated`` aliases: the runtime, the caller, an admin caller."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from search2o.accounts import Principal
from search2o.api.auth import PRINCIPAL_KEY, authenticate_header
from search2o.errors import PermissionDeniedError
from search2o.runtime import Runtime

__all__ = ["AdminUser", "CurrentUser", "RuntimeDep"]

_bearer = HTTPBearer(auto_error=False, description="An API token from `search2o users add`.")


def get_runtime(request: Request) -> Runtime:
    """Return the runtime the app factory stored on the app."""
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def get_principal(
    request: Request,
    runtime: RuntimeDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """Return the caller :class:`~search2o.api.ingress.Ingress` authenticated.

    ``credentials`` is declared for the OpenAPI document (the bearer scheme); the token was
    checked before the body was read (:func:`search2o.api.auth.authenticate_header` has the
    rules). An app without the ingress (none is built so, but a route may be mounted
    elsewhere) authenticates here.

    Raises:
        AuthenticationError: missing (in token mode, or from a non-loopback peer in local
            mode), unknown, revoked or out-of-scope token.

    """
    principal = request.scope.get("state", {}).get(PRINCIPAL_KEY)
    if isinstance(principal, Principal):
        return principal
    peer = request.client.host if request.client else None
    return authenticate_header(runtime, request.headers.get("authorization"), peer)


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
