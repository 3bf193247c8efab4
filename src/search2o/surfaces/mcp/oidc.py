"""Access tokens of the company's identity provider: JWTs verified against its published keys.

With ``mcp.oidc_issuer`` set, an MCP client may sign the user in at the identity provider
(the MCP authorization flow: OAuth 2.1 with the provider as authorization server, found
through our RFC 9728 metadata) and send the access token it got. That token is verified here:

1. The provider's keys and 2. the signature: :class:`search2o.idp.ProviderKeys` (discovery,
   the JWKS kept ``mcp.oidc_jwks_cache_s`` seconds and fetched again on key rotation, an
   algorithm of ``mcp.oidc_algorithms`` only), shared with Web App sign-in.
3. The claims (RFC 7519 section 4.1; RFC 9068 section 4): ``iss`` equals the issuer, ``aud``
   holds the audience (our MCP URL by default, RFC 8707), ``exp`` is in the future and
   ``nbf`` (when present) in the past, give or take ``mcp.oidc_leeway_s``.
4. The user: the ``mcp.oidc_email_claim`` claim names a user who must exist; their groups are
   the ``mcp.oidc_groups_claim`` claim's (names that are no valid group name are left out and
   logged) or, without that setting, their stored groups.

The keys are the only state, fetched from the settings' issuer, so every API process holds
the same.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from search2o.accounts import Principal, normalize_email
from search2o.errors import AuthenticationError, InputError, NotFoundError
from search2o.idp import MAX_DOCUMENT_BYTES, ProviderKeys, groups_from_claims, validate_claims
from search2o.runtime import Runtime
from search2o.surfaces.mcp.settings import McpSettings

__all__ = ["MAX_DOCUMENT_BYTES", "OidcVerifier", "VerifiedToken"]


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
        self._keys = ProviderKeys(
            settings.oidc_issuer,
            settings.oidc_timeout_s,
            settings.oidc_jwks_cache_s,
            "mcp.oidc_issuer",
        )

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
        validate_claims(
            claims,
            issuer=self._issuer,
            audience=self._audience,
            leeway_s=self._settings.oidc_leeway_s,
            what="identity provider token",
        )
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
        return self._keys.decode(token, algorithms, "identity provider token")

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
        groups = groups_from_claims(claims, groups_claim)
        return replace(principal, groups=tuple(groups))
