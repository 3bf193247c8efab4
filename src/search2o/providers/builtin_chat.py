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
   (:class:`~search2o.providers.sentences.SentenceScorer`, each sentence read with its section's
   headings; sentences carrying the answer type the question asks for preferred, see
   :mod:`~search2o.providers.answer_types`), each run of one section followed by its citation
   number and preceded by its heading when the sentences do not name it; a yes/no question
   answered from under an "OK" / "Not OK" heading starts with the verdict. When no sentence
   scores ``chat.not_found_score`` or more (cosine similarity to the query plus the keyword
   share) it says it could not find the answer and cites nothing.
4. **Refuse an uncovered constraint.** A short follow-up ("and for managers?") must be covered
   by a sentence about the earlier subject; otherwise it says the sources do not say anything
   about the constraint, naming it (:func:`~search2o.providers.evidence.uncovered`).

What decided (quoted or refused, why, the scores) goes to the retrieval trace as
``decision_detail`` through a :class:`~search2o.providers.chat.Decision` event.

Limits: it never paraphrases, combines facts across sentences into new prose, does arithmetic
or follows instructions in the message; it resolves references only through the previous
queries' words. Plug in a real model for those (``docs/query-engine.md``).
"""

from __future__ import annotations

import asyncio
import re
import unicodedata
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from search2o.providers.answer_types import question_type, type_bonus
from search2o.providers.chat import (
    ChatEvent,
    ChatMessage,
    Decision,
    Passage,
    TextDelta,
    ToolCall,
    ToolSpec,
)
from search2o.providers.embeddings import Embedder
from search2o.providers.evidence import NOT_COVERED, Constraint, not_covered, render, uncovered
from search2o.providers.sentences import (
    ScoredSentence,
    SentenceScorer,
    content_stems,
)
from search2o.query.settings import ChatSettings, ModelProfile

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
# A repair: the user corrects or restates what they asked ("I meant for Mars?", "I'm asking for
# a phone number", "sorry, I want to ask about floods"); it keeps the earlier subject. Repairs
# are how conversation fixes misunderstanding (Schegloff, Jefferson & Sacks, "The Preference for
# Self-Correction in the Organization of Repair in Conversation", Language 53(2), 1977).
_REPAIR = re.compile(
    r"^(?:i meant|i mean|what i meant|i'm asking|i am asking|i asked|i was asking|"
    r"i was talking about|i'm talking about|sorry|no|nope|wait)\b|^what\?"
)
_ANAPHORA = frozenset(
    "it its they them their theirs those these that this one ones he she him her his".split()  # noqa: SIM905
)
# Indefinite pronouns: no constraint ("and someone mid-level?" constrains by "mid-level").
_INDEFINITE = frozenset(
    "someone somebody anyone anybody everyone everybody something anything everything".split()  # noqa: SIM905
)
# Light verbs carry little meaning of their own (Jespersen, "A Modern English Grammar", 1942):
# "vacation days get" names the subject by "vacation days"; they never constrain a follow-up.
_LIGHT_VERBS = frozenset(
    "get gets got getting give gives gave given take takes took taken make makes made".split()  # noqa: SIM905
    + "do does did done have has had go goes went put puts".split()  # noqa: SIM905
)
_QUESTION_WORDS = frozenset(
    "how many much what which who when where why does do is are can".split()  # noqa: SIM905
)
_SUBJECT_WORDS = 8
# A question for what or who a named thing is ("And who was Hubble?" after "Who is James Webb
# that the telescope is named after?"): it names its own subject, so it is answered as a new
# question rather than as a constraint on the earlier subject (sentences about Hubble are not
# about the Webb telescope, and would be refused).
_IDENTITY = re.compile(r"^(?:who|what)\s+(?:is|was|are|were)\s+(?:[A-Z][\w.'-]*\s*)+[?.!]*$")
# At most this many content words of its own make a short follow-up (a constraint, a bridging
# definite description).
_SHORT_FOLLOW_UP = 3
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
    text = message.lower().strip().replace("\u2019", "'")
    if _CONNECTIVE.match(text) or _REPAIR.match(text):
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
    # A short question with a definite description refers back too: "How long is the break?"
    # after the sabbatical policy, "the facilities" after Greek theatre (bridging reference:
    # Clark, "Bridging", TINLAP 1975). A longer one usually stands alone: about half of
    # definite descriptions are new to the discourse (Poesio & Vieira, Computational
    # Linguistics 24(2), 1998), and "Does the company pay for pet insurance?" must not carry
    # the life insurance asked about before, nor pass it on to the next question.
    if "the" in words and len(content) <= _SHORT_FOLLOW_UP:
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


def follow_up_constraint(
    user_messages: list[str], unanswered: frozenset[int] = frozenset()
) -> Constraint | None:
    """Return the constraint the last of ``user_messages`` adds, if it is a short follow-up.

    A short follow-up opens with a connective ("and for managers?", "what about part-timers?")
    and has at most three content words of its own; the subject is that of the query the earlier
    messages resolve to (see :func:`self_contained_query`). ``None`` for any other message, and
    for one that asks what or who a named thing is ("and who was Hubble?").
    """
    text = " ".join(unicodedata.normalize("NFKC", user_messages[-1]).split())
    connective = _CONNECTIVE.match(text.lower())
    if len(user_messages) < 2 or connective is None:
        return None
    rest = text[connective.end() :]
    if _IDENTITY.match(rest):  # "and who was Hubble?": a new subject, not a constraint
        return None
    # The word after "how", "what", "who" or "which" is what is asked, not a restriction of
    # it: "how long" (a type), "what happens when I ingest it again", "who approves".
    asked = {m.lower() for m in re.findall(r"(?i)\b(?:how|what|who|which)\s+(\w+)", rest)}
    words = tuple(
        w
        for w in _subject(rest)
        if w.lower() not in _INDEFINITE | _LIGHT_VERBS and w.lower() not in asked
    )
    if not words or len(words) > _SHORT_FOLLOW_UP:
        return None
    earlier = [m for i, m in enumerate(user_messages[:-1]) if i not in unanswered]
    earlier = [m for m in earlier if not is_small_talk(m)]
    if not earlier:
        return None
    subject = self_contained_query(earlier)
    own = content_stems(" ".join(words))
    kept = tuple(
        w
        for w in _subject(subject)
        if not content_stems(w) <= own and w.lower() not in _LIGHT_VERBS
    )
    return Constraint(words, kept) if kept else None


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
            answer, detail = self._answer(messages, users, unanswered)
            return [Decision(detail), *_words(answer)]
        given = messages[-1].passages if messages[-1].role == "user" else []
        names = {tool.name for tool in tools}
        if given:  # sources sent with the question: answer from them, else search as usual
            answer, detail = self._quote(users[-1], users[-1], given)
            if answer != NOT_FOUND or not names & {"search_knowledge", "web_search"}:
                return [Decision(detail), *_words(answer)]
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

    def _answer(
        self, messages: list[ChatMessage], users: list[str], unanswered: frozenset[int]
    ) -> tuple[str, dict[str, Any]]:
        question = users[-1]
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
            detail = {"answer": "error", "reason": "every search failed"}
            return f"I could not search the knowledge base: {failures[0]}", detail
        constraint = follow_up_constraint(users, unanswered)
        if constraint is not None:
            answers = [
                m.content
                for m in messages
                if m.role == "assistant" and m.content and not _is_refusal(m.content)
            ]
            constraint = replace(constraint, earlier_answer=answers[-1] if answers else "")
        return self._quote(query, question, passages, constraint)

    def _quote(
        self,
        query: str,
        question: str,
        passages: list[Passage],
        constraint: Constraint | None = None,
    ) -> tuple[str, dict[str, Any]]:
        """Quote the sentences of ``passages`` that answer; return the text and what decided.

        Each run of sentences of one section is followed by its ``[n]`` and, when its sentences
        do not name their section's heading, preceded by it ("Medical Insurance: The company
        pays 75% …"). The returned detail (recorded in the retrieval trace as
        ``decision_detail``) holds ``answer`` (``quoted`` or ``not_found``), the ``reason`` of a
        refusal, the ``best_score`` and ``threshold``, the ``answer_type`` and, for a refused
        follow-up, the ``uncovered`` constraint words.
        """
        contexts = {i: ", ".join(p.headings) for i, p in enumerate(passages) if p.headings}
        scored = self._scorer.score(
            query, question, list(enumerate(p.text for p in passages)), contexts
        )
        kind = question_type(question)
        if kind is not None:  # prefer sentences that carry the asked type (answer_types.py)
            scored = sorted(
                (replace(s, score=s.score + type_bonus(kind, s.text)) for s in scored),
                key=lambda s: -s.score,
            )
        detail: dict[str, Any] = {
            "threshold": self._threshold,
            "best_score": round(scored[0].score, 3) if scored else None,
            "best_cosine": round(scored[0].cosine, 3) if scored else None,
            "best_share": round(scored[0].share, 3) if scored else None,
            "second_score": round(scored[1].score, 3) if len(scored) > 1 else None,
            "top_similarity": max((p.similarity or 0.0 for p in passages), default=None),
            "answer_type": kind,
        }
        if not scored or scored[0].score < self._threshold:
            reason = "no sentence scored the threshold" if scored else "no passages"
            return NOT_FOUND, {**detail, "answer": "not_found", "reason": reason}
        chosen = self._choose(scored)
        if constraint is not None:
            missing = uncovered(constraint, chosen, passages, self._scorer)
            if missing:
                detail.update(
                    answer="not_found", reason="follow-up constraint not covered", uncovered=missing
                )
                return not_covered(constraint, missing), detail
        return render(question, chosen, passages), {
            **detail,
            "answer": "quoted",
            "sentences": len(chosen),
        }

    def _choose(self, scored: list[ScoredSentence]) -> list[ScoredSentence]:
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
        # A sentence that ends in a colon introduces what follows ("you'll see a payroll
        # deduction for medical insurance:"): it is never quoted without it.
        for sentence in list(chosen):
            if sentence.text.endswith(":"):
                following = [
                    s
                    for s in scored
                    if s.passage == sentence.passage and s.position == sentence.position + 1
                ]
                chosen.extend(s for s in following if s not in chosen)
        return chosen


def _unanswered(messages: list[ChatMessage]) -> frozenset[int]:
    """Indexes (among user messages) of the turns whose answer was "not found"."""
    indexes = set()
    user_index = -1
    for message in messages:
        if message.role == "user":
            user_index += 1
        elif message.role == "assistant" and _is_refusal(message.content):
            indexes.add(user_index)
    return frozenset(indexes)


def _is_refusal(answer: str) -> bool:
    """Whether ``answer`` is one of the model's refusals ("not found", an uncovered constraint)."""
    return answer == NOT_FOUND or answer.startswith(NOT_COVERED)


def build(profile: ModelProfile, settings: ChatSettings, embedder: Embedder) -> BuiltinChatModel:
    """Entry point factory of the ``builtin`` chat model (the profile needs no settings)."""
    return BuiltinChatModel(settings, embedder)
