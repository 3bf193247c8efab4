"""The ``knowledge`` settings section: chunking, search and the bounds per document."""

from __future__ import annotations

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    model_validator,
)

__all__ = ["KnowledgeSettings"]


class KnowledgeSettings(BaseModel):
    """Chunking, search and ingestion limits.

    The ``max_*`` bounds of one document (besides ``max_file_bytes``) stop a hostile file —
    a decompression bomb, a page that repeats one drawing thousands of times — before it costs
    more than a large real document: a document over any of them is skipped with a reason that
    names the setting. Defaults are sized for documents of about 2,000 pages; the reasoning
    and measurements are in docs/knowledge-store.md ("Bounds per document").
    """

    model_config = ConfigDict(extra="forbid")

    chunk_tokens: int = Field(default=200, ge=16, le=8192)
    overlap_tokens: int = Field(default=40, ge=0, le=4096)
    max_file_bytes: int = Field(default=50 * 1024 * 1024, ge=1)
    max_extracted_chars: int = Field(
        default=5_000_000, ge=1, description="text characters one document may yield"
    )
    max_chunks_per_document: int = Field(
        default=10_000, ge=1, description="chunks (so embedding calls' inputs) per document"
    )
    max_pages: int = Field(default=2_000, ge=1, description="pages of a PDF, counted first")
    max_unpacked_bytes: int = Field(
        default=128 * 1024 * 1024,
        ge=1,
        description="bytes a document unpacks to: a DOCX's ZIP entries (central directory "
        "sizes), a PDF's decoded page content streams",
    )
    max_xml_bytes: int = Field(
        default=16 * 1024 * 1024,
        ge=1,
        description="uncompressed bytes of a DOCX's XML parts, which are parsed into a tree",
    )
    max_compression_ratio: int = Field(
        default=100,
        ge=1,
        description="largest uncompressed/compressed ratio of a DOCX part over 1 MiB or a PDF "
        "page's content stream (Apache POI's ZipSecureFile refuses beyond 100 too)",
    )
    max_extract_seconds: float = Field(
        default=120.0,
        gt=0,
        description="CPU seconds of the ingesting thread one document's extraction may take",
    )
    isolated_parse_bytes: int = Field(
        default=1024 * 1024,
        ge=0,
        description="a PDF or DOCX of at least this many bytes is parsed in a child process, "
        "whose memory goes back to the system when it exits (0: every one)",
    )
    parse_processes: int = Field(
        default=2, ge=1, le=64, description="child parser processes at once; more parses wait"
    )
    parse_memory_mb: int = Field(
        default=2048,
        ge=256,
        le=1024 * 1024,
        description="address space of one child parser process (RLIMIT_AS), in MB",
    )
    max_title_chars: int = Field(
        default=300, ge=1, le=500, description="longest title or heading kept (then cut with …)"
    )
    max_query_chars: int = Field(default=2000, ge=1)
    max_k: int = Field(default=100, ge=1, le=1000)
    # Cormack, Clarke & Büttcher (SIGIR 2009) use k = 60 in Reciprocal Rank Fusion.
    rrf_k: int = Field(default=60, ge=1)
    candidates: int = Field(default=50, ge=1, le=2000, description="per-retriever depth before RRF")
    lexical_common_fraction: float = Field(
        default=0.01,
        gt=0,
        le=1,
        description="a term in more than this share of chunks is common (Lucene CommonTermsQuery)",
    )
    lexical_common_min_rows: int = Field(
        default=1000, ge=0, description="a term in at most this many chunks is never common"
    )
    hnsw_ef_search: int = Field(default=100, ge=1, le=1000)
    exact_search_max_chunks: int = Field(
        default=20_000,
        ge=0,
        description="on PostgreSQL, a caller allowed at most this many chunks is searched exactly",
    )

    @model_validator(mode="after")
    def _overlap_below_chunk(self) -> KnowledgeSettings:
        if self.overlap_tokens >= self.chunk_tokens // 2:
            raise ValueError("overlap_tokens must be below half of chunk_tokens")
        return self
