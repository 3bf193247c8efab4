"""Who a request acts as: one function for the ingress middleware and the route dependency.

A bearer token (RFC 6750, section 2.1: ``Authorization: Bearer <token>``, scheme
case-insensitive) identifies its owner; a token issued by a local-mode start works in local mode
only (:func:`~search2o.accounts.authenticate`). Without one, ``auth_mode=local`` acts as the
single local user for a loopback peer (or a Unix socket, which has no peer address) and, with
``insecure_local_mode``, for any peer; ``auth_mode=token`` refuses. The peer check holds
wherever the ASGI server binds, whatever ``settings.host`` says.
"""

from __future__ import annotations

from search2o.accounts import Principal, authenticate
from search2o.errors import AuthenticationError
from search2o.netpolicy import is_loopback_host
from search2o.runtime import Runtime

__all__ = ["PRINCIPAL_KEY", "authenticate_header"]

PRINCIPAL_KEY = "principal"
"""The key of the authenticated :class:`Principal` in the ASGI scope's ``state``."""


def _bearer_token(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, credentials = authorization.partition(" ")
    if scheme.lower() != "bearer" or not credentials.strip():
        return None
    return credentials.strip()


def authenticate_header(
    runtime: Runtime, authorization: str | None, peer: str | None = None
) -> Principal:
    """Return the principal of a request given its ``Authorization`` header (or ``None``).

    Blocking (one database read); call it from a worker thread on the server.

    Args:
        runtime: the process's runtime.
        authorization: the header's value, ``None`` when absent.
        peer: the client's address (``None`` for a Unix socket).

    Raises:
        AuthenticationError: a token that is unknown, revoked or out of scope; no token in
            token mode, or from a non-loopback peer in local mode.

    """
    settings = runtime.settings
    token = _bearer_token(authorization)
    if token is not None:
        with runtime.database.session() as session:
            return authenticate(session, token, auth_mode=settings.auth_mode)
    if settings.auth_mode == "local":
        if not peer or settings.insecure_local_mode or is_loopback_host(peer):
            return runtime.local_principal()
        raise AuthenticationError(
            "local single-user mode answers requests without a token from this machine only: "
            "send `Authorization: Bearer <token>`, or have the operator set "
            "SEARCH2O_AUTH_MODE=token"
        )
    raise AuthenticationError("missing API token: send `Authorization: Bearer <token>`")
