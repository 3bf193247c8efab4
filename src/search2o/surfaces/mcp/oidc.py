"""Access tokens of the company's identity provider: JWTs verified against its published keys.

With ``mcp.oidc_issuer`` set, an MCP client may sign the user in at the identity provider
(the MCP authorization flow: OAuth 2.1 with the provider as authorization server, found
through our RFC 9728 metadata) and send the access token it got. That token is verified here:

1. The provider's keys: OpenID Connect Discovery 1.0 (section 4) gives the ``jwks_uri`` at
   ``<issuer>/.well-known/openid-configuration``, whose ``issuer`` must equal the configured
   one exactly (section 4.3); the JSON Web Key Set (RFC 7517) there is kept
   ``mcp.oidc_jwks_cache_s`` seconds and fetched again early when a token names an unknown key
   id (key rotation), at most once a minute.
2. The signature (RFC 7515) by one of those keys, with an algorithm of ``mcp.oidc_algorithms``
   only (never ``none`` or an HMAC key, RFC 8725 section 3.1).
3. The claims (RFC 7519 section 4.1; RFC 9068 section 4): ``iss`` equals the issuer, ``aud``
   holds the audience (our MCP URL by default, RFC 8707), ``exp`` is in the future and
   ``nbf`` (when present) in the past, give or take ``mcp.oidc_leeway_s``.
4. The user: the ``mcp.oidc_email_claim`` claim names a user who must exist; their groups are
   the ``mcp.oidc_groups_claim`` claim's (names that are no valid group name are left out and
   logged) or, without that setting, their stored groups.

JOSE comes from ``joserfc``, the JOSE library of the Authlib project (Authlib 1.7 deprecates
its own ``authlib.jose`` for it). The keys are the only state, fetched from the settings'
issuer, so every API process holds the same.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, replace
from typing import Any

import httpx
from joserfc import jwt
from joserfc.errors import InvalidKeyIdError, JoseError
from joserfc.jwk import KeySet

from search2o.accounts import Principal, normalize_email, normalize_groups
from search2o.config import McpSettings
from search2o.errors import AuthenticationError, InputError, NotFoundError
from search2o.netpolicy import url_problem
from search2o.runtime import Runtime

__all__ = ["MAX_DOCUMENT_BYTES", "OidcVerifier", "VerifiedToken"]

MAX_DOCUMENT_BYTES = 1024 * 1024
"""The largest discovery document or key set read from the provider, in bytes."""

_REFETCH_AFTER_S = 60.0
"""An unknown key id fetches the key set again only if the last fetch is older than this."""

log = logging.getLogger("search2o.mcp")


@dataclass(frozen=True)
class VerifiedToken:
    """A verified access token: who it acts as and its registered claims.

    Attributes:
        principal: the user it names, with groups as step 4 of the module docstring says.
        client_id: ``client_id`` (RFC 9068) or ``azp`` of the token, else ``"oidc"``.
        scopes: the ``scope`` claim split on spaces.
        expires_at: ``exp`` in seconds since the epoch.
        subject: ``sub``.

    """

    principal: Principal
    client_id: str
    scopes: list[str]
    expires_at: int
    subject: str | None


class OidcVerifier:
    """Verify the identity provider's JWT access tokens (see the module docstring).

    Args:
        runtime: where users are looked up.
        settings: the ``mcp`` settings; ``oidc_issuer`` must be set.
        audience: the ``aud`` a token must hold.

    """

    def __init__(self, runtime: Runtime, settings: McpSettings, audience: str) -> None:
        if settings.oidc_issuer is None:
            raise ValueError("OidcVerifier needs mcp.oidc_issuer")
        self._runtime = runtime
        self._settings = settings
        self._issuer = settings.oidc_issuer
        self._audience = audience
        self._lock = threading.Lock()
        self._keys: KeySet | None = None
        self._fetched_at = -float("inf")

    @property
    def issuer(self) -> str:
        """The configured issuer URL."""
        return self._issuer

    def verify(self, token: str) -> VerifiedToken:
        """Verify ``token``; return who it acts as. Blocking (HTTP on a cache miss, database).

        Raises:
            AuthenticationError: the signature, an algorithm, a claim or the user is wrong, or
                the provider's keys cannot be fetched (the message says which, never the
                token).

        """
        claims = self._claims(token)
        registry = jwt.JWTClaimsRegistry(
            leeway=self._settings.oidc_leeway_s,
            iss={"essential": True, "value": self._issuer},
            aud={"essential": True, "value": self._audience},
            exp={"essential": True},
        )
        try:
            registry.validate(claims)
        except JoseError as exc:
            reason = exc.description
            raise AuthenticationError(f"identity provider token refused: {reason}") from exc
        principal = self._principal(claims)
        client = claims.get("client_id") or claims.get("azp") or "oidc"
        scope = claims.get("scope")
        return VerifiedToken(
            principal=principal,
            client_id=str(client),
            scopes=scope.split() if isinstance(scope, str) else [],
            expires_at=int(claims["exp"]),
            subject=str(claims["sub"]) if "sub" in claims else None,
        )

    def _claims(self, token: str) -> dict[str, Any]:
        """Check the signature; return the claims (not yet validated)."""
        algorithms = list(self._settings.oidc_algorithms)
        keys = self._key_set(refresh=False)
        try:
            try:
                return dict(jwt.decode(token, keys, algorithms=algorithms).claims)
            except InvalidKeyIdError:
                # The provider may have rotated its keys since they were fetched.
                keys = self._key_set(refresh=True)
                return dict(jwt.decode(token, keys, algorithms=algorithms).claims)
        except (JoseError, ValueError) as exc:
            reason = exc.description if isinstance(exc, JoseError) else "not a JWT"
            raise AuthenticationError(f"identity provider token refused: {reason}") from exc

    def _principal(self, claims: dict[str, Any]) -> Principal:
        """Return the user the claims name, with groups from the claim when one is configured."""
        name = self._settings.oidc_email_claim
        value = claims.get(name)
        try:
            email = normalize_email(value if isinstance(value, str) else "", name)
            principal = self._runtime.principal_for(email)
        except (InputError, NotFoundError) as exc:
            raise AuthenticationError(
                f"identity provider token refused: claim {name!r} names no user of this server"
            ) from exc
        groups_claim = self._settings.oidc_groups_claim
        if groups_claim is None:
            return principal
        raw = claims.get(groups_claim, [])
        names = raw.split() if isinstance(raw, str) else raw if isinstance(raw, list) else []
        groups: list[str] = []
        for group in names:
            try:
                groups.extend(normalize_groups([group]) if isinstance(group, str) else [])
            except InputError:
                log.warning(
                    "group left out of an identity provider token",
                    extra={"fields": {"claim": groups_claim, "group": str(group)[:100]}},
                )
        return replace(principal, groups=tuple(dict.fromkeys(groups)))

    def _key_set(self, *, refresh: bool) -> KeySet:
        """Return the provider's keys, fetched again when stale or (``refresh``) once a minute.

        Raises:
            AuthenticationError: discovery or the key set cannot be fetched or read.

        """
        with self._lock:
            age = time.monotonic() - self._fetched_at
            stale = age > self._settings.oidc_jwks_cache_s
            if self._keys is not None and not stale and not (refresh and age > _REFETCH_AFTER_S):
                return self._keys
            try:
                self._keys = self._fetch_keys()
            except AuthenticationError:
                if self._keys is None or stale:
                    raise
                return self._keys  # a rotation check that failed: keep the keys we have
            self._fetched_at = time.monotonic()
            return self._keys

    def _fetch_keys(self) -> KeySet:
        discovery = self._issuer.rstrip("/") + "/.well-known/openid-configuration"
        document = self._get_json(discovery)
        if document.get("issuer") != self._issuer:
            raise AuthenticationError(
                f"identity provider discovery at {discovery} names issuer "
                f"{str(document.get('issuer'))[:200]!r}, not mcp.oidc_issuer {self._issuer!r}"
            )
        jwks_uri = document.get("jwks_uri")
        problem = (
            url_problem(jwks_uri, secure=True) if isinstance(jwks_uri, str) else "is missing"
        )
        if problem is not None:
            raise AuthenticationError(f"identity provider jwks_uri: {problem}")
        assert isinstance(jwks_uri, str)
        try:
            return KeySet.import_key_set(self._get_json(jwks_uri))  # type: ignore[arg-type]
        except (JoseError, ValueError, KeyError, TypeError) as exc:
            raise AuthenticationError(f"identity provider keys at {jwks_uri} unreadable") from exc

    def _get_json(self, url: str) -> dict[str, Any]:
        """GET a JSON object from the provider (no redirects, bounded size and time)."""
        try:
            response = httpx.get(url, timeout=self._settings.oidc_timeout_s)
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
