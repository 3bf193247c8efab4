"""The ``env`` key provider: KEKs given in an environment variable (``keys.env_var``).

The value is one base64-encoded 256-bit key (version 1), or versioned keys separated by commas:
``1:<base64>,2:<base64>``; the highest version is current. Rotating means adding a version to
the variable, restarting, and running ``search2o keys rotate`` (which re-wraps every data key
under the new version); retiring means checking nothing uses a version
(``search2o keys retire N``) and then removing it from the variable.
"""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path

from search2o.crypto.keys import KeyVersion, WrappedKey, unwrap_with, wrap_with
from search2o.crypto.settings import KeySettings
from search2o.errors import ConfigError, KeyUnavailableError

__all__ = ["EnvKeyProvider"]


class EnvKeyProvider:
    """A :class:`~search2o.crypto.keys.KeyProvider` over keys read from one variable.

    ``key_id`` is ``env:<variable>``.

    Raises:
        ConfigError: the variable is unset, or a part is not ``[N:]<base64 of 32 bytes>``.

    """

    def __init__(self, variable: str) -> None:
        self.variable = variable
        raw = os.environ.get(variable, "").strip()
        if not raw:
            raise ConfigError(
                f"setting keys.provider is 'env' but the environment variable {variable} is "
                "unset; set it to a base64 256-bit key (e.g. `openssl rand -base64 32`)"
            )
        self._keys = _parse(variable, raw)
        self.key_id = f"env:{variable}"

    @classmethod
    def from_settings(cls, settings: KeySettings, data_dir: Path) -> EnvKeyProvider:
        """Entry point factory: the keys in ``keys.env_var``."""
        return cls(settings.env_var)

    def wrap(self, data_key: bytes) -> WrappedKey:
        """Wrap ``data_key`` with the highest version (AES Key Wrap)."""
        version = max(self._keys)
        return WrappedKey(self.key_id, version, wrap_with(self._keys[version], data_key))

    def unwrap(self, wrapped: WrappedKey) -> bytes:
        """Unwrap with the version ``wrapped`` records.

        Raises:
            KeyUnavailableError: the version is not in the variable (removed or never given).
            IntegrityCheckError: the wrapped key was altered or wrapped by another key.

        """
        kek = self._keys.get(wrapped.version)
        if kek is None:
            raise KeyUnavailableError(
                f"KEK version {wrapped.version} is not in {self.variable} (retired or missing)"
            )
        return unwrap_with(kek, wrapped.blob, f"data key (KEK {self.key_id} v{wrapped.version})")

    def versions(self) -> list[KeyVersion]:
        """Return the versions in the variable, oldest first."""
        current = max(self._keys)
        return [KeyVersion(v, v == current, True) for v in sorted(self._keys)]

    def add_version(self) -> int:
        """Refuse: the variable's owner adds versions (see the module docstring).

        Raises:
            ConfigError: always, with the steps to take.

        """
        raise ConfigError(
            f"keys in {self.variable} are managed outside search2o: add a version "
            f"(`{self.variable}=1:<old>,2:<new>`), restart, then run `search2o keys rotate`"
        )

    def retire(self, version: int) -> None:
        """Nothing to delete here: remove the version from the variable after this check."""


def _parse(variable: str, raw: str) -> dict[int, bytes]:
    keys: dict[int, bytes] = {}
    parts = [p.strip() for p in raw.split(",") if p.strip()]
    for index, part in enumerate(parts):
        label, _, encoded = part.rpartition(":")
        try:
            version = int(label) if label else 1
            key = base64.b64decode(encoded, validate=True)
        except (ValueError, binascii.Error) as exc:
            raise ConfigError(f"{variable} part {index + 1} is not [N:]<base64 key>") from exc
        if len(key) != 32 or version < 1 or version in keys:
            raise ConfigError(
                f"{variable} part {index + 1}: need a unique version ≥ 1 and a 32-byte key "
                f"(got version {version}, {len(key)} bytes)"
            )
        keys[version] = key
    return keys
