"""An answer as Mattermost Markdown posts: citations as footnote links, nothing live.

Mattermost renders a post's ``message`` as Markdown (Mattermost docs, "Formatting text"). A
citation ``[n]`` with a web URL becomes the link ``[[n]](url)``; a Sources list follows, one
line per citation, ``[n] [title](url) — heading path``, and the footer is in italics. What the
model wrote or a document's title could otherwise act: an image ``![](url)`` is fetched by every
reader's client, and ``@channel``, ``@here``, ``@all`` or ``@user`` notify people — so images
are shown as text and every ``@`` before a name gets a zero-width space (no mention). Titles
are escaped so they cannot open or close a link. A post holds at most 16,383 characters
(Mattermost's ``PostMessageMaxRunesV2``), so a longer answer is split at a paragraph break, a
line break or a space, never inside a link.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["MAX_CHARS", "render_answer", "render_notice", "split"]

MAX_CHARS = 16_383
_MARKER = re.compile(r"\[(\d{1,3})\]")
_MENTION = re.compile(r"@(?=[\w.\-])")
_IMAGE = re.compile(r"!\[")
_LINK_TEXT = re.compile(r"([\[\]\\*_`<>])")
_A_LINK = re.compile(r"\[[^\]\n]*\]\([^)\s]*\)")


def inert(text: str) -> str:
    """Return ``text`` with no image and no mention left (module docstring)."""
    return _MENTION.sub("@\u200b", _IMAGE.sub("!\\[", text))


def _safe_url(url: str) -> str | None:
    # Only web links become links; anything else stays plain text.
    url = url.strip()
    ok = re.match(r"https?://[^\s()<>]+$", url) is not None and len(url) <= 2048
    return url if ok else None


def render_answer(
    text: str, citations: list[dict[str, Any]], *, footer: str | None = None
) -> list[str]:
    """Render an answer with its citations as one or more post messages.

    Args:
        text: the answer (``[n]`` marks citation ``n``).
        citations: the ``done`` event's citations (``number``, ``title``, ``source``,
            ``url`` or ``None``, ``heading_path``).
        footer: a line under the answer (whose rights it used, how to link).

    Returns:
        The messages, each at most :data:`MAX_CHARS` characters.

    """
    urls = {
        int(c["number"]): u
        for c in citations
        if "number" in c and (u := _safe_url(str(c.get("url") or ""))) is not None
    }

    def link(match: re.Match[str]) -> str:
        url = urls.get(int(match.group(1)))
        return f"[\\[{match.group(1)}\\]]({url})" if url else match.group(0)

    out = _MARKER.sub(link, inert(text.strip() or "…"))
    if citations:
        lines = ["", "**Sources**"]
        for citation in citations:
            title = " ".join(str(citation.get("title") or citation.get("source") or "").split())
            title = _LINK_TEXT.sub(r"\\\1", inert(title or "source"))
            url = _safe_url(str(citation.get("url") or ""))
            line = f"\\[{citation.get('number')}\\] " + (f"[{title}]({url})" if url else title)
            path = citation.get("heading_path") or []
            heading = " \u203a ".join(" ".join(str(h).split()) for h in path)
            if heading:
                line += " — " + _LINK_TEXT.sub(r"\\\1", inert(heading))
            lines.append(line)
        out += "\n" + "\n".join(lines)
    if footer:
        out += f"\n\n_{footer}_"
    return split(out)


def render_notice(text: str) -> list[str]:
    """Render a short notice (an error, a link prompt) as inert posts."""
    return split(inert(text.strip() or "…"))


def split(text: str, limit: int = MAX_CHARS) -> list[str]:
    """Cut ``text`` into pieces of at most ``limit`` characters (module docstring)."""
    pieces: list[str] = []
    while len(text) > limit:
        head = text[:limit]
        inside = [m.span() for m in _A_LINK.finditer(text) if m.start() < limit < m.end()]
        cut = -1
        for mark in ("\n\n", "\n", " "):
            cut = head.rfind(mark)
            if cut > 0 and not any(a < cut < b for a, b in inside):
                break
            cut = -1
        if cut <= 0:
            cut = inside[0][0] if inside and inside[0][0] > 0 else limit
        pieces.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    pieces.append(text)
    return [p for p in pieces if p] or ["…"]
