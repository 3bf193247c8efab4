"""The built-in offline chat model: deterministic, extractive, no LLM endpoint needed.

What it does, per user message:

1. **Decide.** Greetings, thanks, acknowledgements, goodbyes and questions about itself are
   conversation: it answers directly, without tools. Everything else searches (the bias the
   Query Engine asks for: on the edge between chit-chat and a question, search).
2. **Write the query.** An elliptical follow-up ("and how many of them can roll over?",
   "what about serving on a board?", "and more?") — one that opens with a connective, refers back
   with a pronoun, or has no content word — gets the content words of the previous
   self-contained query appended, so the query stands alone. Other messages are their own query.
3. **Answer.** From the passages the tools returned (and the sources sent with the message, such
   as a page's text: it answers from those first, and searches only when they hold no answer) it
   quotes the most relevant sentences
   (:class:`~search2o.providers.sentences.SentenceScorer`), each followed by its citation
   number. When no sentence scores ``chat.not_found_score`` or more (cosine similarity to the
   query plus the keyword share) it says it could not find the answer and cites nothing.

Limits: it never paraphrases, combines facts across sentences into new prose, does arithmetic
or follows instructions in the message; it resolves references only through the previous
queries' words. Plug in a real model for those (``docs/query-engine.md``).
"""

from __future__ import annotations

import asyncio
import re
import unicodedata
from collections.abc import AsyncIterator

from search2o.config import ChatSettings, ModelProfile
from search2o.providers.chat import (
    ChatEvent,
    ChatMessage,
    Passage,
    TextDelta,
    ToolCall,
    ToolSpec,
)
from search2o.providers.embeddings import Embedder
from search2o.providers.sentences import SentenceScorer, content_stems

__all__ = [
    "NOT_FOUND",
    "BuiltinChatModel",
    "is_small_talk",
    "self_contained_query",
]

NOT_FOUND = "I could not find an answer to that in the knowledge base."
NO_DOCUMENTS = (
    "There are no documents I can search yet. Add some (`search2o ingest PATH`, or upload them) "
    "and ask again."
)

_NORMALISE = re.compile(r"[^a-z' ]+")
# Whole-message small talk: every phrase of the message must be one of these.
_SMALL_TALK: dict[str, tuple[str, ...]] = {
    "greeting": (
        r"(hi|hello|hey|hiya|howdy|yo|greetings|good (morning|afternoon|evening|day))"
        r"( there| all| everyone| team| search2o)?",
    ),
    "thanks": (
        r"((ok|okay|great|perfect|awesome|cool|nice|wonderful|brilliant) )?"
        r"(thanks|thank you|thx|ty|cheers|many thanks)( (so|very) much| a lot| a ton| again)?"
        r"( for (that|the help|your help|this))?",
    ),
    "ack": (
        r"(ok|okay|k|cool|great|nice|perfect|awesome|got it|understood|sounds good|makes sense|"
        r"i see|alright|all right|good|excellent|wow|interesting|that helps|that's helpful|"
        r"very helpful|helpful|lol|haha|hah|yes|yeah|yep|no|nope|sure|fine|oh|ah|hmm|right)",
    ),
    "preface": (
        r"(quick question|a quick question|i have a question|question|can i ask you something|"
        r"can you help me|can you help|i need help)",
    ),
    "goodbye": (r"(bye|goodbye|bye bye|see you|see ya|later|good night|have a (good|nice) day)",),
    "wellbeing": (r"(how are you|how are you doing|how's it going|how is it going|what's up)",),
    "identity": (
        r"(who are you|what are you|what can you do|what do you do|help|what can i ask( you)?)",
    ),
}
_ADDRESSEE = re.compile(r"(everyone|everybody|all|team|folks|there|friend|search2o|bot)")
_PATTERNS = {kind: re.compile("|".join(p)) for kind, p in _SMALL_TALK.items()}
_REPLIES = {
    "greeting": "Hello! Ask me anything about your documents and I will answer from them, "
    "with sources.",
    "thanks": "You're welcome! Ask me anything else.",
    "ack": "Glad that helps. Anything else?",
    "preface": "Sure, what would you like to know?",
    "empty": "What would you like to know? Ask me about anything in your documents.",
    "goodbye": "Goodbye!",
    "wellbeing": "I'm doing well, thank you. What would you like to know?",
    "identity": "I'm search2o's built-in assistant. I answer questions from your knowledge base "
    "by quoting the passages that answer them, with their sources, and I say so when I cannot "
    "find an answer.",
}

_CONNECTIVE = re.compile(
    r"^(and|also|but|so|then|or|plus|ok so|okay so|what about|how about|what if|same for|"
    r"and what about|and how about|and for|and if)\b\s*,?\s*"
)
_ANAPHORA = frozenset(
    "it its they them their theirs those these that this one ones he she him her his".split()  # noqa: SIM905
)
_QUESTION_WORDS = frozenset(
    "how many much what which who when where why does do is are can".split()  # noqa: SIM905
)
_SUBJECT_WORDS = 8
_MAX_QUERY_CHARS = 1000
# Score margins below the best sentence (score = cosine + keyword share; see sentences.py),
# set on the handbook evaluation set (bench/qa_eval.py).
_MARGIN = 0.1
_NEIGHBOUR_MARGIN = 0.3


def small_talk_kind(message: str) -> str | None:
    """Return the kind of small talk ``message`` is (``greeting``, ``thanks``, ...), else ``None``.

    The whole message must be small talk: every phrase (split at punctuation) matches a pattern;
    "thanks, and how many can roll over?" is a question.
    """
    text = unicodedata.normalize("NFKC", message).lower().replace("\u2019", "'")
    if not any(c.isalnum() for c in text):  # "?", "👍", "..."
        return "ack" if text.strip() and not set(text.strip()) <= set("?.!") else "empty"
    phrases = [p.strip() for p in re.split(r"[,.!?;:]+", text)]
    phrases = [_NORMALISE.sub("", p).strip() for p in phrases if p.strip()]
    kinds: list[str] = []
    for phrase in phrases:
        if _ADDRESSEE.fullmatch(phrase):  # "good morning, everyone": the name adds nothing
            continue
        kind = next((k for k, rx in _PATTERNS.items() if rx.fullmatch(phrase)), None)
        if kind is None:
            return None
        kinds.append(kind)
    # "hi, thanks" is thanks: the last phrase wins, it is what the user leaves off with.
    return kinds[-1] if kinds else None


def is_small_talk(message: str) -> bool:
    """Return whether ``message`` is conversation only (see :func:`small_talk_kind`)."""
    return small_talk_kind(message) is not None


def _is_elliptical(message: str) -> bool:
    text = message.lower().strip()
    if _CONNECTIVE.match(text):
        return True
    words = re.findall(r"[a-z']+", text)
    content = content_stems(
        " ".join(w for w in words if w not in _QUESTION_WORDS and w not in _ANAPHORA)
    )
    # Any pronoun makes a follow-up, even in a long question: carrying the subject into
    # "what is Grafana and is it for monitoring?" costs little (its own words still match),
    # while limiting the rule to short messages lowered MTRAG-UN clarification recall@5 from
    # 0.817 to 0.769 (bench/qa_eval.py).
    if any(w in _ANAPHORA for w in words):
        return True
    return not content


def _subject(query: str) -> list[str]:
    words = re.findall(r"[A-Za-z0-9$%'-]+", query)
    seen: dict[str, str] = {}
    for word in words:
        low = word.lower()
        if low in _QUESTION_WORDS or low in _ANAPHORA or not content_stems(low):
            continue
        seen.setdefault(low, word)
    return list(seen.values())[:_SUBJECT_WORDS]


def self_contained_query(user_messages: list[str], unanswered: frozenset[int] = frozenset()) -> str:
    """Return a search query for the last of ``user_messages`` that stands on its own.

    Earlier messages are resolved first, in order, so a chain of follow-ups keeps the subject of
    the first question. Small-talk messages, and those whose index is in ``unanswered`` (their
    answer was "not found": a dead end is no subject), are skipped. An elliptical message (see
    the module docstring) gets the subject words of the previous query that are not already in
    it. Text is NFKC-normalised (full-width letters become ASCII) and the query is cut at a word
    before 1,000 characters.

    Raises:
        ValueError: ``user_messages`` is empty.

    """
    if not user_messages:
        raise ValueError("user_messages must not be empty")
    previous: str | None = None
    for index, message in enumerate(user_messages[:-1]):
        if index not in unanswered and not is_small_talk(message):
            previous = _resolve(message, previous)
    query = _resolve(user_messages[-1], previous)
    if len(query) > _MAX_QUERY_CHARS:
        query = query[:_MAX_QUERY_CHARS].rsplit(" ", 1)[0]
    return query


def _resolve(message: str, previous: str | None) -> str:
    text = " ".join(unicodedata.normalize("NFKC", message).split())
    if previous is None or not _is_elliptical(text):
        return text
    own = content_stems(text)
    carried = [w for w in _subject(previous) if not content_stems(w) <= own]
    stripped = _CONNECTIVE.sub("", text, count=1) if _CONNECTIVE.match(text.lower()) else text
    return " ".join([stripped, *carried]).strip()


def _words(text: str) -> list[ChatEvent]:
    """``text`` as stream pieces: each word with the space before it."""
    return [TextDelta(piece) for piece in re.findall(r"\s*\S+", text)]


def short_title(first_message: str) -> str:
    """Return ``first_message`` whitespace-collapsed, cut at a word before 80 characters."""
    text = " ".join(first_message.split())
    if len(text) <= 80:
        return text
    return text[:79].rsplit(" ", 1)[0].rstrip(",;:") + "…"


class BuiltinChatModel:
    """The offline extractive chat model described in the module docstring.

    Args:
        settings: ``not_found_similarity`` and ``answer_sentences`` are used.
        embedder: scores sentences (the same model the Knowledge Store uses).

    """

    model_id = "builtin/extractive-1"
    supports_tools = True
    supports_parallel_tools = True
    can_stream = True

    def __init__(self, settings: ChatSettings, embedder: Embedder) -> None:
        self._threshold = settings.not_found_score
        self._sentences = settings.answer_sentences
        self._scorer = SentenceScorer(embedder)

    async def write_title(self, first_message: str) -> str:
        """Return the first message, whitespace collapsed, cut at a word before 80 characters."""
        return short_title(first_message)

    async def stream(
        self, messages: list[ChatMessage], tools: list[ToolSpec]
    ) -> AsyncIterator[ChatEvent]:
        """Decide and call ``search_knowledge``, or answer; see :class:`ChatModel`.

        The decision and the sentence scoring run in a worker thread (they embed text), so the
        event loop stays free; the answer then streams word by word.

        Raises:
            ValueError: ``messages`` has no user message.
            ProviderError: the embedder failed while scoring sentences.

        """
        events = await asyncio.to_thread(self.respond, messages, tools)
        for event in events:
            yield event

    def respond(self, messages: list[ChatMessage], tools: list[ToolSpec]) -> list[ChatEvent]:
        """Return the events :meth:`stream` yields, computed at once (blocking; embeds text).

        Raises:
            ValueError: ``messages`` has no user message.
            ProviderError: the embedder failed while scoring sentences.

        """
        users = [m.content for m in messages if m.role == "user"]
        if not users:
            raise ValueError("messages must contain a user message")
        unanswered = _unanswered(messages)
        if messages[-1].role == "tool":
            return _words(self._answer(messages, users[-1]))
        given = messages[-1].passages if messages[-1].role == "user" else []
        names = {tool.name for tool in tools}
        if given:  # sources sent with the question: answer from them, else search as usual
            answer = self._quote(users[-1], users[-1], given)
            if answer != NOT_FOUND or not names & {"search_knowledge", "web_search"}:
                return _words(answer)
        kind = small_talk_kind(users[-1])
        if kind is not None:
            return _words(_REPLIES[kind])
        if "search_knowledge" not in names and "web_search" not in names:
            return _words(NO_DOCUMENTS)
        query = self_contained_query(users, unanswered)
        wanted = [n for n in ("search_knowledge", "web_search") if n in names]
        return [
            ToolCall(id=f"call_{index + 1}", name=name, arguments={"query": query})
            for index, name in enumerate(wanted)
        ]

    def _answer(self, messages: list[ChatMessage], question: str) -> str:
        calls = [call for m in messages if m.role == "assistant" for call in m.tool_calls]
        query = str(calls[-1].arguments.get("query", question)) if calls else question
        results = [m for m in messages if m.role == "tool"]
        given = [m for m in messages if m.role == "user"][-1].passages
        passages = given + [
            p for m in results if not m.content.startswith("error:") for p in m.passages
        ]
        failures = [
            m.content.removeprefix("error:").strip()
            for m in results
            if m.content.startswith("error:")
        ]
        if failures and len(failures) == len(results):
            return f"I could not search the knowledge base: {failures[0]}"
        return self._quote(query, question, passages)

    def _quote(self, query: str, question: str, passages: list[Passage]) -> str:
        """Quote the sentences of ``passages`` that answer, each run followed by ``[n]``."""
        scored = self._scorer.score(query, question, list(enumerate(p.text for p in passages)))
        if not scored or scored[0].score < self._threshold:
            return NOT_FOUND
        best = scored[0]
        chosen = [s for s in scored[: self._sentences] if s.score >= best.score - _MARGIN]
        if len(chosen) < self._sentences:
            # The best sentence's neighbour often carries its context or the other half of a
            # rule ("less than 1 year: ...; over 1 year: ..."): add the better one when close.
            neighbours = [
                s
                for s in scored
                if s.passage == best.passage
                and abs(s.position - best.position) == 1
                and s.score >= best.score - _NEIGHBOUR_MARGIN
                and s not in chosen
            ]
            chosen.extend(neighbours[:1])
        # Document order: by source (citation number), then passage, then place in the passage.
        chosen.sort(key=lambda s: (passages[s.passage].number, s.passage, s.position))
        # One marker after each run of sentences from the same source.
        parts = []
        for index, sentence in enumerate(chosen):
            number = passages[sentence.passage].number
            following = chosen[index + 1] if index + 1 < len(chosen) else None
            last = following is None or passages[following.passage].number != number
            parts.append(f"{sentence.text} [{number}]" if last else sentence.text)
        return " ".join(parts)


def _unanswered(messages: list[ChatMessage]) -> frozenset[int]:
    """Indexes (among user messages) of the turns whose answer was "not found"."""
    indexes = set()
    user_index = -1
    for message in messages:
        if message.role == "user":
            user_index += 1
        elif message.role == "assistant" and message.content == NOT_FOUND:
            indexes.add(user_index)
    return frozenset(indexes)


def build(profile: ModelProfile, settings: ChatSettings, embedder: Embedder) -> BuiltinChatModel:
    """Entry point factory of the ``builtin`` chat model (the profile needs no settings)."""
    return BuiltinChatModel(settings, embedder)
