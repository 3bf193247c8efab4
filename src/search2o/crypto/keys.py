"""Key-encryption keys (KEKs): the :class:`KeyProvider` protocol and how providers are found.

A KEK never encrypts content; it wraps the per-conversation data keys (envelope encryption,
NIST SP 800-57 Part 1 §5.3). Every wrapped data key records the KEK's ``key_id`` and
``version``, so a rotation can add a version, re-wrap every data key under it without touching
content, and later retire the old version.

Providers are found by name in the ``search2o.key_providers`` entry point group; each entry is a
factory ``(KeySettings, data_dir) -> KeyProvider``. Built in: ``local`` (a keyring file, the
default), ``env`` (keys in an environment variable) and ``http`` (a customer's key service: the
KEK never leaves it). Local KEKs wrap with AES Key Wrap (RFC 3394, ``cryptography``'s
``aes_key_wrap``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol, runtime_checkable

from cryptography.hazmat.primitives.keywrap import InvalidUnwrap, aes_key_unwrap, aes_key_wrap

from search2o.crypto.settings import KeySettings
from search2o.errors import IntegrityCheckError
from search2o.plugins import check_members, load_factory

__all__ = [
    "KeyProvider",
    "KeyVersion",
    "WrappedKey",
    "build_key_provider",
    "unwrap_with",
    "wrap_with",
]


@dataclass(frozen=True)
class WrappedKey:
    """A data key wrapped by version ``version`` of the KEK ``key_id``; ``blob`` is opaque."""

    key_id: str
    version: int
    blob: bytes


@dataclass(frozen=True)
class KeyVersion:
    """One version of a provider's KEK: whether it is current and whether it can still unwrap."""

    version: int
    current: bool
    usable: bool
    created_at: datetime | None = None


@runtime_checkable
class KeyProvider(Protocol):
    """Wraps and unwraps data keys with a KEK that may be versioned.

    ``key_id`` names the KEK (recorded with every wrapped key). ``wrap`` uses the current
    version. ``unwrap`` uses the version the wrapped key records, and raises
    :class:`~search2o.errors.KeyUnavailableError` for a retired or unknown version and
    :class:`~search2o.errors.IntegrityCheckError` for a blob that does not unwrap.
    ``add_version`` makes a new current version (providers whose versions are managed
    elsewhere raise :class:`~search2o.errors.ConfigError` saying where); ``retire`` makes a
    version unusable for good.
    """

    key_id: str

    def wrap(self, data_key: bytes) -> WrappedKey:
        """Wrap ``data_key`` with the current version."""
        ...

    def unwrap(self, wrapped: WrappedKey) -> bytes:
        """Return the data key inside ``wrapped``."""
        ...

    def versions(self) -> list[KeyVersion]:
        """Return every version the provider knows, oldest first."""
        ...

    def add_version(self) -> int:
        """Create a new current version and return its number."""
        ...

    def retire(self, version: int) -> None:
        """Make ``version`` unable to unwrap from now on."""
        ...


def wrap_with(kek: bytes, data_key: bytes) -> bytes:
    """Wrap ``data_key`` with ``kek`` (AES Key Wrap, RFC 3394)."""
    return aes_key_wrap(kek, data_key)


def unwrap_with(kek: bytes, blob: bytes, what: str) -> bytes:
    """Unwrap ``blob`` with ``kek`` (RFC 3394 integrity check included).

    Raises:
        IntegrityCheckError: the blob was altered or wrapped by another key.

    """
    try:
        return aes_key_unwrap(kek, bytes(blob))
    except (InvalidUnwrap, ValueError) as exc:
        raise IntegrityCheckError(f"{what} does not unwrap: altered, or another key") from exc


def build_key_provider(settings: KeySettings, data_dir: Path) -> KeyProvider:
    """Build the provider named by ``settings.provider``.

    Raises:
        ConfigError: no provider of that name is installed, or its settings are incomplete.

    """
    factory = load_factory("search2o.key_providers", settings.provider, "keys.provider")
    provider: KeyProvider = factory(settings, data_dir)
    check_members(provider, ("key_id", "wrap", "unwrap"), f"key provider {settings.provider!r}")
    return provider
