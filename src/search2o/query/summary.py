"""Running summaries: older turns folded into a summary so long conversations keep their memory.

When a conversation's history no longer fits the window, the engine folds its oldest turns into
the conversation's summary (stored in ``conversation_summaries``, folded forward at the next
compaction, reused until then). The window then carries the summary and the most recent turns
verbatim; the transcript itself is never trimmed.

A chat model may write the summary itself (a ``summarize`` method, one separate model call);
otherwise, and for the built-in model, the summary is extractive (:func:`extractive_summary`).
"""

from __future__ import annotations

from search2o.providers.chat import ChatMessage

__all__ = ["SUMMARY_HEADER", "extractive_summary"]

SUMMARY_HEADER = "Summary of the earlier conversation:"
_SAID, _ASKED, _ANSWER = "User said: ", "User asked: ", "Answer: "
_LINE_CHARS = 400


def _line(message: ChatMessage) -> str | None:
    text = " ".join(message.content.split())
    if not text:
        return None
    if len(text) > _LINE_CHARS:
        text = text[: _LINE_CHARS - 1].rsplit(" ", 1)[0] + "…"
    if message.role == "user":
        return (_ASKED if "?" in text else _SAID) + text
    if message.role == "assistant":
        first = text.split(". ")[0]
        return _ANSWER + (first if first.endswith(".") else first + ".")
    return None


def extractive_summary(previous: str, messages: list[ChatMessage], max_chars: int) -> str:
    """Fold ``messages`` into ``previous`` (an earlier extractive summary) within ``max_chars``.

    One line per message, oldest first: ``User said:`` for the user's statements, ``User
    asked:`` for messages with a question mark, ``Answer:`` with the first sentence of an
    answer (each line at most 400 characters). When the lines exceed ``max_chars``, whole
    lines are dropped oldest first, answers before questions before statements: what the user
    told the assistant (a name, a number, a preference) is kept longest, since no document
    holds it.
    """
    lines = [line for line in previous.splitlines() if line.strip()]
    lines += [line for m in messages if (line := _line(m)) is not None]
    for prefix in (_ANSWER, _ASKED, _SAID):
        index = 0
        while sum(len(line) + 1 for line in lines) > max_chars and index < len(lines):
            if lines[index].startswith(prefix):
                del lines[index]
            else:
                index += 1
    while lines and sum(len(line) + 1 for line in lines) > max_chars:
        del lines[0]  # lines of an unknown kind (a model-written summary), oldest first
    return "\n".join(lines)
