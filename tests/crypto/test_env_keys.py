"""The ``env`` provider: one key, or versioned keys, from an environment variable."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from search2o.crypto.env_keys import EnvKeyProvider
from search2o.crypto.envelope import new_data_key
from search2o.crypto.keys import WrappedKey, build_key_provider
from search2o.crypto.settings import KeySettings
from search2o.errors import ConfigError, KeyUnavailableError

VAR = "SEARCH2O_TEST_KEK"


def b64key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def test_a_single_key_is_version_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VAR, b64key())
    provider = EnvKeyProvider(VAR)
    data_key = new_data_key()
    wrapped = provider.wrap(data_key)
    assert (provider.key_id, wrapped.key_id, wrapped.version) == (f"env:{VAR}",) * 2 + (1,)
    assert provider.unwrap(wrapped) == data_key
    assert [(v.version, v.current, v.usable) for v in provider.versions()] == [(1, True, True)]


def test_versioned_keys_the_highest_is_current(monkeypatch: pytest.MonkeyPatch) -> None:
    one, two = b64key(), b64key()
    monkeypatch.setenv(VAR, f"1:{one}")
    data_key = new_data_key()
    old = EnvKeyProvider(VAR).wrap(data_key)
    monkeypatch.setenv(VAR, f" 2:{two} , 1:{one} ")
    provider = EnvKeyProvider(VAR)
    new = provider.wrap(data_key)
    assert (old.version, new.version) == (1, 2)
    assert provider.unwrap(old) == provider.unwrap(new) == data_key
    assert [(v.version, v.current) for v in provider.versions()] == [(1, False), (2, True)]
    monkeypatch.setenv(VAR, f"2:{two}")  # version 1 removed from the variable: retired
    with pytest.raises(KeyUnavailableError, match=f"version 1 is not in {VAR}"):
        EnvKeyProvider(VAR).unwrap(old)


@pytest.mark.parametrize(
    "value",
    [
        "not base64!",
        "1:" + base64.b64encode(b"short").decode(),
        "x:AAAA",
        "0:" + "A" * 44,
        f"1:{'A' * 43}=,1:{'A' * 43}=",
    ],
    ids=["not-base64", "short-key", "bad-version", "version-zero", "duplicate-version"],
)
def test_bad_values_name_the_variable(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(VAR, value)
    with pytest.raises(ConfigError, match=VAR) as caught:
        EnvKeyProvider(VAR)
    assert value.strip() not in caught.value.message  # key material is never echoed


def test_unset_names_the_variable_and_the_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(VAR, raising=False)
    with pytest.raises(ConfigError, match=rf"{VAR} is unset.*openssl rand -base64 32"):
        build_key_provider(KeySettings(provider="env", env_var=VAR), tmp_path)


def test_versions_are_managed_outside(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VAR, b64key())
    provider = EnvKeyProvider(VAR)
    with pytest.raises(ConfigError, match="managed outside search2o"):
        provider.add_version()
    with pytest.raises(KeyUnavailableError):
        provider.unwrap(WrappedKey(provider.key_id, 3, b"\x00" * 40))
