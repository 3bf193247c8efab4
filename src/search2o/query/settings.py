"""The Query Engine's sections: ``chat`` (model profiles, web search) and ``retention``."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)

from search2o.settings_base import Endpoint

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "ChatSettings",
    "ModelProfile",
    "RetentionSettings",
    "WebSearchSettings",
]


DEFAULT_SYSTEM_PROMPT = (
    "You are search2o, an assistant that answers questions from the company's knowledge base. "
    "For any question that the knowledge base might answer, call search_knowledge with a "
    "self-contained query written from the whole conversation (resolve 'it', 'them', 'and "
    "what about ...'). Answer only from what the tools returned and cite each claim with the "
    "source number in brackets, like [1], right after the claim it supports. Never combine "
    "sentences from different sections into one claim: each passage's heading says what it "
    "is about (a '100% of the premium' under Dental Insurance is not about medical "
    "insurance). Every condition of the question (a role, a place, a date, an amount, 'for "
    "part-timers') must be covered by the sources; if one is not, say plainly that the "
    'sources do not say, naming it ("The handbook does not say how sabbaticals work for '
    'managers."), rather than answering the broader question. If the sources do not contain '
    "the answer at all, say plainly that you could not find it; never invent facts. "
    "Greetings, thanks and small talk need no search."
)


class WebSearchSettings(BaseModel):
    """The ``web_search`` tool: off unless an admin names a provider.

    ``searxng`` queries a self-hosted SearXNG instance's JSON API (``/search?format=json``);
    other providers register under the ``search2o.web_search`` entry point group.
    """

    model_config = ConfigDict(extra="forbid")

    provider: str | None = Field(default=None, description="entry point in search2o.web_search")
    base_url: Endpoint = Field(default=None, description="e.g. http://searxng.internal:8080")
    k: int = Field(default=5, ge=1, le=20, description="results per web search")
    timeout_s: float = Field(default=10.0, gt=0)


class ModelProfile(BaseModel):
    """A named chat model: which provider serves it and how big its window is.

    ``provider`` names an entry point of ``search2o.chat_models``: ``builtin`` (the offline
    extractive model) or ``openai`` (any OpenAI-compatible Chat Completions endpoint: OpenAI,
    Azure OpenAI, vLLM, Ollama, llama.cpp server, LM Studio).
    """

    model_config = ConfigDict(extra="forbid")

    provider: str = Field(default="builtin", description="entry point in search2o.chat_models")
    model: str = Field(default="", description="model name at the endpoint, e.g. gpt-4o-mini")
    base_url: Endpoint = Field(default=None, description="e.g. http://localhost:11434/v1")
    api_key: SecretStr | None = None
    context_tokens: int = Field(default=8192, ge=1024, le=10_000_000)
    answer_reserve: int = Field(default=1024, ge=16, description="tokens kept for the answer")
    temperature: float | None = Field(default=None, ge=0, le=2)
    timeout_s: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=10, description="retries on 429/5xx, backoff")
    parallel_tool_calls: bool = Field(default=True, description="ask for several calls at once")
    tokenizer: str | None = Field(
        default=None,
        description="tokenizer.json as a path or `package:relative/path`; none = estimate",
    )

    @model_validator(mode="after")
    def _reserve_below_context(self) -> ModelProfile:
        if self.answer_reserve >= self.context_tokens // 2:
            raise ValueError("answer_reserve must be below half of context_tokens")
        return self


class ChatSettings(BaseModel):
    """The Query Engine's chat turns.

    ``not_found_score`` is the built-in model's relevance threshold: when no sentence of the
    retrieved chunks scores this much (cosine similarity to the query plus the keyword share,
    :mod:`search2o.providers.sentences`), it answers "not found". The value is calibrated on the
    handbook and MTRAG-UN evaluation sets (``bench/qa_eval.py``, ``docs/query-engine.md``).
    """

    model_config = ConfigDict(extra="forbid")

    profile: str = Field(default="default", description="the profile the Query Engine uses")
    profiles: dict[str, ModelProfile] = Field(
        default_factory=lambda: {"default": ModelProfile()},
        description="named chat models; `default` is the built-in offline model",
    )
    system_prompt: str = Field(default=DEFAULT_SYSTEM_PROMPT, min_length=1)
    max_message_chars: int = Field(default=8000, ge=1, le=200_000)
    max_feedback_comment_chars: int = Field(
        default=2000,
        ge=1,
        le=20_000,
        description="longest comment sent with a thumbs-down (PUT /v1/messages/{id}/rating)",
    )
    max_page_chars: int = Field(
        default=20_000,
        ge=1,
        le=200_000,
        description="longest page text sent with a question (POST /v1/chat `page.text`)",
    )
    history_messages: int = Field(
        default=20,
        ge=0,
        le=1000,
        description="with summaries off: the earlier messages read per turn (newest)",
    )
    summaries: bool = Field(
        default=True, description="fold turns that no longer fit the window into a summary"
    )
    summary_writer: Literal["model", "extractive"] = Field(
        default="model",
        description="model: the chat model writes summaries when it can; extractive: never",
    )
    summary_share: float = Field(
        default=0.25, gt=0, le=0.5, description="largest share of the window the summary takes"
    )
    search_k: int = Field(default=5, ge=1, le=50, description="chunks per search_knowledge call")
    max_tool_calls: int = Field(default=4, ge=1, le=16, description="tool calls run per turn")
    not_found_score: float = Field(default=0.55, ge=-1, le=2)
    answer_sentences: int = Field(default=3, ge=1, le=10, description="built-in model's limit")
    heartbeat_s: float = Field(default=10.0, gt=0, description="SSE comment on long waits")
    token_margin: float = Field(
        default=0.05, ge=0, le=0.5, description="share of the window kept free for miscounting"
    )
    context_share: float = Field(
        default=0.5, gt=0, le=1, description="share of the free window for retrieved passages"
    )
    long_message: Literal["error", "truncate"] = Field(
        default="error",
        description="a message larger than the window: refuse it, or cut it with a notice",
    )
    web_search: WebSearchSettings = Field(default_factory=WebSearchSettings)

    @field_validator("profiles")
    @classmethod
    def _keep_builtin_default(cls, profiles: dict[str, ModelProfile]) -> dict[str, ModelProfile]:
        """Merge the given profiles over the built-in ``default`` (which may be redefined).

        Defining one profile (``SEARCH2O_CHAT__PROFILES__FAST__PROVIDER=openai``) must not
        remove the profile every turn and agent uses unless told otherwise.
        """
        if "default" in profiles:
            return profiles
        return {"default": ModelProfile(), **profiles}

    @model_validator(mode="after")
    def _profile_exists(self) -> ChatSettings:
        if self.profile not in self.profiles:
            names = ", ".join(sorted(self.profiles)) or "none"
            raise ValueError(f"chat.profile {self.profile!r} is not a profile (defined: {names})")
        return self

    @property
    def active_profile(self) -> ModelProfile:
        """The profile named by :attr:`profile`."""
        return self.profiles[self.profile]


_RETENTION_DEFAULTS: dict[str, int | None] = {"free": 7, "paid": None}


class RetentionSettings(BaseModel):
    """How long conversations live after their last use, per plan.

    A conversation expires ``days[plan]`` days after its last use (the later of its last turn or
    run and its last read); ``None`` keeps it until deleted. Pinned conversations never expire.
    ``sweep_interval_s`` is how often the server's sweeper removes expired ones (0 = never; run
    ``search2o retention sweep`` instead).
    """

    model_config = ConfigDict(extra="forbid")

    days: dict[str, int | None] = Field(
        default_factory=lambda: dict(_RETENTION_DEFAULTS),
        description="plan (free, paid) -> days after last use; null = unlimited",
    )
    sweep_interval_s: float = Field(default=3600.0, ge=0)

    @field_validator("days")
    @classmethod
    def _known_plans(cls, days: dict[str, int | None]) -> dict[str, int | None]:
        """Keep only known plans; a plan left out keeps its default (free 7, paid unlimited)."""
        for plan, value in days.items():
            if plan not in _RETENTION_DEFAULTS:
                raise ValueError(
                    f"days has unknown plan {plan!r} (plans: free, paid); e.g. "
                    "SEARCH2O_RETENTION__DAYS__FREE=30 or days = {free = 30}"
                )
            if value is not None and value < 1:
                raise ValueError(f"days[{plan!r}] must be at least 1, or null for unlimited")
        return {**_RETENTION_DEFAULTS, **days}

    def days_for(self, plan: str) -> int | None:
        """Days a conversation of a user on ``plan`` lives after last use (unknown plan: free)."""
        if plan in self.days:
            return self.days[plan]
        return self.days.get("free")
