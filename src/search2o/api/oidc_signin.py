"""Web App sign-in with the company's identity provider (OpenID Connect Core 1.0, section 3.1).

The authorization code flow, as a confidential or public client (``oidc.client_secret``):

1. :meth:`OidcSignin.authorization_url`: the provider's ``authorization_endpoint`` (from
   discovery, :class:`search2o.idp.ProviderKeys`) with ``response_type=code``, our
   ``redirect_uri``, the ``oidc.scopes``, a random ``state`` and ``nonce``, and the PKCE
   challenge of a random verifier (RFC 7636, method ``S256``); the three values wait in
   ``signin_grants`` (:func:`search2o.signin.begin_oidc`).
2. :meth:`OidcSignin.complete`: the code is exchanged at the ``token_endpoint`` with the
   verifier (Authlib's OAuth 2.0 client); the ID token's signature is checked against the
   provider's JWKS and its claims (section 3.1.3.7): ``iss``, ``aud`` = ``oidc.client_id``,
   ``exp``, ``nonce``. The user is the ``oidc.email_claim`` (refused when ``email_verified`` is
   false), created on first sign-in; with ``oidc.groups_claim`` set its groups replace the
   user's, so document access lists follow the directory.

Nothing is written unless every check passed: the user row is created or updated in the same
transaction as the session that :mod:`search2o.api.routers.auth` then starts.
"""

from __future__ import annotations

from authlib.integrations.base_client import OAuthError
from authlib.integrations.httpx_client import OAuth2Client
from sqlalchemy import select
from sqlalchemy.orm import Session

from search2o.accounts import create_user, normalize_email
from search2o.config import Settings
from search2o.errors import AuthenticationError, InputError
from search2o.idp import ProviderKeys, groups_from_claims, validate_claims
from search2o.signin import OidcRequest
from search2o.storage.models import User
from search2o.surfaces.mcp.settings import mcp_settings, public_url
from search2o.terminal import has_controls
from search2o.textrules import text_problem

__all__ = ["CALLBACK_PATH", "OidcSignin"]

CALLBACK_PATH = "/v1/auth/oidc/callback"
"""Where the provider sends the browser back (the default redirect URL's path)."""

_WHAT = "identity provider sign-in"


class OidcSignin:
    """The relying party of Web App sign-in (see the module docstring).

    Args:
        settings: the server's settings; ``oidc.issuer`` and ``oidc.client_id`` must be set.

    Raises:
        ValueError: OIDC is not configured.

    """

    def __init__(self, settings: Settings) -> None:
        oidc = settings.oidc
        if oidc.issuer is None or oidc.client_id is None:
            raise ValueError("OidcSignin needs oidc.issuer and oidc.client_id")
        self._settings = settings
        self._client_id = oidc.client_id
        self._redirect_url = oidc.redirect_url or public_url(settings) + CALLBACK_PATH
        # The MCP server's verifier holds its own keys of the same issuer; both follow rotation.
        self.keys = ProviderKeys(
            oidc.issuer,
            mcp_settings(settings).oidc_timeout_s,
            mcp_settings(settings).oidc_jwks_cache_s,
            "oidc.issuer",
        )

    def _client(self) -> OAuth2Client:
        oidc = self._settings.oidc
        secret = oidc.client_secret.get_secret_value() if oidc.client_secret else None
        return OAuth2Client(
            client_id=self._client_id,
            client_secret=secret,
            scope=" ".join(oidc.scopes),
            redirect_uri=self._redirect_url,
            code_challenge_method="S256",
            token_endpoint_auth_method="client_secret_basic" if secret else "none",
            timeout=mcp_settings(self._settings).oidc_timeout_s,
            follow_redirects=False,
        )

    def authorization_url(self, request: OidcRequest) -> str:
        """Return the provider's URL that starts ``request`` (blocking: discovery on a miss).

        Raises:
            AuthenticationError: the provider's discovery cannot be fetched or is wrong.

        """
        endpoint = self.keys.endpoint("authorization_endpoint")
        with self._client() as client:
            url, _ = client.create_authorization_url(
                endpoint,
                state=request.state,
                nonce=request.nonce,
                code_verifier=request.code_verifier,
            )
        return str(url)

    def complete(self, session: Session, code: str, request: OidcRequest) -> User:
        """Exchange ``code``, verify the ID token, and return the (created or updated) user.

        Blocking (HTTP to the provider, then the database in ``session``).

        Raises:
            AuthenticationError: the provider refuses the code (a replayed or foreign one), no
                ID token, a bad signature or claim, an unverified or unusable email.

        """
        endpoint = self.keys.endpoint("token_endpoint")
        try:
            with self._client() as client:
                token = client.fetch_token(endpoint, code=code, code_verifier=request.code_verifier)
        except OAuthError as exc:
            raise AuthenticationError(f"{_WHAT} refused by the provider: {exc.error}") from exc
        except Exception as exc:  # httpx errors and bodies that are no token response
            raise AuthenticationError(f"{_WHAT}: the token endpoint failed") from exc
        id_token = token.get("id_token")
        if not isinstance(id_token, str):
            raise AuthenticationError(f"{_WHAT} refused: the provider returned no ID token")
        algorithms = list(mcp_settings(self._settings).oidc_algorithms)
        claims = self.keys.decode(id_token, algorithms, f"{_WHAT} (ID token)")
        validate_claims(
            claims,
            issuer=self.keys.issuer,
            audience=self._client_id,
            leeway_s=mcp_settings(self._settings).oidc_leeway_s,
            what=f"{_WHAT} (ID token)",
            nonce=request.nonce,
        )
        return self._user(session, claims)

    def _user(self, session: Session, claims: dict[str, object]) -> User:
        oidc = self._settings.oidc
        raw = claims.get(oidc.email_claim)
        try:
            email = normalize_email(raw if isinstance(raw, str) else "", oidc.email_claim)
        except InputError as exc:
            raise AuthenticationError(f"{_WHAT} refused: {exc.reason}") from exc
        if claims.get("email_verified") is False:
            raise AuthenticationError(f"{_WHAT} refused: the provider has not verified {email}")
        name = claims.get("name")
        usable = isinstance(name, str) and text_problem(name) is None and not has_controls(name)
        display = name.strip()[:200] if usable and isinstance(name, str) else ""
        groups = groups_from_claims(dict(claims), oidc.groups_claim) if oidc.groups_claim else None
        user = session.scalar(select(User).where(User.email == email))
        if user is None:
            user = create_user(session, email, display_name=display)
        if groups is not None:
            user.groups = groups
        session.flush()
        return user
