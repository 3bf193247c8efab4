"""The ``mcp`` settings section (docs/mcp.md), and the server's public address it holds."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
)

from search2o.extensions import Extra
from search2o.netpolicy import url_problem
from search2o.settings_base import section_of

if TYPE_CHECKING:
    from search2o.config import Settings

__all__ = ["EXTRA", "McpSettings", "mcp_settings", "public_url"]


# Asymmetric JWS algorithms only (RFC 7518 section 3.1, RFC 8037): never "none" or HMAC.
_JwsAlgorithm = Literal["RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA"]


class McpSettings(BaseModel):
    """The MCP server (:mod:`search2o.surfaces.mcp`, docs/mcp.md): endpoint, allowlists, tokens.

    ``public_url`` is this server's address as clients reach it (scheme, host, port, no path);
    default ``http://<host>:<port>`` of the settings. The MCP endpoint is ``<public_url>/mcp``,
    its RFC 9728 metadata ``<public_url>/.well-known/oauth-protected-resource/mcp``, a
    document's citation URL ``<public_url>/v1/documents/<id>/text``.

    ``allowed_hosts`` / ``allowed_origins`` are the values of the ``Host`` and ``Origin``
    headers the endpoint accepts (the SDK's DNS-rebinding protection: another ``Host`` answers
    421, another ``Origin`` 403); ``name:*`` accepts any port. Default: loopback names on any
    port plus ``public_url``'s host and origin.

    With ``oidc_issuer`` set, a bearer token that is not one of our API tokens is verified as a
    JWT access token of that identity provider (OpenID Connect Discovery 1.0 for its
    ``jwks_uri``; RFC 7519 / RFC 9068 claims): signature by a key of its JWKS with one of
    ``oidc_algorithms``, ``iss`` equal to the issuer, ``aud`` holding ``audience`` (default:
    the MCP endpoint's URL, RFC 8707), ``exp`` in the future (``oidc_leeway_s`` of clock skew).
    The ``oidc_email_claim`` names an existing user; groups come from ``oidc_groups_claim``
    when set, else from the user's record.
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(default=True, description="serve /mcp in `search2o serve`")
    public_url: str | None = Field(
        default=None, description="e.g. https://search2o.example.com (default http://host:port)"
    )
    allowed_hosts: list[str] | None = Field(
        default=None, description="Host header values accepted at /mcp, e.g. search.example.com"
    )
    allowed_origins: list[str] | None = Field(
        default=None, description="Origin header values accepted at /mcp"
    )
    search_k: int = Field(
        default=10, ge=1, le=100, description="chunks `search` retrieves; results: their documents"
    )
    max_fetch_chars: int = Field(
        default=200_000, ge=1000, le=10_000_000, description="longest text `fetch` returns"
    )
    oidc_issuer: str | None = Field(
        default=None, description="e.g. https://login.example.com/realms/staff"
    )
    audience: str | None = Field(
        default=None, min_length=1, description="the access tokens' aud (default: the MCP URL)"
    )
    oidc_email_claim: str = Field(default="email", min_length=1, max_length=100)
    oidc_groups_claim: str | None = Field(
        default=None, min_length=1, max_length=100, description="e.g. groups (default: stored)"
    )
    oidc_algorithms: list[_JwsAlgorithm] = Field(
        default_factory=lambda: list[_JwsAlgorithm](["RS256", "ES256"]), min_length=1
    )
    oidc_timeout_s: float = Field(default=10.0, gt=0, le=120, description="discovery and JWKS")
    oidc_jwks_cache_s: float = Field(
        default=3600.0, ge=0, le=86_400, description="keys are fetched again after this long"
    )
    oidc_leeway_s: int = Field(default=60, ge=0, le=600, description="clock skew for exp/nbf")

    @field_validator("public_url", "oidc_issuer")
    @classmethod
    def _url(cls, value: str | None, info: ValidationInfo) -> str | None:
        # The issuer is where signing keys come from: https, plain http to loopback only.
        if value is None:
            return None
        secure = info.field_name == "oidc_issuer"
        problem = url_problem(value, secure=secure, query=False)
        if problem is not None:
            raise ValueError(problem)
        if secure:
            return value.strip()
        # /mcp and the RFC 9728 well-known path are served at the root of this address.
        if urlsplit(value.strip()).path not in ("", "/"):
            raise ValueError(f"{value!r} must be scheme://host[:port] without a path")
        return value.strip().rstrip("/")

    @field_validator("allowed_hosts", "allowed_origins")
    @classmethod
    def _no_blank_entries(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and any(not e.strip() or e != e.strip() for e in value):
            raise ValueError("entries must be non-blank, without surrounding spaces")
        return value


def public_url(settings: Settings) -> str:
    """Return the server's address as browsers reach it: ``mcp.public_url`` or ``server_url``.

    Sign-in links and the OIDC redirect URL are built on it.
    """
    from search2o.config import server_url

    return mcp_settings(settings).public_url or server_url(settings)


def mcp_settings(settings: object) -> McpSettings:
    """Return the ``mcp`` section of the root settings (by :func:`~.settings_base.section_of`).

    Raises:
        ConfigError: the section is not installed.

    """
    return section_of(settings, "mcp", McpSettings)


def _asked_by(settings: object) -> str | None:
    """Return ``mcp.enabled`` when it is set to true explicitly (file or environment)."""
    section = mcp_settings(settings)
    return "mcp.enabled" if section.enabled and "enabled" in section.model_fields_set else None


EXTRA = Extra("mcp", ("mcp", "joserfc"), "the MCP server", _asked_by)
"""The MCP SDK and joserfc; required when ``mcp.enabled`` is set, optional by default."""
