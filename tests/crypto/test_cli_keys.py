"""``search2o keys status|rotate|retire`` end to end, on SQLite and PostgreSQL.

Data keys are written through a real runtime; the command runs in-process on the same data
folder and database; afterwards a fresh runtime (a new process would see the same) checks that
every conversation's sealed title still opens.
"""

from __future__ import annotations

import base64
import json
import os
import re
import stat
from typing import Any

import pytest
from click.testing import Result
from typer.testing import CliRunner

from search2o.cli import app
from search2o.config import Settings
from search2o.crypto.settings import KeySettings
from search2o.runtime import Runtime
from search2o.storage.models import Conversation
from tests.crypto.conftest import SECRET
from tests.crypto.keyservice import KeyService

VAR = "SEARCH2O_TEST_CLI_KEK"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class Keys:
    """Runs ``search2o keys ...`` and seeds/checks conversations with the same settings."""

    def __init__(self, settings: Settings, **env: str | None) -> None:
        self.settings = settings
        self.env: dict[str, str | None] = {
            "SEARCH2O_DATA_DIR": str(settings.data_dir),
            "SEARCH2O_DATABASE_URL": settings.database_url,
            "SEARCH2O_CONFIG": None,
            "SEARCH2O_KEYS__PROVIDER": settings.keys.provider,
            "SEARCH2O_KEYS__ENV_VAR": settings.keys.env_var,
            "SEARCH2O_KEYS__URL": settings.keys.url,
            "SEARCH2O_KEYS__SECRET": SECRET if settings.keys.secret else None,
            "COLUMNS": "300",
            "NO_COLOR": "1",
            **env,
        }
        self.titles: dict[str, tuple[int, bytes, str]] = {}

    def __call__(self, *args: str, code: int = 0) -> Result:
        result = CliRunner().invoke(app, ["keys", *args], env=self.env, catch_exceptions=False)
        assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
        return result

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "--json").stdout)

    def seed(self, count: int) -> None:
        """Create ``count`` conversations, each with its data key and a sealed title."""
        with Runtime(self.settings) as runtime:
            user_id = runtime.local_principal().user_id
            with runtime.database.session() as session:
                for i in range(count):
                    conversation = Conversation(user_id=user_id, title_sealed=b"x")
                    session.add(conversation)
                    session.flush()
                    sealer = runtime.vault.create(session, conversation.id, user_id)
                    conversation.title_sealed = sealer.seal("title", f"title {i}")
                    self.titles[conversation.id] = (
                        user_id,
                        conversation.title_sealed,
                        f"title {i}",
                    )

    def in_use(self) -> dict[tuple[str, int], int]:
        """Unwrap every data key with a fresh runtime; return the versions that wrap them."""
        with Runtime(self.settings) as runtime, runtime.database.session() as session:
            for conversation_id, (user_id, sealed, title) in self.titles.items():
                sealer = runtime.vault.sealer(session, conversation_id, user_id)
                assert sealer.open("title", sealed) == title
            return runtime.vault.versions_in_use()


def error(result: Result) -> str:
    lines = [line for line in _ANSI.sub("", result.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def test_rotate_then_retire_with_the_local_keyring(settings: Settings) -> None:
    keys = Keys(settings)
    keys.seed(3)
    status = keys.json("status")
    key_id = status["key_id"]
    assert status["provider"] == "local" and key_id.startswith("local-")
    assert [(v["version"], v["current"], v["data_keys"]) for v in status["versions"]] == [
        (1, True, 3)
    ]

    refused = error(keys("retire", "1", code=1))
    assert f"KEK {key_id} version 1 still wraps 3 data keys" in refused
    assert "search2o keys rotate" in refused

    rotated = keys("rotate").stdout
    assert f"added version 2 of KEK {key_id}" in rotated
    assert "re-wrapped 3 data keys to version 2 (0 already on it)" in rotated
    assert keys.in_use() == {(key_id, 2): 3}

    assert "still wraps 3 data keys" in error(keys("retire", "2", code=1))  # the current one
    assert "retired version 1" in keys("retire", "1").stdout
    assert keys.in_use() == {(key_id, 2): 3}  # every key still unwraps

    keyring = settings.data_dir / "keyring.json"
    assert stat.S_IMODE(keyring.stat().st_mode) == 0o600
    assert "key" not in json.loads(keyring.read_text())["versions"][0]
    text = keys("status").stdout
    assert re.search(r"│ 1 +│ +│ retired +│ [-0-9: ]+│ 0 +│", text), text
    assert re.search(r"│ 2 +│ yes +│ yes +│ [-0-9: ]+│ 3 +│", text), text
    assert "provider: local" in text and key_id in text
    again = keys.json("rotate", "--rewrap-only")
    assert again["added_version"] is None
    assert (again["version"], again["rewrapped"], again["unchanged"]) == (2, 0, 3)


def test_retire_refuses_the_current_and_unknown_versions(settings: Settings) -> None:
    keys = Keys(settings)
    assert "is current; rotate first" in error(keys("retire", "1", code=2))
    assert "has no version 4" in error(keys("retire", "4", code=2))
    keys("retire", "0", code=2)  # usage error: VERSION must be ≥ 1


def test_env_keys_are_rotated_outside_then_rewrapped(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = (base64.b64encode(os.urandom(32)).decode() for _ in range(2))
    monkeypatch.setenv(VAR, one)
    settings = settings.model_copy(update={"keys": KeySettings(provider="env", env_var=VAR)})
    keys = Keys(settings, **{VAR: one})
    keys.seed(2)
    key_id = f"env:{VAR}"
    monkeypatch.setenv(VAR, f"1:{one},2:{two}")
    keys.env[VAR] = f"1:{one},2:{two}"
    result = keys.json("rotate")
    assert result["added_version"] is None and "managed outside search2o" in result["note"]
    assert (result["version"], result["rewrapped"]) == (2, 2)
    text = keys("retire", "1").stdout
    assert "no data key uses version 1" in text and "remove that version there now" in text
    monkeypatch.setenv(VAR, f"2:{two}")
    assert keys.in_use() == {(key_id, 2): 2}


def test_rotate_and_retire_through_a_customer_key_service(
    settings: Settings, key_service: tuple[KeyService, str]
) -> None:
    service, url = key_service
    http = KeySettings(provider="http", url=url, secret=SECRET)  # type: ignore[arg-type]
    keys = Keys(settings.model_copy(update={"keys": http}))
    keys.seed(2)
    assert keys.json("status")["key_id"] == "customer-kek"
    assert "still wraps 2 data keys" in error(keys("retire", "1", code=1))
    assert "re-wrapped 2 data keys to version 2" in keys("rotate").stdout
    assert "retired version 1 of KEK customer-kek" in keys("retire", "1").stdout
    assert keys.in_use() == {("customer-kek", 2): 2}
    assert service.retired == {1} and service.refused == 0


def test_keys_of_another_provider_refuse_the_start(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = base64.b64encode(os.urandom(32)).decode()
    monkeypatch.setenv(VAR, key)
    env_keys = Keys(settings.model_copy(update={"keys": KeySettings(provider="env", env_var=VAR)}))
    env_keys.seed(1)
    # The default local keyring, which never wrapped these keys (without the env provider's
    # variable, which would be an unknown setting for it).
    local = Keys(settings, **{VAR: None})
    for command in ("status", "rotate"):
        failed = error(local(command, code=1))
        assert f"the database holds data keys wrapped by key env:{VAR}" in failed
        assert "restore it from backup" in failed
    assert not (settings.data_dir / "keyring.json").exists()  # none was created
    assert env_keys.json("status")["versions"]  # the right provider still works


def test_a_sources_sealed_credentials_are_rewrapped_and_open_after_the_retirement(
    settings: Settings, tmp_path: Any
) -> None:
    from search2o.connectors.wiring import sources_of
    from tests.connectors.doubles import FakeConnector

    keys = Keys(settings)
    keys.seed(1)
    with Runtime(settings) as runtime:
        sources = sources_of(runtime, {"fake": FakeConnector})
        sources.add("wiki", "fake", {"space": "s"}, {"token": "t0p-s3cret"})
        sources.add("open", "fake", {"space": "s"})  # no credentials: no data key
    status = keys.json("status")
    key_id = status["key_id"]
    assert [v["data_keys"] for v in status["versions"]] == [2]  # the conversation, the source
    rotated = keys("rotate").stdout
    assert "re-wrapped 2 data keys to version 2" in rotated
    assert "retired version 1" in keys("retire", "1").stdout
    assert keys.in_use() == {(key_id, 2): 2}
    with Runtime(settings) as runtime:
        sources = sources_of(runtime, {"fake": FakeConnector})
        from search2o.storage.models import Source

        with runtime.database.session() as session:
            row = session.query(Source).filter_by(name="wiki").one()
            assert sources.open_credentials(row) == {"token": "t0p-s3cret"}
            assert session.query(Source).filter_by(name="open").one().kek_id is None
