"""The company's identity provider as seen by us: its discovery document and signing keys.

One :class:`ProviderKeys` per issuer serves both the MCP server (verifying access tokens,
:mod:`search2o.surfaces.mcp.oidc`) and Web App sign-in (verifying ID tokens,
:mod:`search2o.api.oidc_signin`):

* discovery (OpenID Connect Discovery 1.0, section 4) at
  ``<issuer>/.well-known/openid-configuration``, whose ``issuer`` must equal the configured one
  exactly (section 4.3), and whose endpoints must pass the URL policy
  (:func:`~search2o.netpolicy.url_problem`, https beyond loopback);
* the JSON Web Key Set (RFC 7517) at its ``jwks_uri``, kept ``cache_s`` seconds and fetched
  again early when a token names an unknown key id (key rotation), at most once a minute;
* :meth:`ProviderKeys.decode`: a JWT's signature (RFC 7515) checked by one of those keys with
  an allowed algorithm only (never ``none`` or an HMAC key, RFC 8725 section 3.1).

JOSE comes from ``joserfc``, the JOSE library of the Authlib project. Every fetch is a plain
GET without redirects, bounded in size (:data:`MAX_DOCUMENT_BYTES`) and time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

import httpx
from joserfc import jwt
from joserfc.errors import InvalidKeyIdError, JoseError
from joserfc.jwk import KeySet

from search2o.accounts import normalize_groups
from search2o.errors import AuthenticationError, InputError
from search2o.netpolicy import url_problem

__all__ = ["MAX_DOCUMENT_BYTES", "ProviderKeys", "groups_from_claims", "validate_claims"]

MAX_DOCUMENT_BYTES = 1024 * 1024
"""The largest discovery document or key set read from the provider, in bytes."""

_REFETCH_AFTER_S = 60.0
"""An unknown key id fetches the key set again only if the last fetch is older than this."""

log = logging.getLogger("search2o.idp")


class ProviderKeys:
    """The discovery document and key set of one issuer, fetched lazily and cached.

    Args:
        issuer: the issuer URL exactly as configured.
        timeout_s: bound of each HTTP request, in seconds.
        cache_s: how long the key set (and the discovery document) is kept, in seconds.
        setting: the setting naming the issuer, quoted in errors (``oidc.issuer``).

    Thread-safe: API requests verify tokens from worker threads.
    """

    def __init__(self, issuer: str, timeout_s: float, cache_s: float, setting: str) -> None:
        self.issuer = issuer
        self._timeout_s = timeout_s
        self._cache_s = cache_s
        self._setting = setting
        self._lock = threading.Lock()
        self._document: dict[str, Any] | None = None
        self._keys: KeySet | None = None
        self._fetched_at = -float("inf")

    def metadata(self) -> dict[str, Any]:
        """Return the provider's discovery document (cached like the keys).

        Raises:
            AuthenticationError: it cannot be fetched, is no JSON object or names another issuer.

        """
        self.key_set(refresh=False)
        assert self._document is not None
        return self._document

    def endpoint(self, name: str) -> str:
        """Return the discovery document's URL ``name`` (``token_endpoint``), checked.

        Raises:
            AuthenticationError: it is missing or fails the URL policy.

        """
        value = self.metadata().get(name)
        problem = url_problem(value, secure=True) if isinstance(value, str) else "is missing"
        if problem is not None:
            raise AuthenticationError(f"identity provider {name}: {problem}")
        assert isinstance(value, str)
        return value

    def decode(self, token: str, algorithms: Sequence[str], what: str) -> dict[str, Any]:
        """Check ``token``'s signature; return its claims (not yet validated).

        Args:
            token: the compact JWS.
            algorithms: the allowed ``alg`` values.
            what: what the token is, for errors (``identity provider token``).

        Raises:
            AuthenticationError: ``what refused: <reason>`` (never the token itself).

        """
        keys = self.key_set(refresh=False)
        try:
            try:
                return dict(jwt.decode(token, keys, algorithms=list(algorithms)).claims)
            except InvalidKeyIdError:
                # The provider may have rotated its keys since they were fetched.
                keys = self.key_set(refresh=True)
                return dict(jwt.decode(token, keys, algorithms=list(algorithms)).claims)
        except (JoseError, ValueError) as exc:
            reason = exc.description if isinstance(exc, JoseError) else "not a JWT"
            raise AuthenticationError(f"{what} refused: {reason}") from exc

    def key_set(self, *, refresh: bool) -> KeySet:
        """Return the provider's keys, fetched again when stale or (``refresh``) once a minute.

        Raises:
            AuthenticationError: discovery or the key set cannot be fetched or read.

        """
        with self._lock:
            age = time.monotonic() - self._fetched_at
            stale = age > self._cache_s
            if self._keys is not None and not stale and not (refresh and age > _REFETCH_AFTER_S):
                return self._keys
            try:
                self._document, self._keys = self._fetch()
            except AuthenticationError:
                if self._keys is None or stale:
                    raise
                return self._keys  # a rotation check that failed: keep the keys we have
            self._fetched_at = time.monotonic()
            return self._keys

    def _fetch(self) -> tuple[dict[str, Any], KeySet]:
        discovery = self.issuer.rstrip("/") + "/.well-known/openid-configuration"
        document = self._get_json(discovery)
        if document.get("issuer") != self.issuer:
            raise AuthenticationError(
                f"identity provider discovery at {discovery} names issuer "
                f"{str(document.get('issuer'))[:200]!r}, not {self._setting} {self.issuer!r}"
            )
        jwks_uri = document.get("jwks_uri")
        problem = url_problem(jwks_uri, secure=True) if isinstance(jwks_uri, str) else "is missing"
        if problem is not None:
            raise AuthenticationError(f"identity provider jwks_uri: {problem}")
        assert isinstance(jwks_uri, str)
        try:
            keys = KeySet.import_key_set(self._get_json(jwks_uri))  # type: ignore[arg-type]
        except (JoseError, ValueError, KeyError, TypeError) as exc:
            raise AuthenticationError(f"identity provider keys at {jwks_uri} unreadable") from exc
        return document, keys

    def _get_json(self, url: str) -> dict[str, Any]:
        """GET a JSON object from the provider (no redirects, bounded size and time)."""
        try:
            response = httpx.get(url, timeout=self._timeout_s)
            response.raise_for_status()
            if len(response.content) > MAX_DOCUMENT_BYTES:
                raise ValueError(f"over {MAX_DOCUMENT_BYTES} bytes")
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            log.warning(
                "identity provider unreachable",
                extra={"fields": {"url": url, "error": type(exc).__name__}},
            )
            raise AuthenticationError(f"identity provider not reachable at {url}") from exc
        if not isinstance(body, dict):
            raise AuthenticationError(f"identity provider answered no JSON object at {url}")
        return body


def validate_claims(
    claims: dict[str, Any],
    *,
    issuer: str,
    audience: str,
    leeway_s: int,
    what: str,
    nonce: str | None = None,
) -> None:
    """Check a verified JWT's registered claims (RFC 7519 section 4.1).

    ``iss`` must equal ``issuer``, ``aud`` hold ``audience``, ``exp`` lie in the future and
    ``nbf`` (when present) in the past, give or take ``leeway_s`` seconds; with ``nonce`` the
    ``nonce`` claim must equal it (OpenID Connect Core 1.0, section 3.1.3.7, step 11).

    Raises:
        AuthenticationError: ``what refused: <reason>`` naming the claim.

    """
    rules: dict[str, Any] = {
        "iss": {"essential": True, "value": issuer},
        "aud": {"essential": True, "value": audience},
        "exp": {"essential": True},
    }
    if nonce is not None:
        rules["nonce"] = {"essential": True, "value": nonce}
    try:
        jwt.JWTClaimsRegistry(leeway=leeway_s, **rules).validate(claims)
    except JoseError as exc:
        raise AuthenticationError(f"{what} refused: {exc.description}") from exc


def groups_from_claims(claims: dict[str, Any], claim: str) -> list[str]:
    """Return the group names of ``claims[claim]`` (a list, or a space-separated string).

    Names that are no valid group name (:func:`~search2o.accounts.normalize_groups`) are left
    out and logged; a missing claim or another type gives no groups.
    """
    raw = claims.get(claim, [])
    names = raw.split() if isinstance(raw, str) else raw if isinstance(raw, list) else []
    groups: list[str] = []
    for group in names:
        try:
            groups.extend(normalize_groups([group]) if isinstance(group, str) else [])
        except InputError:
            log.warning(
                "group left out of an identity provider token",
                extra={"fields": {"claim": claim, "group": str(group)[:100]}},
            )
    return list(dict.fromkeys(groups))
