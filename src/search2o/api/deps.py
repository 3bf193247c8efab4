"""Request dependencies as ``Annotated`` aliases: the runtime and who the caller is.

* :data:`CurrentUser`: any principal (a user, or whom a surface token acts as);
* :data:`AdminUser`: an admin (never a surface token's principal);
* :data:`SelfUser`: a user acting for themselves (not through a surface token);
* :data:`SurfaceName`: the surface of a surface token, acting for someone or not;
* :data:`SurfaceUser`: the principal a surface token acts as.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from search2o.accounts import Principal, SurfaceCaller
from search2o.api.auth import ACT_AS_HEADER, PRINCIPAL_KEY, Caller, authenticate_header
from search2o.api.csrf import session_cookie
from search2o.errors import AuthenticationError, PermissionDeniedError
from search2o.runtime import Runtime

__all__ = ["AdminUser", "CurrentUser", "RuntimeDep", "SelfUser", "SurfaceName", "SurfaceUser"]

_SURFACE_ONLY = "only a surface's service token may do this (`search2o surfaces token SURFACE`)"
_bearer = HTTPBearer(auto_error=False, description="An API token from `search2o users add`.")


def get_runtime(request: Request) -> Runtime:
    """Return the runtime the app factory stored on the app."""
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def get_caller(
    request: Request,
    runtime: RuntimeDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Caller:
    """Return the caller :class:`~search2o.api.ingress.Ingress` authenticated.

    ``credentials`` is declared for the OpenAPI document (the bearer scheme); the token was
    checked before the body was read (:func:`search2o.api.auth.authenticate_header` has the
    rules). An app without the ingress (none is built so, but a route may be mounted
    elsewhere) authenticates here.

    Raises:
        AuthenticationError, InputError, PermissionDeniedError: as
            :func:`~search2o.api.auth.authenticate_header`.

    """
    caller = request.scope.get("state", {}).get(PRINCIPAL_KEY)
    if isinstance(caller, Principal | SurfaceCaller):
        return caller
    peer = request.client.host if request.client else None
    return authenticate_header(
        runtime,
        request.headers.get("authorization"),
        peer,
        request.headers.get(ACT_AS_HEADER),
        session_cookie(request.headers),
    )


CallerDep = Annotated[Caller, Depends(get_caller)]


def get_principal(caller: CallerDep) -> Principal:
    """Return the principal of the request.

    Raises:
        AuthenticationError: as :func:`get_caller`; a surface token that names nobody to
            act as.

    """
    if isinstance(caller, SurfaceCaller):
        raise AuthenticationError(
            f"a {caller.surface} surface token acts for someone: send {ACT_AS_HEADER}: "
            "user:<workspace>:<external user id> or shared:<workspace>"
        )
    return caller


CurrentUser = Annotated[Principal, Depends(get_principal)]


def get_admin(user: CurrentUser) -> Principal:
    """Return the authenticated caller if they are an admin.

    Raises:
        AuthenticationError: as :func:`get_principal`.
        PermissionDeniedError: the caller is not an admin (a surface token's principal never
            is).

    """
    if not user.is_admin:
        raise PermissionDeniedError("only admins may do this; ask an admin of this server")
    return user


AdminUser = Annotated[Principal, Depends(get_admin)]


def get_self(user: CurrentUser) -> Principal:
    """Return the caller if they act for themselves, not through a surface token.

    Raises:
        AuthenticationError: as :func:`get_principal`.
        PermissionDeniedError: a surface token acts for the user.

    """
    if user.surface is not None:
        raise PermissionDeniedError(
            "only the user themselves may do this (in the Web App or with their own token), "
            f"not the {user.surface} surface acting for them"
        )
    return user


SelfUser = Annotated[Principal, Depends(get_self)]


def get_surface(caller: CallerDep) -> str:
    """Return the surface of a surface token, whether it acts for someone or not.

    Raises:
        AuthenticationError: as :func:`get_caller`.
        PermissionDeniedError: the token is no surface token.

    """
    surface = caller.surface
    if surface is None:
        raise PermissionDeniedError(_SURFACE_ONLY)
    return surface


SurfaceName = Annotated[str, Depends(get_surface)]


def get_surface_user(user: CurrentUser) -> Principal:
    """Return the principal a surface token acts as.

    Raises:
        AuthenticationError: as :func:`get_principal` (a surface token naming nobody).
        PermissionDeniedError: the token is no surface token.

    """
    if user.surface is None:
        raise PermissionDeniedError(_SURFACE_ONLY)
    return user


SurfaceUser = Annotated[Principal, Depends(get_surface_user)]
