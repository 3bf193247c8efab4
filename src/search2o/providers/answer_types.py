"""The kind of answer a question asks for, whether a sentence carries it, and heading verdicts.

Answer-type matching is the classic step of open-domain QA systems (Moldovan et al., "The
Structure and Performance of an Open-Domain Question Answering System", ACL 2000; Li & Roth,
"Learning Question Classifiers", COLING 2002): "how much" wants a quantity, "how long" a
duration, "when" a date or time, "who" a person or role. The built-in model prefers sentences
that carry the type the question asks for (:func:`type_bonus`).

Coarse types, detected with patterns on the question's English words:

=========  ==========================================  =====================================
type       question                                    a sentence carries it when it has
=========  ==========================================  =====================================
quantity   how much / how many / what percentage /     a digit, ``%``, ``$`` or a number
           the minimum, maximum, amount, rate, limit   word (one … twelve, half, twice)
duration   how long / for how many days …              a number with a time unit
date       when / until when / what date, day, month   a month, weekday, year, "first day",
                                                       or a frequency (annually, every)
person     who / whom / whose                          a role (manager, team, lead, Ops …)
                                                       or a capitalised name inside it
=========  ==========================================  =====================================

:func:`verdict` reads a yes/no answer from the heading a sentence sits under ("OK" → yes,
"Not OK" → no), for lists that say what is allowed under such headings.
"""

from __future__ import annotations

import re

__all__ = ["TYPE_BONUS", "question_type", "type_bonus", "verdict"]

# Added to a sentence's score (cosine + keyword share, 0..~1.35) when it carries the asked type.
# Chosen on the development sets of bench/qa_eval.py (public, dialogues; answer-fact accuracy /
# not-found accuracy on dialogues): 0 gave 0.798 / 0.867, 0.05 gave 0.808 / 0.867, 0.1 gave
# 0.808 / 0.800 (a bonus as large as the built-in model's answer margin narrows answers to the
# typed sentence). Held out (newcomer): 0.596, 0.614, 0.623 answer-fact accuracy.
TYPE_BONUS = 0.05

_NUMBER_WORDS = (
    r"one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|"
    r"half|twice|double|once"
)
_QUESTION = {
    "duration": re.compile(
        r"\bhow long\b|\bfor how many (?:hours|days|weeks|months|years)\b|\bhow many "
        r"(?:hours|days|weeks|months|years)\b",
    ),
    "quantity": re.compile(
        r"\bhow (?:much|many|high|big|large|often)\b|\bwhat (?:percentage|percent|share|"
        r"portion|fraction)\b|\bthe (?:minimum|maximum|amount|rate|limit|cap|floor|ceiling|"
        r"budget|cost|price)\b"
    ),
    "date": re.compile(
        r"^(?:\W*\w+,?\s+)?(?:when|until when|by when|since when)\b|\bwhat (?:date|day|month|"
        r"year|time)\b|\bhow soon\b"
    ),
    "person": re.compile(r"^(?:\W*\w+,?\s+)?(?:who|whom|whose)\b|\bwho (?:do|should|can|is)\b"),
}
_SENTENCE = {
    "duration": re.compile(
        rf"\b(?:\d+|{_NUMBER_WORDS}|a)[- ](?:hours?|days?|weeks?|months?|years?)\b", re.IGNORECASE
    ),
    "quantity": re.compile(rf"\d|%|\$|\b(?:{_NUMBER_WORDS})\b", re.IGNORECASE),
    "date": re.compile(
        r"\b(?:january|february|march|april|may|june|july|august|september|october|november|"
        r"december|monday|tuesday|wednesday|thursday|friday|saturday|sunday|annually|yearly|"
        r"monthly|weekly|every|(?:19|20)\d\d|\d{1,2}(?:st|nd|rd|th)|(?:first|last) "
        r"(?:day|week|month|year))\b",
        re.IGNORECASE,
    ),
    "person": re.compile(
        r"\b(?:manager|managers|team|lead|leads|head|director|ops|people|buddy|colleague|"
        r"coworker|teammate|ceo|cto|founder|hr|support|person|someone)\b|(?<=\w )[A-Z][a-z]+",
    ),
}
# Heading texts that are a verdict on the items under them (normalised: lower case, no
# punctuation). Only exact headings count: "OK" is a verdict, "OK for contractors" is not.
_VERDICTS = {
    "ok": "Yes",
    "okay": "Yes",
    "allowed": "Yes",
    "permitted": "Yes",
    "yes": "Yes",
    "do": "Yes",
    "dos": "Yes",
    "not ok": "No",
    "not okay": "No",
    "not allowed": "No",
    "not permitted": "No",
    "no": "No",
    "dont": "No",
    "donts": "No",
}
_OWN_VERDICT = re.compile(
    r"\b(?:not|n't|never)\s+(?:be\s+)?(?:ok|okay|allowed|permitted|fine|acceptable)\b",
    re.IGNORECASE,
)
_YES_NO = re.compile(
    r"^(?:(?:so|and|ok|okay|also|but|then|hi|hey|um),?\s+)?"
    r"(?:can|could|may|might|am|is|are|do|does|should|would|will)\b|"
    r"\b(?:is it|am i) (?:ok|okay|allowed|fine|permitted)\b"
)


def question_type(question: str) -> str | None:
    """Return the answer type ``question`` asks for (see the module table), else ``None``.

    ``duration`` is tested before ``quantity`` ("how many weeks" is a duration).
    """
    text = " ".join(question.lower().split())
    return next((kind for kind, pattern in _QUESTION.items() if pattern.search(text)), None)


def type_bonus(kind: str | None, sentence: str) -> float:
    """Return :data:`TYPE_BONUS` when ``sentence`` carries the answer type ``kind``, else 0."""
    if kind is None:
        return 0.0
    return TYPE_BONUS if _SENTENCE[kind].search(sentence) else 0.0


def verdict(question: str, heading: str, sentence: str = "") -> str | None:
    """Return "Yes" or "No" when ``question`` is a yes/no question and ``heading`` a verdict.

    ``heading`` is the innermost heading of the section the answering ``sentence`` sits in;
    ``None`` when either is not the case (an open question, or a heading that is a topic), or
    when the sentence states a verdict of its own ("… would not be OK" under "OK": the list
    item carries its exception, and the heading does not decide).
    """
    if not _YES_NO.search(" ".join(question.lower().split())):
        return None
    if _OWN_VERDICT.search(sentence):
        return None
    key = re.sub(r"[^a-z ]+", "", heading.lower().replace("\u2019", "'").replace("'", ""))
    return _VERDICTS.get(" ".join(key.split()))
