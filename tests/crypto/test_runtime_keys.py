"""The runtime refuses a key provider that cannot open the stored conversations."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from search2o.config import Settings
from search2o.crypto.settings import KeySettings
from search2o.errors import ConfigError
from search2o.runtime import Runtime
from tests.query.doubles import ScriptedChatModel, answering


def _with_conversation(settings: Settings) -> str:
    with Runtime(settings, chat_model=ScriptedChatModel(answering("Noted."))) as runtime:
        events = runtime.turns.ask(runtime.local_principal(), "keep this safe")
        return str(events[0].data["conversation_id"])


def test_a_missing_or_mistyped_keyring_is_refused_not_replaced(
    settings: Settings, tmp_path: Path
) -> None:
    conversation_id = _with_conversation(settings)
    keyring = settings.data_dir / "keyring.json"
    backup = tmp_path / "backup.json"
    shutil.copy2(keyring, backup)

    keyring.unlink()
    with pytest.raises(ConfigError, match="did not exist; none was created") as info:
        Runtime(settings)
    assert "the database holds data keys wrapped by key local-" in str(info.value)
    assert not keyring.exists()

    typo = settings.model_copy(
        update={"keys": KeySettings(keyring_path=tmp_path / "nodir" / "keyrnig.json")}
    )
    with pytest.raises(ConfigError, match="restore it from backup"):
        Runtime(typo)
    assert not (tmp_path / "nodir" / "keyrnig.json").exists()

    shutil.copy2(backup, keyring)  # the right keyring back: everything opens again
    with Runtime(settings) as runtime:
        messages = runtime.conversations.messages(runtime.local_principal(), conversation_id)
        assert messages[0].text == "keep this safe"


def test_a_fresh_database_accepts_a_fresh_keyring(settings: Settings) -> None:
    with Runtime(settings) as runtime:
        assert runtime.vault.versions_in_use() == {}
    assert (settings.data_dir / "keyring.json").exists()
