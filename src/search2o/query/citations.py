"""Citation numbers: one per source section per turn, and a stream filter that checks them.

Every tool result is registered before the model answers: each section of a document (the
document and the heading path its chunk sits under, :func:`section_key`) or web page gets the
next number the first time it appears, so the same section is never numbered twice, and
several chunks of it share the number. Two sections of one document get two numbers, each with
its own heading: a sentence quoted from a handbook's "OK" list is cited as "OK", never under
the "Not OK" heading of a better-ranked chunk of the same document. While the answer streams,
:class:`CitationFilter` finds ``[n]`` markers (also ``[1, 2]`` and ``[1][2]``): a number that
was registered is kept and reported once; a number that points outside what was retrieved is
removed from the text.

What the reader sees is renumbered in order of first use: the answer's first source is [1],
the next new one [2], whatever their retrieval numbers were (an answer citing only the third
passage shows [1], not [3]). ``retrieval_number`` keeps the number the model saw.

A citation's ``url`` is a link target that clients may follow, so it is only ever an
``http``/``https`` address: :func:`safe_link` decides, and :class:`Citation` applies it to
whatever it is given. Any other address (``javascript:``, ``data:``, ...) becomes ``None``;
the source stays readable as plain text in ``source``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

__all__ = ["Citation", "CitationFilter", "CitationRegistry", "safe_link", "section_key"]

# WHATWG URL Standard, "basic URL parser": leading and trailing C0 controls and spaces are
# removed, then every ASCII tab or newline anywhere; a scheme is an ASCII letter followed by
# letters, digits, "+", "-" or ".", up to ":", compared lower-cased.
_OUTER = "".join(chr(c) for c in range(0x21))
_TAB_OR_NEWLINE = re.compile("[\t\n\r]")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
# What may not remain in a link: other controls (C0, DEL, C1), whitespace, and the backslash,
# which browsers read as "/" in http(s) URLs while urllib does not, so the two would disagree
# about the host.
_UNSAFE = re.compile("[\x00-\x20\x7f-\x9f\\\\\u2028\u2029\u00a0]")
_LINK_SCHEMES = frozenset({"http", "https"})
# RFC 9110, 4.1: senders and recipients should support URIs of at least 8000 octets.
_MAX_LINK_CHARS = 8000


def safe_link(url: object) -> str | None:
    r"""Return ``url`` as a browser would read it if it is an http(s) URL with a host, else None.

    The scheme is found as the WHATWG URL Standard's parser finds it (outer C0 controls and
    spaces and inner tabs/newlines removed, case ignored), so `` JaVaScRiPt:``,
    ``java\tscript:`` and ``\x01javascript:`` are all ``javascript:`` and refused. What is
    left must parse with :func:`urllib.parse.urlsplit` to a host (and a valid port), be at most
    8,000 characters long (RFC 9110, 4.1) and hold no control character, whitespace or
    backslash.

    Args:
        url: an address from outside (a web search result), or anything else.

    Returns:
        The cleaned address (outer controls/spaces and tabs/newlines removed), or ``None``.

    """
    if not isinstance(url, str):
        return None
    text = _TAB_OR_NEWLINE.sub("", url.strip(_OUTER))
    scheme = _SCHEME.match(text)
    if scheme is None or scheme.group(1).lower() not in _LINK_SCHEMES:
        return None
    if len(text) > _MAX_LINK_CHARS or _UNSAFE.search(text):
        return None
    try:
        parts = urlsplit(text)
        _ = parts.port  # raises ValueError for a port out of range or not a number
    except ValueError:
        return None
    if not parts.hostname:
        return None
    return text


def section_key(document_id: object, heading_path: list[str] | None) -> str:
    """Return the citation key of one section of a document: ``doc:<id>:<heading path JSON>``.

    Chunks of one document under the same heading path share the key (and so the number);
    ``heading_path`` is the list of headings from the document's top down (``[]`` for text
    before any heading). JSON keeps the key unambiguous whatever the headings contain.
    """
    return f"doc:{document_id}:" + json.dumps(list(heading_path or []), ensure_ascii=False)


@dataclass
class Citation:
    """A numbered source of one answer.

    ``key`` identifies the source (a document's section, :func:`section_key`, or
    ``url:<address>``); ``chunk_ids`` are the chunks of that section the tools returned (empty
    for web pages).
    ``url`` is passed through :func:`safe_link` on creation: a link target or ``None``.
    """

    number: int
    key: str
    title: str
    source: str
    heading_path: list[str] = field(default_factory=list)
    document_id: int | None = None
    chunk_ids: list[int] = field(default_factory=list)
    url: str | None = None
    headings: list[list[str]] = field(default_factory=list)
    retrieval_number: int | None = None

    def __post_init__(self) -> None:
        self.url = safe_link(self.url)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form stored with the message and sent in ``citation`` events.

        ``heading_path`` is the section's (its chunks' heading path); ``headings`` lists the
        heading path of every retrieved chunk under the citation's key, without repeats (one
        path for a document's section; kept for clients that read a list).
        """
        return {
            "number": self.number,
            "retrieval_number": self.retrieval_number or self.number,
            "title": self.title,
            "source": self.source,
            "heading_path": self.heading_path,
            "headings": self.headings,
            "document_id": self.document_id,
            "chunk_ids": self.chunk_ids,
            "url": self.url,
        }


class CitationRegistry:
    """Assigns citation numbers 1, 2, ... to sources in the order tools returned them."""

    def __init__(self) -> None:
        self._by_key: dict[str, Citation] = {}

    def register(
        self,
        key: str,
        *,
        title: str,
        source: str,
        heading_path: list[str] | None = None,
        document_id: int | None = None,
        chunk_id: int | None = None,
        url: str | None = None,
    ) -> int:
        """Return the number of source ``key``, assigning the next one on first sight.

        A later chunk under an already numbered key adds its ``chunk_id`` to that citation.
        """
        citation = self._by_key.get(key)
        if citation is None:
            citation = Citation(
                number=len(self._by_key) + 1,
                key=key,
                title=title,
                source=source,
                heading_path=list(heading_path or []),
                document_id=document_id,
                url=url,
            )
            self._by_key[key] = citation
        if chunk_id is not None and chunk_id not in citation.chunk_ids:
            citation.chunk_ids.append(chunk_id)
        if heading_path and list(heading_path) not in citation.headings:
            citation.headings.append(list(heading_path))
        return citation.number

    def get(self, number: int) -> Citation | None:
        """Return the citation with ``number``, or ``None`` when no source has it."""
        for citation in self._by_key.values():
            if citation.number == number:
                return citation
        return None

    def __len__(self) -> int:
        return len(self._by_key)


_MARKER = re.compile(r"\[(\d{1,3}(?:\s*,\s*\d{1,3})*)\s*\]")
# An unfinished marker at the end of the text so far: held back until it closes, up to a length
# no real marker reaches (then it is plain text, e.g. a long list of numbers in brackets).
_OPEN_TAIL = re.compile(r"\[[\d,\s]{0,200}$")


class CitationFilter:
    """Checks ``[n]`` markers in a streamed answer against a :class:`CitationRegistry`.

    ``feed(text)`` returns ``(safe_text, new_citations)``: text that can be sent now (a possibly
    unfinished marker at the end is held back until the next piece), its markers renumbered in
    order of first use, and the citations used for the first time (with their shown number).
    ``finish()`` flushes what was held back. ``used`` lists every cited source in order of
    first use.
    """

    def __init__(self, registry: CitationRegistry) -> None:
        self._registry = registry
        self._pending = ""
        self._shown: dict[int, Citation] = {}
        self.used: list[Citation] = []
        # Retrieval numbers the model was shown; None = every registered number. A passage that
        # did not fit the window was retrieved but never seen, so it cannot be cited.
        self.allowed: set[int] | None = None

    def feed(self, text: str) -> tuple[str, list[Citation]]:
        """Accept the next piece of the answer; see the class docstring."""
        buffer = self._pending + text
        tail = _OPEN_TAIL.search(buffer)
        if tail is not None:
            self._pending = buffer[tail.start() :]
            buffer = buffer[: tail.start()]
        else:
            self._pending = ""
        return self._rewrite(buffer)

    def finish(self) -> tuple[str, list[Citation]]:
        """Flush the held-back tail (an unfinished marker is sent as plain text)."""
        buffer, self._pending = self._pending, ""
        return self._rewrite(buffer)

    def _rewrite(self, buffer: str) -> tuple[str, list[Citation]]:
        fresh: list[Citation] = []

        def rewrite(match: re.Match[str]) -> str:
            kept = []
            for part in match.group(1).split(","):
                number = int(part)
                shown = self._shown.get(number)
                if shown is None:
                    citation = self._registry.get(number)
                    if citation is None or (
                        self.allowed is not None and number not in self.allowed
                    ):
                        continue
                    shown = replace(
                        citation, number=len(self.used) + 1, retrieval_number=citation.number
                    )
                    self._shown[number] = shown
                    self.used.append(shown)
                    fresh.append(shown)
                kept.append(shown.number)
            return "".join(f"[{n}]" for n in dict.fromkeys(kept))

        text = _MARKER.sub(rewrite, buffer)
        return text, fresh
