"""Who a request acts as: one function for the ingress middleware and the route dependency.

A bearer token (RFC 6750, section 2.1: ``Authorization: Bearer <token>``, scheme
case-insensitive) identifies its owner; a token issued by a local-mode start works in local mode
only (:func:`~search2o.accounts.resolve_token`). Without one, a browser's session cookie
(:func:`search2o.signin.resolve_session`) names its user, whose current row gives the rights;
in token mode a cookie that is unknown, ended or expired is refused (401), in local mode it is
ignored. Without either, ``auth_mode=local`` acts as the
single local user for a loopback peer (or a Unix socket, which has no peer address) and, with
``insecure_local_mode``, for any peer; ``auth_mode=token`` refuses. The peer check holds
wherever the ASGI server binds, whatever ``settings.host`` says.

A *surface token* is no user. With ``X-Search2o-Act-As`` it acts as the user linked to the
named account on its surface, or as its shared-channel principal, never with admin rights
(:func:`search2o.surfaces.identity.acting_principal`); without the header it is a
:class:`~search2o.accounts.SurfaceCaller`, which only the surface routes accept. Every other
caller sending the header is refused (403): a user's token that names someone else is a
misconfigured surface, and acting as its owner instead would answer strangers as that user.
"""

from __future__ import annotations

from search2o.accounts import Principal, SurfaceCaller, resolve_token
from search2o.errors import AuthenticationError, PermissionDeniedError
from search2o.netpolicy import is_loopback_host
from search2o.runtime import Runtime
from search2o.signin import resolve_session
from search2o.surfaces.identity import acting_principal
from search2o.wire.names import ACT_AS_HEADER

__all__ = [
    "ACT_AS_HEADER",
    "PRINCIPAL_KEY",
    "Caller",
    "authenticate_header",
    "bearer_token",
]

PRINCIPAL_KEY = "principal"
"""The key of the authenticated :data:`Caller` in the ASGI scope's ``state``."""

Caller = Principal | SurfaceCaller
"""Who a request comes from: a principal, or a surface token acting for nobody."""


def bearer_token(authorization: str | None) -> str | None:
    """Return the token of ``Authorization: Bearer <token>`` (``None``: none, another scheme)."""
    if not authorization:
        return None
    scheme, _, credentials = authorization.partition(" ")
    if scheme.lower() != "bearer" or not credentials.strip():
        return None
    return credentials.strip()


def authenticate_header(
    runtime: Runtime,
    authorization: str | None,
    peer: str | None = None,
    act_as: str | None = None,
    session_cookie: str | None = None,
) -> Caller:
    """Return the caller of a request given its ``Authorization`` and ``X-Search2o-Act-As``.

    Blocking (one database transaction; the first request of a shared-channel principal
    creates its user row); call it from a worker thread on the server.

    Args:
        runtime: the process's runtime.
        authorization: the ``Authorization`` header's value, ``None`` when absent.
        peer: the client's address (``None`` for a Unix socket).
        act_as: the ``X-Search2o-Act-As`` header's value, ``None`` when absent.
        session_cookie: the session cookie's value, ``None`` when absent.

    Raises:
        AuthenticationError: a token that is unknown, revoked or out of scope; in token mode
            a session that is unknown, ended or expired, or neither token nor session; no
            token from a non-loopback peer in local mode.
        InputError: a surface token's ``X-Search2o-Act-As`` is malformed.
        PermissionDeniedError: a surface token names an account not linked on its surface;
            anyone else sends ``X-Search2o-Act-As``.

    """
    settings = runtime.settings
    token = bearer_token(authorization)
    if token is not None:
        with runtime.database.session() as session:
            caller = resolve_token(session, token, auth_mode=settings.auth_mode)
            if isinstance(caller, SurfaceCaller):
                if act_as is None:
                    return caller
                return acting_principal(session, caller.surface, act_as)
            _refuse_act_as(act_as)  # inside the transaction: a refusal notes no use
            return caller
    if session_cookie and settings.auth_mode == "token":
        _refuse_act_as(act_as)
        with runtime.database.session() as session:
            return resolve_session(session, session_cookie, settings.web)
    if settings.auth_mode == "local":
        if not peer or settings.insecure_local_mode or is_loopback_host(peer):
            _refuse_act_as(act_as)
            return runtime.local_principal()
        raise AuthenticationError(
            "local single-user mode answers requests without a token from this machine only: "
            "send `Authorization: Bearer <token>`, or have the operator set "
            "SEARCH2O_AUTH_MODE=token"
        )
    raise AuthenticationError(
        "not signed in: sign in to the Web App, or send `Authorization: Bearer <token>`"
    )


def _refuse_act_as(act_as: str | None) -> None:
    """Refuse ``X-Search2o-Act-As`` from a caller that is no surface token."""
    if act_as is not None:
        raise PermissionDeniedError(
            f"only a surface's service token (`search2o surfaces token SURFACE`) may send "
            f"{ACT_AS_HEADER}; send the request without it to act as yourself"
        )
