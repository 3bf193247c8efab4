"""The ``keys`` settings section: where key-encryption keys come from (docs/keys.md)."""

from __future__ import annotations

from pathlib import Path

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
)

__all__ = ["KeySettings"]


class KeySettings(BaseModel):
    """The key-encryption key (KEK) that wraps every conversation's data key.

    ``local`` keeps versioned KEKs in a keyring file (``keyring_path``, default
    ``<data_dir>/keyring.json``, mode 0600, created on first start). ``env`` reads them from the
    environment variable ``env_var``: ``<base64 key>`` or ``1:<base64>,2:<base64>`` (highest
    version current). ``http`` asks the customer's key service at ``url`` to wrap and unwrap,
    signing each request with ``secret`` (HMAC-SHA256); the KEK never enters search2o.
    """

    model_config = ConfigDict(extra="forbid")

    provider: str = Field(default="local", description="entry point in search2o.key_providers")
    keyring_path: Path | None = Field(default=None, description="local: the keyring file")
    env_var: str = Field(default="SEARCH2O_KEK", description="env: the variable with the keys")
    url: str | None = Field(default=None, description="http: the key service's base URL")
    secret: SecretStr | None = Field(default=None, description="http: HMAC-SHA256 signing key")
    timeout_s: float = Field(default=10.0, gt=0, description="http: per request")
    cache_size: int = Field(default=4096, ge=0, description="unwrapped data keys kept in memory")
