"""The built-in model over the handbook states only what its evidence says, or says "not found".

The questions are the ones a new user asked as written (issue "Trustworthy answers"); they run
through the real built-in model, the real embedder and the Query Engine, and the retrieval
trace records what decided each answer (``decision_detail``).
"""

from __future__ import annotations

from typing import Any

import pytest

from search2o.knowledge.access import AccessList
from search2o.providers.answer_types import question_type, type_bonus, verdict
from search2o.providers.builtin_chat import NOT_FOUND, follow_up_constraint
from search2o.runtime import Runtime
from tests.conftest import handbook_files
from tests.query.test_turn import done


@pytest.fixture
def handbook(runtime: Runtime) -> Runtime:
    runtime.knowledge.ingest_paths(handbook_files(), AccessList())
    return runtime


def ask(runtime: Runtime, *messages: str) -> list[dict[str, Any]]:
    """Ask ``messages`` in one conversation; each answer's done data with its ``trace``."""
    me = runtime.local_principal()
    conversation, answers = None, []
    for message in messages:
        final = done(list(runtime.turns.ask(me, message, conversation)))
        conversation = final["conversation_id"]
        answers.append({**final, "trace": runtime.conversations.trace(me, final["message_id"])})
    return answers


def test_health_insurance_is_answered_with_the_medical_share_under_its_heading(
    handbook: Runtime,
) -> None:
    (answer,) = ask(handbook, "How much does the company pay for health insurance?")
    text = answer["text"]
    assert "Medical Insurance: The company pays 75% of the premium" in text
    # a "100% of the premium" sentence is never stated without the section it is about
    for claim in ("The company pays 100% of the premium",):
        for start in [i for i in range(len(text)) if text.startswith(claim, i)]:
            assert text[:start].rstrip().endswith(":"), text
    assert answer["trace"]["decision_detail"]["answer"] == "quoted"
    assert answer["trace"]["decision_detail"]["answer_type"] == "quantity"


def test_follow_ups_on_managers_and_part_timers_are_refused_naming_the_constraint(
    handbook: Runtime,
) -> None:
    first, managers, part_timers = ask(
        handbook, "What is the sabbatical policy?", "and for managers?", "what about part-timers?"
    )
    assert "6-week paid sabbatical" in first["text"]
    # "inform your manager … especially longer absences like sabbatical" (scheduling time
    # off) mentions both words but is not the sabbatical policy: it does not answer
    for answer, word in ((managers, "managers"), (part_timers, "part-timers")):
        assert answer["citations"] == []
        assert answer["text"] == (
            f"The sources I found about sabbatical policy do not say anything about {word}."
        )
        detail = answer["trace"]["decision_detail"]
        assert detail["answer"] == "not_found"
        assert detail["uncovered"] == [word]
        assert detail["reason"] == "follow-up constraint not covered"


def test_a_follow_up_whose_constraint_the_subject_section_covers_is_answered(
    handbook: Runtime,
) -> None:
    _, follow_up = ask(
        handbook, "What is the waiting period for short term disability?", "and for long term?"
    )
    assert follow_up["citations"], follow_up["text"]
    assert "Long Term" in follow_up["text"]
    assert follow_up["trace"]["decision_detail"]["answer"] == "quoted"


def test_gym_membership_is_not_found_and_the_trace_says_why(
    handbook: Runtime, request: pytest.FixtureRequest
) -> None:
    if handbook.database.engine.dialect.name == "postgresql":
        # Known gap: PostgreSQL's keyword channel ranks the life-insurance chunk higher, and
        # its "The company pays 100% of the premium" scores above chat.not_found_score. Strict:
        # the day it passes, this mark must go.
        request.applymarker(
            pytest.mark.xfail(
                strict=True, reason="gym membership is answered from insurance on PostgreSQL"
            )
        )
    (answer,) = ask(handbook, "Does the company pay for my gym membership?")
    assert answer["text"] == NOT_FOUND and answer["citations"] == []
    detail = answer["trace"]["decision_detail"]
    assert detail["answer"] == "not_found"
    assert detail["reason"] == "no sentence scored the threshold"
    assert detail["best_score"] < detail["threshold"]


def test_the_coworking_stipend_is_found(handbook: Runtime) -> None:
    (answer,) = ask(handbook, "Is there a coworking stipend?")
    assert "$200/month" in answer["text"]
    assert answer["citations"][0]["heading_path"][-1] == "Coworking Space Stipend"


def test_the_minimum_salary_is_the_salary_floor(handbook: Runtime) -> None:
    (answer,) = ask(handbook, "What is the minimum salary?")
    assert "$73,500 salary floor" in answer["text"]


def test_paid_talks_are_a_yes_from_the_ok_list(handbook: Runtime) -> None:
    (answer,) = ask(handbook, "Can I give paid talks at conferences?")
    assert answer["text"].startswith("Yes. OK: ")
    assert [c["heading_path"][-1] for c in answer["citations"]] == ["OK"]


def test_a_list_item_that_states_its_own_exception_gets_no_verdict(handbook: Runtime) -> None:
    (answer,) = ask(handbook, "Can I become a nonprofit's full-time web designer?")
    assert "would not be OK" in answer["text"]
    assert not answer["text"].startswith("Yes")


def test_a_refused_follow_up_does_not_break_the_next_one(handbook: Runtime) -> None:
    _, interns, roll = ask(
        handbook,
        "How many vacation days do we get?",
        "and for interns?",
        "and how many can roll over?",
    )
    assert interns["text"].endswith("do not say anything about interns.")
    assert "maximum bank of 27 days" in roll["text"]


def test_a_sentence_ending_in_a_colon_is_quoted_with_what_it_introduces(
    handbook: Runtime,
) -> None:
    (answer,) = ask(handbook, "How much is the payroll deduction for medical insurance?")
    assert "payroll deduction for medical insurance:" in answer["text"]
    assert "$" in answer["text"].split("medical insurance:", 1)[1]


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("How much does the company pay for health insurance?", "quantity"),
        ("What is the minimum salary?", "quantity"),
        ("How long is the sabbatical?", "duration"),
        ("how many weeks of leave do I get?", "duration"),
        ("When does open enrollment start?", "date"),
        ("Who should I tell when I am sick?", "person"),
        ("Is there a coworking stipend?", None),
    ],
)
def test_the_answer_type_of_a_question(question: str, kind: str | None) -> None:
    assert question_type(question) == kind


def test_a_sentence_carrying_the_type_gets_the_bonus_and_others_do_not() -> None:
    assert type_bonus("quantity", "The company pays 75% of the premium.") > 0
    assert type_bonus("quantity", "Coverage begins on your first day.") == 0
    assert type_bonus("duration", "employees may take a 6-week paid sabbatical") > 0
    assert type_bonus("date", "Open enrollment is in November every year.") > 0
    assert type_bonus(None, "The company pays 75% of the premium.") == 0


def test_a_verdict_comes_only_from_a_verdict_heading_and_a_yes_no_question() -> None:
    assert verdict("Can I give paid talks?", "OK") == "Yes"
    assert verdict("Can I work for a competitor?", "Not OK") == "No"
    assert verdict("Is it ok to moonlight?", "Don't") == "No"
    assert verdict("What can I do on the side?", "OK") is None  # an open question
    assert verdict("Can I give paid talks?", "Moonlighting") is None  # a topic heading
    # the item states its own exception: the heading does not decide
    assert verdict("Can I work full time on the side?", "OK", "… would not be OK.") is None
    assert verdict("Can I give paid talks?", "OK", "That's fine as long as …") == "Yes"


def test_only_a_short_connective_follow_up_adds_a_constraint() -> None:
    constraint = follow_up_constraint(["What is the sabbatical policy?", "and for managers?"])
    assert constraint is not None
    assert constraint.words == ("managers",)
    assert constraint.subject == ("sabbatical", "policy")
    assert follow_up_constraint(["What is the sabbatical policy?"]) is None
    assert follow_up_constraint(["What is the sabbatical policy?", "Who approves it?"]) is None
    # "how long" asks for a type, and light verbs name nothing: neither is a constraint
    assert follow_up_constraint(["What is the sabbatical policy?", "and how long is it?"]) is None
    chain = ["How many vacation days do we get?", "and for Germany?"]
    germany = follow_up_constraint(chain)
    assert germany is not None and germany.words == ("Germany",)
    assert germany.subject == ("vacation", "days")
    long = "and what about the rules for remote staff in Europe and Asia?"
    assert follow_up_constraint(["What is the sabbatical policy?", long]) is None
    # a refused turn is no subject: the constraint keeps the subject before it
    chain = ["What is the sabbatical policy?", "and for managers?", "what about part-timers?"]
    kept = follow_up_constraint(chain, frozenset({1}))
    assert kept is not None and kept.subject == ("sabbatical", "policy")


def test_a_follow_up_asking_who_or_what_a_named_thing_is_adds_no_constraint() -> None:
    webb = "Who is James Webb that the telescope is named after?"
    assert follow_up_constraint([webb, "And who was Hubble?"]) is None
    assert follow_up_constraint([webb, "and what is Grafana?"]) is None
    # a question about the earlier subject still constrains it
    policy = "What is the sabbatical policy?"
    eligible = follow_up_constraint([policy, "and who is eligible?"])
    assert eligible is not None and eligible.words == ("eligible",)
    minimum = follow_up_constraint([policy, "and what is the minimum?"])
    assert minimum is not None and minimum.words == ("minimum",)


def test_the_word_a_follow_up_asks_about_is_no_constraint() -> None:
    # the README's demo: "what happens" asks; "ingest" and "file" restrict
    chain = ["How do I keep a document visible only to one group?"]
    again = follow_up_constraint([*chain, "and what happens when I ingest the same file again?"])
    assert again is not None and again.words == ("ingest", "file")
    policy = "What is the sabbatical policy?"
    approves = follow_up_constraint([policy, "and who approves it for managers?"])
    assert approves is not None and approves.words == ("managers",)


def test_a_negative_contraction_is_no_constraint_word() -> None:
    constraint = follow_up_constraint(
        ["Did the Beatles influence Oasis?", "But they had an influence on them, didn't they?"]
    )
    assert constraint is not None and constraint.words == ("influence",)
