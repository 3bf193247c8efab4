"""Evidence-bound answers of the built-in model: how quotes read, when a constraint is covered.

A citation stands for one section, so a run of quoted sentences comes from one section and is
cited under its own heading (:func:`render`). A short follow-up ("and for managers?") keeps the
earlier subject and adds a constraint (:class:`Constraint`); :func:`uncovered` says which of
its words no sentence about that subject covers, and :func:`not_covered` words the refusal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from search2o.providers.answer_types import verdict
from search2o.providers.chat import Passage
from search2o.providers.sentences import (
    ScoredSentence,
    SentenceScorer,
    content_stems,
    split_sentences,
)

__all__ = ["NEAR", "NOT_COVERED", "Constraint", "not_covered", "render", "uncovered"]

# Word-embedding cosine at which a word of the evidence stands for a constraint word
# ("wife" ~ "spouse" 0.86; "husband" ~ "partner" 0.60, at the edge; unrelated words of the
# handbook are 0.1-0.4 apart with all-MiniLM-L6-v2). Set by these pairs, not swept on data.
NEAR = 0.6
NOT_COVERED = "The sources I found about"


@dataclass(frozen=True)
class Constraint:
    """What a short follow-up adds to the earlier subject: "and for managers?" → ``managers``.

    ``words`` are the follow-up's own content words (indefinite pronouns such as "someone"
    left out); ``subject`` the earlier query's subject words it keeps; ``earlier_answer`` the
    text of the assistant's last answer that was not a refusal (empty when there is none).
    """

    words: tuple[str, ...]
    subject: tuple[str, ...]
    earlier_answer: str = ""


def uncovered(
    constraint: Constraint,
    chosen: list[ScoredSentence],
    passages: list[Passage],
    scorer: SentenceScorer,
) -> list[str]:
    """Return the constraint words that no chosen sentence about the earlier subject covers.

    A follow-up keeps the earlier subject and adds its constraint, so only sentences about
    that subject can answer it. A chosen sentence is about the subject when its section
    gave the earlier answer (one of its sentences was quoted there), when its section's
    headings or title share a word with the subject, or when they share one with the
    constraint and the sentence itself names the subject or the constraint. So "inform
    your manager … especially longer absences like sabbatical", from the section on
    scheduling time off, does not answer "and for managers?" after the sabbatical policy.

    A constraint word is covered when its stem, or a word whose embedding is within
    :data:`NEAR` cosine of it, is in such a sentence or its headings or title. On the
    development sets of ``bench/qa_eval.py`` this refused 5.0 % of answerable turns (the
    same as any chosen sentence covering the constraint; 13 % when only headings naming
    the subject counted).
    """
    subject = content_stems(" ".join(constraint.subject))
    asked = content_stems(" ".join(constraint.words), compounds=True)
    evidence = []
    for sentence in chosen:
        passage = passages[sentence.passage]
        frame = content_stems(" ".join([passage.title, *passage.headings]), compounds=True)
        answered = bool(constraint.earlier_answer) and any(
            s in constraint.earlier_answer for s in split_sentences(passage.text)
        )
        names = content_stems(sentence.text, compounds=True) & (subject | asked)
        if answered or frame & subject or (frame & asked and names):
            evidence.append(" ".join([passage.title, *passage.headings, sentence.text]))
    stems = content_stems(" ".join(evidence), compounds=True)
    words = sorted({w for text in evidence for w in re.findall(r"[a-z]+", text.lower())})
    words = [w for w in words if content_stems(w)]
    missing = [w for w in constraint.words if not content_stems(w, compounds=True) <= stems]
    if missing and words:  # one embedding call for the evidence's words, one for the missing
        near = (scorer.vectors(missing) @ scorer.vectors(words).T).max(axis=1)
        missing = [w for w, cosine in zip(missing, near, strict=True) if float(cosine) < NEAR]
    return missing


def render(question: str, chosen: list[ScoredSentence], passages: list[Passage]) -> str:
    """Return the answer that quotes ``chosen`` (best sentence first).

    Runs of one section, each closed by its ``[n]`` and opened by its heading when the
    sentences do not name it; a verdict read from the best sentence's heading goes first
    (:func:`~search2o.providers.answer_types.verdict`).
    """
    best = passages[chosen[0].passage]
    said = verdict(question, best.headings[-1], chosen[0].text) if best.headings else None
    # Document order: by source (citation number), then passage, then place in the passage;
    # a verdict's section first, so "Yes." stands before the sentence it comes from.
    first = best.number if said else None

    def order(sentence: ScoredSentence) -> tuple[bool, int, int, int]:
        number = passages[sentence.passage].number
        return (number != first, number, sentence.passage, sentence.position)

    chosen = sorted(chosen, key=order)
    # One marker after each run of sentences from the same section; its heading before it
    # when the run does not name it.
    parts = [f"{said}."] if said else []
    run: list[str] = []
    for index, sentence in enumerate(chosen):
        passage = passages[sentence.passage]
        heading = passage.headings[-1] if passage.headings else ""
        if not run and heading:
            # the section's heading, unless the sentence names it and no verdict read from
            # it stands first
            named = content_stems(heading) <= content_stems(sentence.text, compounds=True)
            if not named or (said and passage.number == first):
                run.append(f"{heading}:")
        run.append(sentence.text)
        following = chosen[index + 1] if index + 1 < len(chosen) else None
        if following is None or passages[following.passage].number != passage.number:
            parts.append(f"{' '.join(run)} [{passage.number}]")
            run = []
    return " ".join(parts)


def not_covered(constraint: Constraint, missing: list[str]) -> str:
    """Return the refusal of a follow-up whose constraint no evidence covers, naming both."""
    subject = " ".join(constraint.subject)
    return f"{NOT_COVERED} {subject} do not say anything about {' '.join(missing)}."
