"""Sealing records with AES-256-GCM under a data key, bound to where they belong.

A sealed record is ``version (1 byte) || nonce (12 bytes) || ciphertext || tag (16 bytes)``
(NIST SP 800-38D, GCM with a 96-bit random nonce; ``cryptography``'s ``AESGCM``). The
associated data names the record: its kind (``title``, ``message``, ``summary``, ``trace``,
``state``...), its conversation id and its owner's user id. It is authenticated, not stored:
a blob copied to another conversation, another user or another kind of record fails to open,
exactly like a tampered one.
"""

from __future__ import annotations

import json
import os
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from search2o.errors import IntegrityCheckError

__all__ = ["DATA_KEY_BYTES", "associated_data", "new_data_key", "open_json", "seal_json"]

DATA_KEY_BYTES = 32  # AES-256
_FORMAT = b"\x01"
_NONCE_BYTES = 12  # the GCM nonce length SP 800-38D recommends


def new_data_key() -> bytes:
    """Return a fresh random 256-bit data key (``os.urandom``)."""
    return os.urandom(DATA_KEY_BYTES)


def associated_data(kind: str, scope: str, owner: int | str) -> bytes:
    """Return the associated data binding a record to its kind, scope (conversation) and owner."""
    return f"search2o/v1|{kind}|{scope}|{owner}".encode()


def seal_json(key: bytes, value: Any, aad: bytes) -> bytes:
    """Encrypt ``value`` (JSON-serialisable) under ``key``; returns the sealed record.

    Raises:
        TypeError: ``value`` is not JSON-serialisable.

    """
    plaintext = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    nonce = os.urandom(_NONCE_BYTES)
    return _FORMAT + nonce + AESGCM(key).encrypt(nonce, plaintext, aad)


def open_json(key: bytes, blob: bytes, aad: bytes, what: str) -> Any:
    """Decrypt and verify a record made by :func:`seal_json` with the same ``key`` and ``aad``.

    Args:
        what: names the record in the error, e.g. ``"message 5b0c… of conversation 9f2a…"``.

    Raises:
        IntegrityCheckError: the record was altered, truncated, or belongs to another
            conversation, owner or kind (GCM tag mismatch), or its format is unknown.

    """
    blob = bytes(blob)
    if len(blob) < 1 + _NONCE_BYTES + 16 or blob[:1] != _FORMAT:
        raise IntegrityCheckError(f"{what}: not a sealed record (unknown format or truncated)")
    nonce, ciphertext = blob[1 : 1 + _NONCE_BYTES], blob[1 + _NONCE_BYTES :]
    try:
        plaintext = AESGCM(key).decrypt(nonce, ciphertext, aad)
    except InvalidTag as exc:
        raise IntegrityCheckError(
            f"{what} failed its integrity check: it was altered or does not belong here"
        ) from exc
    return json.loads(plaintext)
