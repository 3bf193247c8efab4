"""An answer as Telegram messages: plain text with message entities, never parse modes.

Telegram formats a message by ``entities`` (Bot API "MessageEntity"): each has a ``type``, an
``offset`` and a ``length`` counted in **UTF-16 code units** (an emoji outside the BMP is two,
a CJK character one), so the text itself is sent as it is and nothing in it — a document's
title, the model's words — can turn into markup; there is no MarkdownV2 escaping to get
wrong. Citations ``[n]`` with a URL become ``text_link`` entities; the Sources block is an
``expandable_blockquote`` (collapsed until tapped) under a ``bold`` heading; the footer is
``italic``. A message holds at most 4,096 UTF-16 code units (Bot API "sendMessage": "1-4096
characters after entities parsing"), so a longer answer is split at a paragraph break, a line
break or a space — never inside a link — and each piece keeps the entities that fall in it
(a blockquote cut in two continues in the next piece).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MAX_UNITS", "Part", "render_answer", "render_notice", "split", "utf16_len"]

MAX_UNITS = 4096
_MARKER = re.compile(r"\[(\d{1,3})\]")
# Entities a cut must not fall inside (a link's label, a heading): they would read wrong.
_WHOLE = frozenset({"text_link", "bold", "italic"})


def utf16_len(text: str) -> int:
    """Return the length of ``text`` in UTF-16 code units (Telegram's unit for offsets)."""
    return len(text.encode("utf-16-le")) // 2


@dataclass(frozen=True)
class _Span:
    """An entity over ``text[start:end]`` (code point indices, converted when sent)."""

    start: int
    end: int
    kind: str
    url: str | None = None


@dataclass(frozen=True)
class Part:
    """One message: its ``text`` and its ``entities`` (Bot API objects, UTF-16 offsets)."""

    text: str
    entities: list[dict[str, Any]] = field(default_factory=list)


def _safe_url(url: str) -> str | None:
    # Only web links become text_link entities; anything else stays plain text.
    url = url.strip()
    return url if re.match(r"https?://", url) and len(url) <= 2048 else None


def render_answer(
    text: str, citations: list[dict[str, Any]], *, footer: str | None = None
) -> list[Part]:
    """Render an answer with its citations as one or more messages.

    Args:
        text: the answer (plain text; ``[n]`` marks citation ``n``).
        citations: the ``done`` event's citations (``number``, ``title``, ``source``,
            ``url`` or ``None``, ``heading_path``).
        footer: a line under the answer (whose rights it used, how to link); plain text.

    Returns:
        The messages, each at most :data:`MAX_UNITS` UTF-16 code units.

    """
    urls = {
        int(c["number"]): u
        for c in citations
        if "number" in c and (u := _safe_url(str(c.get("url") or ""))) is not None
    }
    body = text.strip() or "…"
    spans: list[_Span] = []
    for match in _MARKER.finditer(body):
        url = urls.get(int(match.group(1)))
        if url is not None:
            spans.append(_Span(match.start(), match.end(), "text_link", url))
    out = body
    if citations:
        out += "\n\n"
        quote_start = len(out)
        spans.append(_Span(len(out), len(out) + len("Sources"), "bold"))
        out += "Sources"
        for citation in citations:
            title = str(citation.get("title") or citation.get("source") or "source")
            title = " ".join(title.split())
            out += f"\n[{citation.get('number')}] "
            url = _safe_url(str(citation.get("url") or ""))
            if url is not None:
                spans.append(_Span(len(out), len(out) + len(title), "text_link", url))
            out += title
            path = citation.get("heading_path") or []
            heading = " \u203a ".join(" ".join(str(h).split()) for h in path)
            if heading:
                out += f" — {heading}"
        spans.append(_Span(quote_start, len(out), "expandable_blockquote"))
    if footer:
        out += "\n\n"
        spans.append(_Span(len(out), len(out) + len(footer), "italic"))
        out += footer
    return split(out, spans)


def render_notice(text: str) -> list[Part]:
    """Render a short notice (an error, a link prompt) as plain messages."""
    return split(text.strip() or "…", [])


def split(text: str, spans: list[_Span], limit: int = MAX_UNITS) -> list[Part]:
    """Cut ``text`` into messages of at most ``limit`` UTF-16 units, entities carried along.

    A cut falls at the last paragraph break, line break or space that fits and is not inside
    a link, bold or italic entity; a piece without one is cut at the limit (before a link that
    would straddle it). Other entities (a blockquote) are clipped to each piece.
    """
    parts: list[Part] = []
    start = 0
    while True:
        fit = _fit(text, start, limit)
        if fit == len(text):
            cut, resume = fit, fit
        else:
            cut = _cut(text, start, fit, spans)
            resume = cut
            while resume < len(text) and text[resume] in " \n":
                resume += 1
        piece = text[start:cut].rstrip()
        if piece:
            parts.append(Part(piece, _entities(piece, start, spans)))
        if cut >= len(text) or resume >= len(text):
            break
        start = resume
    return parts or [Part("…")]


def _fit(text: str, start: int, limit: int) -> int:
    """Return the largest end such that ``text[start:end]`` is at most ``limit`` UTF-16 units."""
    units, end = 0, start
    while end < len(text):
        step = 2 if ord(text[end]) > 0xFFFF else 1
        if units + step > limit:
            break
        units += step
        end += 1
    return end


def _cut(text: str, start: int, fit: int, spans: list[_Span]) -> int:
    def inside(index: int) -> bool:
        return any(s.kind in _WHOLE and s.start < index < s.end for s in spans)

    for breaker in ("\n\n", "\n", " "):
        index = text.rfind(breaker, start + 1, fit)
        while index > start and inside(index):
            index = text.rfind(breaker, start + 1, index)
        if index > start:
            return index
    for s in spans:  # a hard cut moves before an entity it would split
        if s.kind in _WHOLE and s.start < fit < s.end and s.start > start:
            return s.start
    return fit


def _entities(piece: str, start: int, spans: list[_Span]) -> list[dict[str, Any]]:
    """Return the Bot API entities of ``piece`` (which begins at ``start`` of the whole text)."""
    found: list[dict[str, Any]] = []
    end = start + len(piece)
    for s in spans:
        lo, hi = max(s.start, start), min(s.end, end)
        if lo >= hi:
            continue
        offset = utf16_len(piece[: lo - start])
        entity: dict[str, Any] = {
            "type": s.kind,
            "offset": offset,
            "length": utf16_len(piece[lo - start : hi - start]),
        }
        if s.url is not None:
            entity["url"] = s.url
        found.append(entity)
    # Telegram expects entities ordered by offset (an enclosing one first).
    return sorted(found, key=lambda e: (e["offset"], -e["length"]))
