"""Sealed records: AES-256-GCM round trip, tampering, records moved to where they don't belong."""

from __future__ import annotations

import pytest

from search2o.crypto.envelope import (
    DATA_KEY_BYTES,
    associated_data,
    new_data_key,
    open_json,
    seal_json,
)
from search2o.crypto.vault import Sealer
from search2o.errors import IntegrityCheckError

VALUE = {"text": "Fahrräder parken in der Tiefgarage 🚲", "citations": [{"n": 1}]}
AAD = associated_data("message", "conv-a", 7)


def test_round_trip_and_random_nonce() -> None:
    key = new_data_key()
    assert len(key) == DATA_KEY_BYTES
    first, second = seal_json(key, VALUE, AAD), seal_json(key, VALUE, AAD)
    assert first != second  # a fresh nonce each time
    assert b"Tiefgarage" not in first
    assert open_json(key, first, AAD, "message") == VALUE
    assert open_json(key, second, AAD, "message") == VALUE


@pytest.mark.parametrize("position", [1, 5, 13, 20, -1])  # nonce, ciphertext, tag
def test_a_tampered_byte_fails(position: int) -> None:
    key = new_data_key()
    blob = bytearray(seal_json(key, VALUE, AAD))
    blob[position] ^= 0x01
    with pytest.raises(IntegrityCheckError, match="message m1 failed its integrity check"):
        open_json(key, bytes(blob), AAD, "message m1")


def test_unknown_format_or_truncated_fails() -> None:
    key = new_data_key()
    blob = seal_json(key, VALUE, AAD)
    with pytest.raises(IntegrityCheckError, match="not a sealed record"):
        open_json(key, b"\x02" + blob[1:], AAD, "message")
    with pytest.raises(IntegrityCheckError, match="not a sealed record"):
        open_json(key, blob[:20], AAD, "message")


@pytest.mark.parametrize(
    "elsewhere",
    [
        associated_data("message", "conv-b", 7),  # another conversation
        associated_data("message", "conv-a", 8),  # another owner
        associated_data("title", "conv-a", 7),  # another kind of record
    ],
    ids=["conversation", "owner", "kind"],
)
def test_a_blob_moved_elsewhere_fails(elsewhere: bytes) -> None:
    key = new_data_key()
    blob = seal_json(key, VALUE, AAD)
    with pytest.raises(IntegrityCheckError):
        open_json(key, blob, elsewhere, "message")


def test_another_key_fails() -> None:
    blob = seal_json(new_data_key(), VALUE, AAD)
    with pytest.raises(IntegrityCheckError):
        open_json(new_data_key(), blob, AAD, "message")


def test_sealer_binds_conversation_owner_and_kind() -> None:
    key = new_data_key()
    mine = Sealer("conv-a", 7, key)
    blob = mine.seal("summary", "the running summary")
    assert mine.open("summary", blob) == "the running summary"
    for other, kind in [
        (Sealer("conv-b", 7, key), "summary"),
        (Sealer("conv-a", 8, key), "summary"),
        (mine, "state"),
    ]:
        with pytest.raises(IntegrityCheckError, match="integrity check"):
            other.open(kind, blob)


def test_not_json_serialisable_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        seal_json(new_data_key(), {"when": object()}, AAD)
