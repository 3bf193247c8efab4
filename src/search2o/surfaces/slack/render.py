"""An answer as a Slack message: escaped mrkdwn, native citation links, a Sources block.

Slack's formatting rules (Slack API docs, "Formatting text for app surfaces"): ``&``, ``<`` and
``>`` are control characters and are sent as ``&amp;`` ``&lt;`` ``&gt;``; a link is
``<url|label>``, so a ``|`` or ``>`` inside the URL is percent-encoded (RFC 3986). Block Kit
limits (Slack API docs, "Blocks" reference): a ``section`` text at most 3,000 characters, a
``context`` at most 10 elements, a message at most 50 blocks; the top-level ``text`` (the
notification and fallback) is kept to 3,000 characters.

An answer's text arrives as plain text from the model: it is escaped whole, so nothing in it
(or in a document's title) can form a mention, a link or a broadcast; only the ``[n]`` markers
of citations that have a URL become links.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FEEDBACK_ACTIONS",
    "SECTION_CHARS",
    "Rendered",
    "escape",
    "link_url",
    "render_answer",
    "render_notice",
    "split_text",
]

SECTION_CHARS = 3000
MAX_BLOCKS = 50
CONTEXT_ELEMENTS = 10
FALLBACK_CHARS = 3000
FEEDBACK_ACTIONS = ("search2o_feedback_up", "search2o_feedback_down")
_MARKER = re.compile(r"\[(\d{1,3})\]")


@dataclass(frozen=True)
class Rendered:
    """A message to send: ``text`` (fallback, notifications) and ``blocks`` (Block Kit)."""

    text: str
    blocks: list[dict[str, Any]]

    def shortened(self) -> Rendered:
        """Return the message cut to its first section and the rest of its blocks.

        For a message Slack refused as ``msg_too_long``: the answer's start, a note that it
        was cut, its Sources, footer and buttons.
        """
        sections = [b for b in self.blocks if b["type"] == "section"]
        tail = [b for b in self.blocks if b["type"] != "section"]
        first = sections[0]["text"]["text"] if sections else ""
        note = _section(split_text(first, SECTION_CHARS - 40)[0] + " … _(answer cut)_")
        return Rendered(self.text[:1000], [note, *tail])


def escape(text: str) -> str:
    """Escape Slack's control characters ``& < >`` (``&`` first)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def link_url(url: str) -> str:
    """Return ``url`` fit for ``<url|label>``: ``| < >`` and spaces encoded, ``&`` escaped."""
    encoded = url.replace("|", "%7C").replace("<", "%3C").replace(">", "%3E").replace(" ", "%20")
    return encoded.replace("&", "&amp;")


def split_text(text: str, limit: int = SECTION_CHARS) -> list[str]:
    """Split ``text`` into pieces of at most ``limit`` characters.

    Cuts at the last paragraph break, line break or space before the limit, never inside a
    ``<...>`` link; a piece without any of those is cut at the limit.
    """
    pieces: list[str] = []
    rest = text
    while len(rest) > limit:
        window = rest[:limit]
        opened = window.rfind("<")
        if opened > window.rfind(">"):  # a link starts in the window and ends after it
            window = window[:opened] or window
        cut = max(window.rfind("\n\n"), window.rfind("\n"), window.rfind(" "))
        cut = cut if cut > 0 else len(window)
        pieces.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    if rest or not pieces:
        pieces.append(rest)
    return pieces


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _context(texts: list[str]) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": t} for t in texts]}


def _source_line(citation: dict[str, Any]) -> str:
    number = citation.get("number")
    title = escape(str(citation.get("title") or citation.get("source") or "source"))
    url = citation.get("url")
    label = (
        f"<{link_url(str(url))}|{title}>"
        if url and len(link_url(str(url))) <= SECTION_CHARS // 2
        else title
    )
    heading = " \u203a ".join(escape(str(h)) for h in citation.get("heading_path") or [])
    line = f"[{number}] {label}" + (f" — {heading}" if heading else "")
    return line[:SECTION_CHARS]


def render_answer(
    text: str,
    citations: list[dict[str, Any]],
    *,
    footer: str | None = None,
    feedback: str | None = None,
) -> Rendered:
    """Render an answer with its citations.

    Args:
        text: the answer (plain text; ``[n]`` marks citation ``n``).
        citations: the answer's citations (``number``, ``title``, ``source``, ``url`` or
            ``None``, ``heading_path``), as the chat's ``done`` event gives them.
        footer: a line under the answer (whose rights it used, how to link); plain text.
        feedback: the value of the thumbs buttons (``None``: no buttons).

    Returns:
        At most 50 blocks: the answer's sections (cut with "…" past what fits), a Sources
        context, the footer, the buttons.

    """
    urls = {int(c["number"]): str(c["url"]) for c in citations if c.get("url") and "number" in c}

    def linked(match: re.Match[str]) -> str:
        url = urls.get(int(match.group(1)))
        # a link too long for a section stays a plain marker (the Sources line still names it)
        if url is None or len(link_url(url)) > SECTION_CHARS // 2:
            return match.group(0)
        return f"<{link_url(url)}|[{match.group(1)}]>"

    body = _MARKER.sub(linked, escape(text.strip()) or "…")
    tail: list[dict[str, Any]] = []
    if citations:
        lines = [_source_line(c) for c in citations]
        if len(lines) > CONTEXT_ELEMENTS:  # the last element holds the rest
            lines = [*lines[: CONTEXT_ELEMENTS - 1], "\n".join(lines[CONTEXT_ELEMENTS - 1 :])]
        tail.append(_context([f"*Sources* · {lines[0]}", *lines[1:]]))
    if footer:
        tail.append(_context([escape(footer)]))
    if feedback is not None:
        tail.append(
            {
                "type": "actions",
                "elements": [
                    {
                        "type": "button",
                        "action_id": action,
                        "text": {"type": "plain_text", "text": label, "emoji": True},
                        "value": f"{feedback}:{rating}",
                    }
                    for action, label, rating in zip(
                        FEEDBACK_ACTIONS, (":+1:", ":-1:"), ("up", "down"), strict=True
                    )
                ],
            }
        )
    sections = split_text(body)
    room = MAX_BLOCKS - len(tail)
    if len(sections) > room:
        sections = [*sections[: room - 1], sections[room - 1][: SECTION_CHARS - 1] + "…"]
    fallback = escape(text.strip())
    if len(fallback) > FALLBACK_CHARS:
        fallback = fallback[: FALLBACK_CHARS - 1] + "…"
    return Rendered(fallback or "…", [_section(s) for s in sections] + tail)


def render_notice(text: str) -> Rendered:
    """Render a short notice (an error, a link prompt) as one escaped section."""
    safe = escape(text)[:SECTION_CHARS]
    return Rendered(safe, [_section(safe)])
