"""The built-in extractive chat model: decisions, self-contained queries, sentences, answers."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from search2o.providers.builtin_chat import (
    NO_DOCUMENTS,
    NOT_FOUND,
    BuiltinChatModel,
    is_small_talk,
    self_contained_query,
    small_talk_kind,
)
from search2o.providers.chat import ChatMessage, Passage, TextDelta, ToolCall, ToolSpec
from search2o.providers.sentences import SentenceScorer, content_stems, split_sentences
from search2o.query.settings import ChatSettings
from tests.conftest import MemoEmbedder
from tests.providers.streaming import streamed, title_of

SEARCH = ToolSpec("search_knowledge", "search", {"type": "object"})
WEB = ToolSpec("web_search", "web", {"type": "object"})


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("hi there", "greeting"),
        ("Hello!", "greeting"),
        ("Good morning, everyone", "greeting"),
        ("thanks!", "thanks"),
        ("Thank you so much.", "thanks"),
        ("ok thanks", "thanks"),
        ("hi, thanks!", "thanks"),
        ("got it", "ack"),
        ("bye", "goodbye"),
        ("How are you?", "wellbeing"),
        ("what can you do?", "identity"),
    ],
)
def test_small_talk_is_recognised(message: str, kind: str) -> None:
    assert small_talk_kind(message) == kind
    assert is_small_talk(message)


@pytest.mark.parametrize(
    "message",
    [
        "thanks, and how many can roll over?",
        "hi, is there a sabbatical?",
        "what is the vacation policy",
        "and more?",
        "help me find the expense policy",
        "hello world program in our handbook?",
    ],
)
def test_anything_beyond_small_talk_searches(message: str) -> None:
    assert not is_small_talk(message)


def test_a_punctuation_only_message_asks_what_the_user_wants() -> None:
    assert small_talk_kind("?!") == "empty"


def test_a_standalone_question_is_its_own_query() -> None:
    assert self_contained_query(["How many vacation days do we get each year?"]) == (
        "How many vacation days do we get each year?"
    )


def test_an_elliptical_follow_up_carries_the_subject() -> None:
    query = self_contained_query(
        ["How many vacation days do we get each year?", "and how many of them can roll over?"]
    )
    assert query.startswith("how many of them can roll over?")
    assert {"vacation", "days"} <= set(query.split())


@pytest.mark.parametrize(
    "follow_up", ["what about serving on a board?", "and more?", "How long does one last?"]
)
def test_connectives_pronouns_and_contentless_messages_are_elliptical(follow_up: str) -> None:
    query = self_contained_query(["Can I take a side job at another software company?", follow_up])
    assert "side" in query and "job" in query


@pytest.mark.parametrize(
    "repair",
    [
        "I meant for Mars?",
        "I\u2019m asking about the ones on Mars",  # a typographic apostrophe
        "Sorry, I want to ask about Mars.",
        "no, Mars",
        "what? Mars??",
    ],
)
def test_a_repair_keeps_the_earlier_subject(repair: str) -> None:
    query = self_contained_query(["Which discoveries have the rovers made?", repair])
    assert "Mars" in query and "rovers" in query and "discoveries" in query


def test_a_definite_description_refers_back_to_the_earlier_subject() -> None:
    query = self_contained_query(
        [
            "Who were the actors during the ancient Greek theater?",
            "How were the facilities where the presentations were done?",
        ]
    )
    assert query.startswith("How were the facilities where the presentations were done?")
    assert {"ancient", "Greek", "theater"} <= set(query.split())


@pytest.mark.parametrize(
    "earlier",
    [
        ["How much does the company pay for health insurance?"],
        ["How many vacation days do we get?", "What is the severance package?"],
    ],
)
def test_a_longer_question_with_the_stands_alone_and_passes_nothing_on(
    earlier: list[str],
) -> None:
    question = "Does the company pay for pet insurance?"
    assert self_contained_query([*earlier, question]) == question
    follow_up = self_contained_query([*earlier, question, "and for dogs?"])
    assert "pet" in follow_up and not {"health", "vacation"} & set(follow_up.split())


def test_a_message_that_merely_starts_like_a_repair_word_is_not_one() -> None:
    query = self_contained_query(["Which discoveries have the rovers made?", "Nobody told me."])
    assert query == "Nobody told me."


def test_a_new_topic_is_not_rewritten() -> None:
    query = self_contained_query(["How long are our work cycles?", "What is Queenbee?"])
    assert query == "What is Queenbee?"


def test_small_talk_between_questions_is_skipped_and_chains_keep_the_first_subject() -> None:
    query = self_contained_query(
        ["How long are our work cycles?", "thanks!", "and the cooldown after them?", "and more?"]
    )
    assert "cycles" in query and "cooldown" in query


def test_self_contained_query_needs_a_message() -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        self_contained_query([])


def test_split_sentences_joins_wrapped_lines_and_strips_markdown() -> None:
    text = (
        "# Parking\n\nBicycles are parked in the\nbasement garage. Cars use the [north lot](x.md)."
        "\n- **Scooters** go by the front door\n| a | b |\n"
    )
    assert split_sentences(text) == [
        "Bicycles are parked in the basement garage.",
        "Cars use the north lot.",
        "Scooters go by the front door",
    ]


def test_split_sentences_drops_markup_but_keeps_every_content_character() -> None:
    text = (
        "## Settings ##\n\n"
        "Set `knowledge.max_k` to change how many passages a search returns.\n"
        "> The data directory is read from `SEARCH2O_DATA_DIR`\n"
        "> when the variable is set.\n\n"
        "* Tables are prefixed `s2o_` and live in `<data_dir>/search2o.db` by default.\n"
        "- Some **bold** and _em_ and ***both*** around knowledge.max_k and SEARCH2O_DATA_DIR.\n"
        "A request goes client -> proxy -> server, and C# reads <data_dir> too.\n\n"
        "| Setting | Default | Meaning | Kind |\n"
        "|---|---:|---|---|\n"
        "| a | b | c | d |\n"
        "| `embedding.batch_size` | 32 | texts per call | `a|b` |\n\n"
        "Escaped \\*stars\\* stay, as do 2 * 3 * 4, *.md globs and __init__.\n"
        "```sh\nexport SEARCH2O_DATA_DIR=/srv/s2o  # **not** emphasis\n```\n"
    )
    assert split_sentences(text) == [
        "Set knowledge.max_k to change how many passages a search returns.",
        "The data directory is read from SEARCH2O_DATA_DIR when the variable is set.",
        "Tables are prefixed s2o_ and live in <data_dir>/search2o.db by default.",
        "Some bold and em and both around knowledge.max_k and SEARCH2O_DATA_DIR.",
        "A request goes client -> proxy -> server, and C# reads <data_dir> too.",
        "Setting: a; Default: b; Meaning: c; Kind: d",
        "Setting: embedding.batch_size; Default: 32; Meaning: texts per call; Kind: a|b",
        "Escaped *stars* stay, as do 2 * 3 * 4, *.md globs and __init__.",
        "export SEARCH2O_DATA_DIR=/srv/s2o # **not** emphasis",
    ]


@pytest.mark.parametrize(
    ("source", "quoted"),
    [
        (
            "Set `knowledge.max_k` to change how many passages a search returns.",
            "Set knowledge.max_k to change how many passages a search returns.",
        ),
        (
            "The data directory is read from `SEARCH2O_DATA_DIR` when it is set.",
            "The data directory is read from SEARCH2O_DATA_DIR when it is set.",
        ),
        (
            "The database file lives at `<data_dir>/search2o.db` by default.",
            "The database file lives at <data_dir>/search2o.db by default.",
        ),
        (
            "Every table name is prefixed `s2o_` in the database.",
            "Every table name is prefixed s2o_ in the database.",
        ),
        (
            "Write **bold** and _em_ around embedding.batch_size in the docs.",
            "Write bold and em around embedding.batch_size in the docs.",
        ),
        (
            "| `embedding.batch_size` | 32 | texts per embedding call |",
            "embedding.batch_size 32 texts per embedding call",
        ),
        (
            "> A request goes client -> proxy -> server, in that order.",
            "A request goes client -> proxy -> server, in that order.",
        ),
    ],
)
def test_the_quoted_answer_keeps_content_characters_and_drops_markup(
    embedder: MemoEmbedder, source: str, quoted: str
) -> None:
    passages = [Passage(1, "Settings", "settings.md", source)]
    answer = _answer(_model(embedder, not_found_score=-1.0), "Which setting is it?", passages)
    assert answer == f"{quoted} [1]"


def test_a_long_table_row_is_a_sentence_per_cell_named_by_its_column_and_row() -> None:
    rubric = " ".join(["word"] * 20)
    text = (
        "| Category | Junior (L1) | Lead (L4) |\n"
        "| --- | --- | --- |\n"
        f"| *Scope* | Works on small tasks with help. {rubric} | Leads projects across teams. |\n"
        "| **Skill** |  |  |\n"
    )
    assert split_sentences(text) == [
        f"Junior (L1), Scope: Works on small tasks with help. {rubric}",
        "Lead (L4), Scope: Leads projects across teams.",
    ]
    # without its header (a chunk cut inside the table) a row is read as plain text
    assert split_sentences("| Scope | Leads projects across teams. |") == [
        "Scope Leads projects across teams."
    ]


def test_content_stems_drop_stop_words_and_contractions_and_match_compounds() -> None:
    assert content_stems("What do I get if I've worked here?") == {"get", "work"}
    assert content_stems("It isn't, didn\u2019t and won't") == set()  # auxiliary + "not"
    assert "cooldown" in content_stems("we spend two weeks cooling down", compounds=True)
    assert "cooldown" not in content_stems("we spend two weeks cooling down")


def test_a_faq_answer_inherits_its_questions_score(embedder: MemoEmbedder) -> None:
    passage = (
        "How do I keep a document private to a group? Ingest it with --group NAME. "
        "Unrelated sentence about parking bicycles in the garage."
    )
    scored = SentenceScorer(embedder).score(
        "keep a document private to one group",
        "keep a document private to one group",
        [(1, passage)],
    )
    assert scored[0].text == "Ingest it with --group NAME."
    assert all(not s.text.endswith("?") for s in scored)


def _model(embedder: MemoEmbedder, **settings: object) -> BuiltinChatModel:
    return BuiltinChatModel(ChatSettings(**settings), embedder)  # type: ignore[arg-type]


def _text(events: list[object]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def test_model_answers_small_talk_without_tools(embedder: MemoEmbedder) -> None:
    events = streamed(_model(embedder), [ChatMessage("user", "thanks!")], [SEARCH])
    assert all(isinstance(e, TextDelta) for e in events)
    assert _text(events) == "You're welcome! Ask me anything else."


def test_model_calls_every_offered_search_tool_with_the_written_query(
    embedder: MemoEmbedder,
) -> None:
    history = [
        ChatMessage("user", "How long are our work cycles?"),
        ChatMessage("assistant", "We work in 6-week cycles. [1]"),
        ChatMessage("user", "and the cooldown after them?"),
    ]
    events = streamed(_model(embedder), history, [SEARCH, WEB])
    assert [type(e) for e in events] == [ToolCall, ToolCall]
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert [c.name for c in calls] == ["search_knowledge", "web_search"]
    assert calls[0].id != calls[1].id
    assert "cycles" in calls[0].arguments["query"]


def test_model_without_tools_says_there_is_nothing_to_search(embedder: MemoEmbedder) -> None:
    events = streamed(_model(embedder), [ChatMessage("user", "What is Queenbee?")], [])
    assert _text(events) == NO_DOCUMENTS


def _answer(model: BuiltinChatModel, question: str, passages: list[Passage]) -> str:
    call = ToolCall("call_1", "search_knowledge", {"query": question})
    messages = [
        ChatMessage("user", question),
        ChatMessage("assistant", "", tool_calls=[call]),
        ChatMessage("tool", "…", tool_call_id="call_1", passages=passages),
    ]
    return _text(streamed(model, messages, []))


def test_model_quotes_the_best_sentences_with_their_citation(embedder: MemoEmbedder) -> None:
    passages = [
        Passage(1, "Parking", "parking.md", "Bicycles are parked in the basement garage."),
        Passage(2, "Lunch", "lunch.md", "Lunch is served at noon in the canteen on floor two."),
    ]
    answer = _answer(_model(embedder), "Where do I park my bicycle?", passages)
    assert answer == "Bicycles are parked in the basement garage. [1]"


def test_model_says_not_found_below_the_threshold(embedder: MemoEmbedder) -> None:
    passages = [Passage(1, "Lunch", "lunch.md", "Lunch is served at noon in the canteen.")]
    model = _model(embedder)
    assert _answer(model, "What is the wifi password of the Paris office?", passages) == NOT_FOUND
    assert _answer(model, "What is the wifi password?", []) == NOT_FOUND
    # The same passages pass with a threshold below their score: the threshold decides.
    lenient = _model(embedder, not_found_score=-1.0)
    assert _answer(lenient, "What is the wifi password?", passages).endswith("[1]")


def test_model_needs_a_user_message(embedder: MemoEmbedder) -> None:
    with pytest.raises(ValueError, match="user message"):
        streamed(_model(embedder), [ChatMessage("system", "x")], [SEARCH])


def test_title_is_the_first_message_cut_at_a_word(embedder: MemoEmbedder) -> None:
    model = _model(embedder)
    assert title_of(model, "  How many   vacation days?  ") == "How many vacation days?"
    long = "word " * 40
    title = title_of(model, long)
    assert len(title) <= 80 and title.endswith("…") and "  " not in title


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("lol", "ack"),
        ("👍", "ack"),
        ("yes", "ack"),
        ("hey, quick question", "preface"),
        ("?", "empty"),
        ("...", "empty"),
    ],
)
def test_more_small_talk_needs_no_search(message: str, kind: str) -> None:
    assert small_talk_kind(message) == kind


def test_a_pronoun_carries_the_subject_even_in_a_long_question() -> None:
    query = self_contained_query(
        ["What is Queenbee?", "What is Grafana used for and is it for monitoring?"]
    )
    assert query.startswith("What is Grafana used for and is it for monitoring?")
    assert query.endswith("Queenbee")


def test_a_turn_answered_not_found_lends_no_subject() -> None:
    messages = ["What is the wifi password?", "what about vacation days?"]
    assert "wifi" in self_contained_query(messages)
    assert self_contained_query(messages, frozenset({0})) == "what about vacation days?"


def _full_width(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if c != " " else c for c in text)


def test_the_query_is_normalised_and_capped() -> None:
    assert self_contained_query([_full_width("how many vacation days")]) == "how many vacation days"
    long = "vacation " * 300
    query = self_contained_query([long])
    assert len(query) <= 1000 and query.endswith("vacation")


def test_abbreviations_do_not_end_sentences_and_split_brackets_are_balanced() -> None:
    text = "It installs apps (e.g. EncryptMe) on every laptop. (Kandji is not a panopticon.)"
    assert split_sentences(text) == [
        "It installs apps (e.g. EncryptMe) on every laptop.",
        "(Kandji is not a panopticon.)",
    ]


def test_the_same_sentence_in_several_passages_is_quoted_once(embedder: MemoEmbedder) -> None:
    same = "The company pays 100% of the premium for dental coverage."
    passages = [Passage(1, "Dental", "d.md", same), Passage(2, "Vision", "v.md", same)]
    answer = _answer(
        _model(embedder, not_found_score=-1.0), "Who pays the dental premium?", passages
    )
    assert answer.count(same) == 1


def test_a_failed_search_is_said_not_hidden_as_not_found(embedder: MemoEmbedder) -> None:
    call = ToolCall("call_1", "search_knowledge", {"query": "x"})
    messages = [
        ChatMessage("user", "What is Queenbee?"),
        ChatMessage("assistant", "", tool_calls=[call]),
        ChatMessage("tool", "error: the database is unreachable", tool_call_id="call_1"),
    ]
    text = _text(streamed(_model(embedder), messages, []))
    assert text == "I could not search the knowledge base: the database is unreachable"


def test_sentence_scoring_is_safe_across_threads(embedder: MemoEmbedder) -> None:
    texts = [f"Employees get {n} vacation days and roll over {n + 7} of them." for n in range(40)]
    serial = [sorted(content_stems(t, compounds=True)) for t in texts]
    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in range(5):
            parallel = list(pool.map(lambda t: sorted(content_stems(t, compounds=True)), texts))
            assert parallel == serial
