"""Request dependencies as ``Annotated`` aliases: the runtime, the caller, an admin caller."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from search2o.accounts import Principal, authenticate
from search2o.errors import AuthenticationError, PermissionDeniedError
from search2o.netpolicy import is_loopback_host
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
    """Authenticate the request.

    A bearer token identifies its owner (a token issued by a local-mode start only in local
    mode, :func:`~search2o.accounts.authenticate`). Without one, ``auth_mode=local`` acts as
    the single local user for a loopback peer (or a Unix socket, which has no peer address)
    and, with ``insecure_local_mode``, for any peer; ``auth_mode=token`` refuses. The peer
    check holds wherever the ASGI server binds, whatever ``settings.host`` says.

    Raises:
        AuthenticationError: missing (in token mode, or from a non-loopback peer in local
            mode), unknown, revoked or out-of-scope token.

    """
    settings = runtime.settings
    if credentials is not None:
        with runtime.database.session() as session:
            return authenticate(session, credentials.credentials, auth_mode=settings.auth_mode)
    if settings.auth_mode == "local":
        peer = request.client.host if request.client else ""
        if not peer or settings.insecure_local_mode or is_loopback_host(peer):
            return runtime.local_principal()
        raise AuthenticationError(
            "local single-user mode answers requests without a token from this machine only: "
            "send `Authorization: Bearer <token>`, or have the operator set "
            "SEARCH2O_AUTH_MODE=token"
        )
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
