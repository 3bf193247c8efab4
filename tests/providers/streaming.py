"""Reading a :class:`~search2o.providers.chat.ChatModel`'s async API from synchronous tests."""

from __future__ import annotations

from typing import Any

from search2o import aio
from search2o.providers.chat import ChatEvent, ChatMessage, ToolSpec


def streamed(model: Any, messages: list[ChatMessage], tools: list[ToolSpec]) -> list[ChatEvent]:
    """Every event of ``model.stream(messages, tools)``, in order."""
    return list(aio.iterate(model.stream(messages, tools)))


def title_of(model: Any, first_message: str) -> str:
    """``model.write_title(first_message)``, awaited."""
    return aio.run(model.write_title(first_message))
