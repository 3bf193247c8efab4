"""The runtime takes the parts a caller gives it instead of building them."""

from __future__ import annotations

import pytest

from search2o.config import Settings
from search2o.runtime import Runtime
from tests.conftest import MemoEmbedder
from tests.query.doubles import ScriptedChatModel, answering


def test_overrides_are_the_parts_the_runtime_uses(
    settings: Settings, embedder: MemoEmbedder
) -> None:
    model = ScriptedChatModel(answering("Noted."))
    with Runtime(settings, embedder=embedder, chat_model=model) as runtime:
        assert runtime.embedder is embedder
        assert runtime.chat_model is model
        assert runtime.turns.model is model
        assert runtime.agent_runner.model(None) is model
        events = runtime.chat.run_sync(runtime.chat.prepare(runtime.local_principal(), "hi"))
        assert [e.kind for e in events][-1] == "done"
        assert model.calls


def test_an_unknown_override_is_refused(settings: Settings) -> None:
    with pytest.raises(TypeError, match="cannot take turns"):
        Runtime(settings, turns=object())
