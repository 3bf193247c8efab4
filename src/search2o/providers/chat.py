"""Chat models: the :class:`ChatModel` protocol, the messages it reads and the events it streams.

The shapes follow the OpenAI Chat Completions format with tools (``messages`` with roles
``system``/``user``/``assistant``/``tool``, ``tool_calls`` with JSON arguments, one ``tool``
message per call answering its ``tool_call_id``), so an OpenAI-compatible endpoint maps onto
them one to one. Models are found by name in the ``search2o.chat_models`` entry point group;
``builtin`` is the offline extractive model of :mod:`search2o.providers.builtin_chat`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from search2o.plugins import check_members, load_factory
from search2o.providers.embeddings import Embedder
from search2o.query.settings import ChatSettings

__all__ = [
    "ChatEvent",
    "ChatMessage",
    "ChatModel",
    "ChatModels",
    "Passage",
    "TextDelta",
    "ToolCall",
    "ToolSpec",
    "build_chat_model",
    "render_passages",
]

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model may call: ``parameters`` is a JSON Schema object (OpenAI ``function``)."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ToolCall:
    """The model's request to run ``name`` with ``arguments`` (parsed JSON object)."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class TextDelta:
    """A piece of the answer's text, in stream order."""

    text: str


@dataclass(frozen=True)
class Decision:
    """Why the model answered as it did, for the retrieval trace (``decision_detail``).

    Only models that can say (the built-in one) emit it, before the answer's text; ``detail``
    is a JSON-able dict, e.g. ``{"answer": "not_found", "reason": ..., "best_score": 0.41}``.
    """

    detail: dict[str, Any]


ChatEvent = TextDelta | ToolCall | Decision


@dataclass(frozen=True)
class Passage:
    """One numbered source a tool returned, as the model sees it.

    ``number`` is the citation number the answer uses (``[number]``); ``similarity`` is the
    cosine similarity of the query and the chunk (``None`` when only keywords matched or the
    source is a web page); ``headings`` is the heading path of the chunk's section in its
    document, outermost first (empty for a page or a chunk before the first heading).
    """

    number: int
    title: str
    location: str
    text: str
    similarity: float | None = None
    headings: tuple[str, ...] = ()


def render_passages(passages: list[Passage]) -> str:
    """Render passages for the model: ``[n] title — location`` then the text; "No results."."""
    if not passages:
        return "No results."
    return "\n\n".join(f"[{p.number}] {p.title} — {p.location}\n{p.text}" for p in passages)


@dataclass
class ChatMessage:
    """One message of a model call.

    ``tool_calls`` is set on an assistant message that called tools; a ``tool`` message answers
    one call (``tool_call_id``) with ``content`` (what a remote model reads) and ``passages``
    (the same sources, structured, for models that read them directly). A ``user`` message may
    carry ``passages`` too: sources the caller supplies with the question (an agent's
    ``llm.passages``); a remote model reads them rendered after the content
    (:func:`render_passages`), the built-in model answers from them.
    """

    role: Role
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    passages: list[Passage] = field(default_factory=list)


@runtime_checkable
class ChatModel(Protocol):
    """A chat model that streams an answer or asks for tool calls.

    ``stream(messages, tools)`` is an async iterator (an ``async def`` generator) of
    :class:`TextDelta` pieces of a direct answer, or of :class:`ToolCall` requests (several
    allowed) before it stops; the caller runs the tools, appends the assistant's call message
    and one ``tool`` message per call, and calls ``stream`` again with ``tools=[]`` for the
    grounded answer. Errors are :class:`~search2o.errors.ProviderError`. A consumer that stops
    early cancels the task iterating the stream (see :mod:`search2o.aio`), so an implementation
    must release its connection in ``finally`` / ``async with``.

    Capability flags: ``supports_tools`` (tool definitions are honoured; without it the Query
    Engine offers none and the model answers from history), ``supports_parallel_tools``
    (several calls in one step), ``can_stream`` (deltas arrive as generated rather than in one
    piece). The context size is the profile's ``context_tokens``
    (:class:`~search2o.query.settings.ModelProfile`).

    A model may also define ``async def summarize(previous, messages, max_tokens) -> str`` to
    write running summaries (see :mod:`search2o.query.summary`).
    """

    model_id: str
    supports_tools: bool
    supports_parallel_tools: bool
    can_stream: bool

    def stream(
        self, messages: list[ChatMessage], tools: list[ToolSpec]
    ) -> AsyncIterator[ChatEvent]:
        """Yield the model's events for this call (an async generator)."""
        ...

    async def write_title(self, first_message: str) -> str:
        """Return a short title (at most 80 characters) for a conversation opened by this text."""
        ...


class ChatModels:
    """The chat models of one process, one per profile (and temperature), built on first use.

    The Query Engine and the Agent Engine share it, so a profile's model (its HTTP client, or
    the built-in model's state) exists once per process.

    Args:
        settings: the ``chat`` settings (its profiles).
        embedder: handed to factories (the built-in model scores with it).
        default: a model to use for the active profile instead of building one.

    """

    def __init__(
        self, settings: ChatSettings, embedder: Embedder, default: ChatModel | None = None
    ) -> None:
        self._settings = settings
        self._embedder = embedder
        self._models: dict[str, ChatModel] = {}
        if default is not None:
            self._models[settings.profile] = default

    def get(self, profile: str | None = None, temperature: float | None = None) -> ChatModel:
        """Return the model of ``profile`` (``None``: ``chat.profile``), built once.

        With ``temperature``, a model of that profile with this temperature in its place.

        Raises:
            ConfigError: the profile's provider is unknown or its settings are incomplete.

        """
        chat = self._settings
        name = profile or chat.profile
        key = name if temperature is None else f"{name}@{temperature:g}"
        if key not in self._models:
            profiles = dict(chat.profiles)
            if temperature is not None:
                profiles[name] = profiles[name].model_copy(update={"temperature": temperature})
            settings = chat.model_copy(update={"profile": name, "profiles": profiles})
            self._models[key] = build_chat_model(settings, self._embedder)
        return self._models[key]

    async def aclose(self) -> None:
        """Close what the models built so far opened on the running event loop (at its end).

        A model with an ``aclose()`` coroutine (the OpenAI-compatible one: its HTTP client) is
        asked to close; the others hold nothing tied to a loop.
        """
        for model in list(self._models.values()):
            close = getattr(model, "aclose", None)
            if close is not None:
                await close()


def build_chat_model(settings: ChatSettings, embedder: Embedder) -> ChatModel:
    """Build the model of the active profile (``chat.profile``).

    The profile's ``provider`` names an entry point of the ``search2o.chat_models`` group; each
    is a factory ``(profile, settings, embedder) -> ChatModel``.

    Raises:
        ConfigError: no chat model provider of that name is installed, or the profile is
            incomplete for its provider.

    """
    profile = settings.active_profile
    setting = f"chat.profiles.{settings.profile}.provider"
    factory = load_factory("search2o.chat_models", profile.provider, setting)
    model: ChatModel = factory(profile, settings, embedder)
    check_members(model, ("model_id", "stream", "write_title"), f"chat model {profile.provider!r}")
    return model
