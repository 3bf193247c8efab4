"""The ``local`` key provider: versioned KEKs in a keyring file on the server's disk.

The file (default ``<data_dir>/keyring.json``) is created on first start with mode 0600 and one
random 256-bit key. Its JSON holds ``key_id``, ``current`` and ``versions``: each with
``version``, ``created_at``, and ``key`` (base64) until it is retired (then ``retired_at`` and
no key). Writes go to a temporary file in the same folder, created 0600, then ``os.replace``
(atomic on POSIX). A folder the keyring creates is owner-only (0700,
:mod:`search2o.private_dir`). A keyring readable by group or others is refused. Back the file
up apart from the database: without it, nothing sealed can be read again.

Another process (``search2o keys rotate`` or ``retire`` while the server runs) may change the
file: every use checks its modification time and size and re-reads it when they changed, so a
running server wraps new data keys with the version the CLI just made current.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import secrets
import stat
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from search2o.crypto.keys import KeyVersion, WrappedKey, unwrap_with, wrap_with
from search2o.crypto.settings import KeySettings
from search2o.errors import ConfigError, InputError, KeyUnavailableError
from search2o.private_dir import ensure_private_dir

__all__ = ["LocalKeyring"]

_KEK_BYTES = 32


class LocalKeyring:
    """A :class:`~search2o.crypto.keys.KeyProvider` backed by a keyring file.

    Args:
        path: the keyring file; created (with its folder) when missing (``created`` is then
            true, so the runtime can remove it again if the database was sealed with another).

    Raises:
        ConfigError: the file is unreadable, malformed, or readable by group or others.

    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self.created = not path.exists()
        self._data = self._create() if self.created else self._load()
        self.key_id: str = self._data["key_id"]

    @classmethod
    def from_settings(cls, settings: KeySettings, data_dir: Path) -> LocalKeyring:
        """Entry point factory: the keyring at ``keys.keyring_path`` or in ``data_dir``."""
        return cls(settings.keyring_path or data_dir / "keyring.json")

    def wrap(self, data_key: bytes) -> WrappedKey:
        """Wrap ``data_key`` with the current version (AES Key Wrap)."""
        with self._lock:
            self._refresh()
            version = self._data["current"]
            kek = self._kek(version)
        return WrappedKey(self.key_id, version, wrap_with(kek, data_key))

    def unwrap(self, wrapped: WrappedKey) -> bytes:
        """Unwrap with the version ``wrapped`` records.

        Raises:
            KeyUnavailableError: another keyring's key, or a retired or unknown version.
            IntegrityCheckError: the wrapped key was altered.

        """
        if wrapped.key_id != self.key_id:
            raise KeyUnavailableError(
                f"data key wrapped by {wrapped.key_id!r}, but the keyring {self.path} holds "
                f"{self.key_id!r}: configure the keyring it was written with"
            )
        with self._lock:
            self._refresh()
            kek = self._kek(wrapped.version)
        return unwrap_with(kek, wrapped.blob, f"data key (KEK {self.key_id} v{wrapped.version})")

    def versions(self) -> list[KeyVersion]:
        """Return every version, oldest first."""
        with self._lock:
            self._refresh()
            return [
                KeyVersion(
                    v["version"],
                    v["version"] == self._data["current"],
                    "key" in v,
                    datetime.fromisoformat(v["created_at"]),
                )
                for v in self._data["versions"]
            ]

    def add_version(self) -> int:
        """Add a random key as the new current version; return its number."""
        with self._lock:
            self._refresh()
            version = int(max(v["version"] for v in self._data["versions"])) + 1
            self._data["versions"].append(_new_version(version))
            self._data["current"] = version
            self._save(self._data)
            return version

    def retire(self, version: int) -> None:
        """Delete the key material of ``version`` (it can no longer unwrap).

        Raises:
            InputError: ``version`` is unknown, already retired, or the current one.

        """
        with self._lock:
            self._refresh()
            entry = next((v for v in self._data["versions"] if v["version"] == version), None)
            if entry is None:
                raise InputError("version", f"KEK version {version} does not exist")
            if version == self._data["current"]:
                raise InputError("version", f"KEK version {version} is current; rotate first")
            if "key" not in entry:
                raise InputError("version", f"KEK version {version} is already retired")
            del entry["key"]
            entry["retired_at"] = datetime.now(UTC).isoformat()
            self._save(self._data)

    # ---------------------------------------------------------------------------------------

    def _refresh(self) -> None:
        """Re-read the file if another process changed it (modification time or size)."""
        try:
            status = self.path.stat()
        except OSError as exc:
            raise ConfigError(f"cannot read the keyring {self.path}: {exc.strerror}") from exc
        if (status.st_mtime_ns, status.st_size) != self._stamp:
            self._data = self._load()

    def _kek(self, version: int) -> bytes:
        entry = next((v for v in self._data["versions"] if v["version"] == version), None)
        if entry is None or "key" not in entry:
            state = "unknown" if entry is None else "retired"
            raise KeyUnavailableError(f"KEK {self.key_id} version {version} is {state}")
        return base64.b64decode(entry["key"])

    def _create(self) -> dict[str, Any]:
        data = {
            "key_id": f"local-{secrets.token_hex(4)}",
            "current": 1,
            "versions": [_new_version(1)],
        }
        self._save(data)
        return data

    def _save(self, data: dict[str, Any]) -> None:
        try:
            ensure_private_dir(self.path.parent)
            temporary = self.path.with_name(f".{self.path.name}.{secrets.token_hex(4)}")
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                json.dump(data, handle, indent=2)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, self.path)
            status = self.path.stat()
            self._stamp = (status.st_mtime_ns, status.st_size)
        except OSError as exc:
            raise ConfigError(f"cannot write the keyring {self.path}: {exc.strerror}") from exc

    def _load(self) -> dict[str, Any]:
        try:
            mode = stat.S_IMODE(self.path.stat().st_mode)
            if mode & 0o077:
                raise ConfigError(
                    f"the keyring {self.path} has mode {mode:o}; it must be readable by its "
                    f"owner only (chmod 600 {self.path})"
                )
            status = self.path.stat()
            data: Any = json.loads(self.path.read_text())
        except OSError as exc:
            raise ConfigError(f"cannot read the keyring {self.path}: {exc.strerror}") from exc
        except ValueError as exc:
            raise ConfigError(f"the keyring {self.path} is not valid JSON: {exc}") from exc
        problem = _problem(data)
        if problem is not None:
            raise ConfigError(f"the keyring {self.path} is malformed: {problem}")
        self._stamp = (status.st_mtime_ns, status.st_size)
        result: dict[str, Any] = data
        return result


def _problem(data: Any) -> str | None:
    """Return what is wrong with a keyring's JSON, or ``None`` when it is well formed."""
    if not isinstance(data, dict) or not isinstance(data.get("key_id"), str):
        return "expected an object with a string key_id"
    versions = data.get("versions")
    if not isinstance(versions, list) or not versions:
        return "versions must be a non-empty list"
    seen = set()
    for index, entry in enumerate(versions):
        if not isinstance(entry, dict) or not isinstance(entry.get("version"), int):
            return f"versions[{index}] must be an object with an integer version"
        try:
            datetime.fromisoformat(str(entry.get("created_at")))
            key = base64.b64decode(entry["key"], validate=True) if "key" in entry else None
        except (ValueError, TypeError, binascii.Error):
            return f"versions[{index}] has a bad created_at or key"
        if key is not None and len(key) != _KEK_BYTES:
            return f"versions[{index}].key must be {_KEK_BYTES} bytes, not {len(key)}"
        seen.add(entry["version"])
    if data.get("current") not in seen:
        return "current must name one of the versions"
    return None


def _new_version(version: int) -> dict[str, Any]:
    return {
        "version": version,
        "created_at": datetime.now(UTC).isoformat(),
        "key": base64.b64encode(secrets.token_bytes(_KEK_BYTES)).decode(),
    }
