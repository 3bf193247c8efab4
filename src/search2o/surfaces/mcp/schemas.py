"""What the MCP tools return: each model is a tool's ``outputSchema`` and structured content.

``search`` and ``fetch`` have exactly the shapes OpenAI's connectors and deep research read
(OpenAI platform docs, "Building MCP servers for ChatGPT and API integrations": ``search``
returns ``{"results": [{"id", "title", "url"}]}``, ``fetch`` returns ``{"id", "title", "text",
"url", "metadata"}``). Every string is text taken from documents: clients render it as text.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

__all__ = ["FetchedDocument", "Finding", "Findings", "SearchResult", "SearchResults"]


class SearchResult(BaseModel):
    """One document a search found."""

    id: str = Field(description="the document's id; pass it to `fetch` for its text")
    title: str = Field(description="the document's title")
    url: str = Field(description="the document's URL on this server, to cite")


class SearchResults(BaseModel):
    """The documents a search found, best first."""

    results: list[SearchResult]


class FetchedDocument(BaseModel):
    """One document's text as indexed."""

    id: str = Field(description="the document's id")
    title: str = Field(description="the document's title")
    text: str = Field(description="the document's text, headings as Markdown headings")
    url: str = Field(description="the document's URL on this server, to cite")
    metadata: dict[str, str] = Field(
        description="source (path or upload name), media_type, updated_at (ISO 8601), "
        "truncated ('true' when the text was cut at the server's limit)"
    )


class Finding(BaseModel):
    """One passage a search found, with where it comes from."""

    id: str = Field(description="the document's id; pass it to `fetch` for the whole text")
    title: str = Field(description="the document's title")
    source: str = Field(description="the document's path or upload name")
    heading_path: list[str] = Field(description="the headings above the passage, outermost first")
    text: str = Field(description="the passage, quoted from the document")
    score: float = Field(description="relevance: fused rank score, higher is better")
    url: str = Field(description="the document's URL on this server, to cite")


class Findings(BaseModel):
    """Passages ranked best first."""

    findings: list[Finding]
