"""The ``local`` provider: a keyring file, 0600, versioned, with retirement."""

from __future__ import annotations

import json
import logging
import stat
from pathlib import Path

import pytest

from search2o.crypto.envelope import new_data_key
from search2o.crypto.keys import WrappedKey, build_key_provider
from search2o.crypto.local_keyring import LocalKeyring
from search2o.crypto.settings import KeySettings
from search2o.errors import ConfigError, InputError, IntegrityCheckError, KeyUnavailableError


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_created_0600_with_one_current_version(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "keyring.json"
    ring = LocalKeyring(path)
    assert _mode(path) == 0o600
    assert ring.key_id.startswith("local-")
    [version] = ring.versions()
    assert (version.version, version.current, version.usable) == (1, True, True)
    assert [p.name for p in path.parent.iterdir()] == ["keyring.json"]  # no temporary left


def test_round_trip_survives_a_reload(tmp_path: Path) -> None:
    data_key = new_data_key()
    wrapped = LocalKeyring(tmp_path / "k.json").wrap(data_key)
    assert (wrapped.version, len(wrapped.blob)) == (1, 40)  # RFC 3394 adds 8 bytes
    assert data_key not in wrapped.blob
    assert LocalKeyring(tmp_path / "k.json").unwrap(wrapped) == data_key


def test_a_keyring_readable_by_others_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "keyring.json"
    LocalKeyring(path)
    path.chmod(0o644)
    with pytest.raises(ConfigError, match=r"mode 644.*chmod 600"):
        LocalKeyring(path)


def test_add_version_then_retire(tmp_path: Path) -> None:
    ring = LocalKeyring(tmp_path / "keyring.json")
    data_key = new_data_key()
    old = ring.wrap(data_key)
    assert ring.add_version() == 2
    new = ring.wrap(data_key)
    assert (old.version, new.version) == (1, 2)
    assert ring.unwrap(old) == ring.unwrap(new) == data_key  # the old version still decrypts
    ring.retire(1)
    with pytest.raises(KeyUnavailableError, match="version 1 is retired"):
        ring.unwrap(old)
    assert ring.unwrap(new) == data_key
    assert [(v.version, v.current, v.usable) for v in ring.versions()] == [
        (1, False, False),
        (2, True, True),
    ]
    on_disk = json.loads((tmp_path / "keyring.json").read_text())
    assert "key" not in on_disk["versions"][0] and "retired_at" in on_disk["versions"][0]
    assert _mode(tmp_path / "keyring.json") == 0o600
    reloaded = LocalKeyring(tmp_path / "keyring.json")
    with pytest.raises(KeyUnavailableError):
        reloaded.unwrap(old)


def test_retire_refuses_current_unknown_and_retired(tmp_path: Path) -> None:
    ring = LocalKeyring(tmp_path / "keyring.json")
    with pytest.raises(InputError, match="current; rotate first") as current:
        ring.retire(1)
    assert current.value.field == "version"
    ring.add_version()
    with pytest.raises(InputError, match="does not exist"):
        ring.retire(9)
    ring.retire(1)
    with pytest.raises(InputError, match="already retired"):
        ring.retire(1)


def test_tampered_or_foreign_wrapped_keys(tmp_path: Path) -> None:
    ring = LocalKeyring(tmp_path / "a.json")
    wrapped = ring.wrap(new_data_key())
    bad = bytearray(wrapped.blob)
    bad[3] ^= 1
    with pytest.raises(IntegrityCheckError, match="does not unwrap"):
        ring.unwrap(WrappedKey(wrapped.key_id, 1, bytes(bad)))
    other = LocalKeyring(tmp_path / "b.json")
    with pytest.raises(KeyUnavailableError, match="configure the keyring"):
        other.unwrap(wrapped)
    with pytest.raises(KeyUnavailableError, match="version 5 is unknown"):
        ring.unwrap(WrappedKey(wrapped.key_id, 5, wrapped.blob))


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        '{"key_id": "k", "current": 2, "versions": [{"version": 1}]}',
        '{"key_id": "k", "current": 1, "versions": []}',
        '{"current": 1, "versions": [{"version": 1}]}',
        "[]",
        '{"key_id": "k", "current": 1, "versions": ["v1"]}',
        '{"key_id": "k", "current": 1, "versions": [{"version": 1, "key": "AAAA"}]}',
        '{"key_id": "k", "current": 1, "versions": [{"version": 1, "created_at": "soon"}]}',
    ],
    ids=[
        "not-json",
        "current-missing",
        "no-versions",
        "no-key-id",
        "a-list",
        "entry-not-object",
        "short-key",
        "bad-created-at",
    ],
)
def test_a_malformed_keyring_is_a_config_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "keyring.json"
    path.write_text(content)
    path.chmod(0o600)
    with pytest.raises(ConfigError, match="keyring"):
        LocalKeyring(path)


def test_built_from_settings_by_entry_point(tmp_path: Path) -> None:
    path = tmp_path / "elsewhere" / "ring.json"
    provider = build_key_provider(KeySettings(keyring_path=path), tmp_path / "data")
    assert isinstance(provider, LocalKeyring) and provider.path == path
    default = build_key_provider(KeySettings(), tmp_path / "data")
    assert isinstance(default, LocalKeyring)
    assert default.path == tmp_path / "data" / "keyring.json"


def test_an_unknown_provider_names_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"keys\.provider.*'vault9'.*env, http, local"):
        build_key_provider(KeySettings(provider="vault9"), tmp_path)


def test_a_rotation_by_another_process_is_seen_by_a_running_one(tmp_path: Path) -> None:
    path = tmp_path / "keyring.json"
    server, cli = LocalKeyring(path), LocalKeyring(path)
    before = server.wrap(b"k" * 32)
    assert cli.add_version() == 2
    after = server.wrap(b"k" * 32)  # the server re-reads the changed file
    assert (before.version, after.version) == (1, 2)
    cli.retire(1)
    with pytest.raises(KeyUnavailableError, match="version 1 is retired"):
        server.unwrap(before)
    assert server.unwrap(after) == b"k" * 32


# ---------------------------------------------------------------------------------------------
# the folder the keyring lives in (the data folder by default)
# ---------------------------------------------------------------------------------------------


def test_the_keyring_creates_its_folder_owner_only(tmp_path: Path) -> None:
    LocalKeyring(tmp_path / "data" / "keyring.json")
    assert _mode(tmp_path / "data") == 0o700


def test_a_new_data_folder_is_owner_only_with_everything_in_it(tmp_path: Path) -> None:
    from search2o.config import Settings
    from search2o.runtime import Runtime

    data = tmp_path / "data"
    with Runtime(Settings(data_dir=data)):
        pass
    assert _mode(data) == 0o700
    assert {p.name: _mode(p) & 0o077 for p in data.iterdir()} == {p.name: 0 for p in data.iterdir()}
    assert {"keyring.json", "search2o.db"} <= {p.name for p in data.iterdir()}


def test_a_folder_someone_else_opened_is_left_alone_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from search2o.config import Settings
    from search2o.runtime import Runtime

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    with caplog.at_level(logging.WARNING, logger="search2o"), Runtime(Settings(data_dir=shared)):
        pass
    assert _mode(shared) == 0o755  # the operator's folder: not changed behind their back
    warnings = [r.getMessage() for r in caplog.records if str(shared) in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "mode 755" in warnings[0] and f"chmod 700 {shared}" in warnings[0]
