"""Who a request acts as: one function for the ingress middleware and the route dependency.

A bearer token (RFC 6750, section 2.1: ``Authorization: Bearer <token>``, scheme
case-insensitive) always identifies its owner. Without one, ``auth_mode=local`` acts as the
single local user and ``auth_mode=token`` refuses.
"""

from __future__ import annotations

from search2o.accounts import Principal, authenticate
from search2o.errors import AuthenticationError
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


def authenticate_header(runtime: Runtime, authorization: str | None) -> Principal:
    """Return the principal of a request given its ``Authorization`` header (or ``None``).

    Blocking (one database read); call it from a worker thread on the server.

    Raises:
        AuthenticationError: a token that is unknown or revoked; no token in token mode.

    """
    token = _bearer_token(authorization)
    if token is not None:
        with runtime.database.session() as session:
            return authenticate(session, token)
    if runtime.settings.auth_mode == "local":
        return runtime.local_principal()
    raise AuthenticationError("missing API token: send `Authorization: Bearer <token>`")
