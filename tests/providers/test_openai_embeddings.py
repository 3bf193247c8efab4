"""The OpenAI-compatible embedder against a loopback server speaking OpenAI's wire format.

A paid embeddings API cannot run here, so a small HTTP server replays the documented response
shape of ``POST /v1/embeddings`` (OpenAI API reference, "Create embeddings").
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from search2o.errors import ProviderError
from search2o.knowledge.access import AccessList
from search2o.knowledge.store import KnowledgeStore
from search2o.providers.embeddings import OpenAIEmbedder, build_embedder
from search2o.providers.settings import EmbeddingSettings
from search2o.storage.db import Database


def _vector(text: str, dimension: int) -> list[float]:
    """A deterministic bag-of-letters vector, so similar texts get similar vectors."""
    out = [0.0] * dimension
    for word in text.lower().split():
        for ch in word:
            out[ord(ch) % dimension] += 1.0
    return out


class _Server:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.fail_next = 0
        self.dimension = 8
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                owner.requests.append(
                    {"path": self.path, "body": body, "auth": self.headers.get("authorization")}
                )
                if owner.fail_next:
                    owner.fail_next -= 1
                    self._send(
                        500, {"error": {"message": "upstream exploded", "type": "server_error"}}
                    )
                    return
                items = [
                    {"object": "embedding", "index": i, "embedding": _vector(t, owner.dimension)}
                    for i, t in enumerate(body["input"])
                ]
                self._send(
                    200,
                    {
                        "object": "list",
                        "data": list(reversed(items)),  # the API does not promise order: use index
                        "model": body["model"],
                        "usage": {"prompt_tokens": 3, "total_tokens": 3},
                    },
                )

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server()
    thread = threading.Thread(target=srv.httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.httpd.shutdown()
        srv.httpd.server_close()


def _settings(server: _Server, **extra: Any) -> EmbeddingSettings:
    return EmbeddingSettings(
        provider="openai",
        model="test-embed",
        base_url=server.url,
        api_key="sk-test",
        batch_size=2,
        max_retries=0,
        **extra,
    )


def test_embeds_in_batches_in_input_order_as_unit_vectors(server: _Server) -> None:
    embedder = build_embedder(_settings(server))
    assert isinstance(embedder, OpenAIEmbedder)
    texts = ["alpha", "beta gamma", "delta", "epsilon", "zeta"]
    vectors = embedder.embed(texts)
    assert vectors.shape == (5, 8) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    expected = np.array([_vector(t, 8) for t in texts], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    assert np.allclose(vectors, expected, atol=1e-6)
    assert [len(r["body"]["input"]) for r in server.requests] == [2, 2, 1]
    assert all(r["path"] == "/v1/embeddings" for r in server.requests)
    assert server.requests[0]["auth"] == "Bearer sk-test"
    assert embedder.model_id == "openai/test-embed"
    assert embedder.dimension == 8  # probed with one request
    assert embedder.count_tokens("x" * 30) == 10  # conservative estimate without a tokenizer


def test_configured_dimensions_are_sent(server: _Server) -> None:
    embedder = build_embedder(_settings(server, dimensions=8))
    embedder.embed(["one"])
    assert server.requests[-1]["body"]["dimensions"] == 8
    assert embedder.dimension == 8


def test_server_errors_become_provider_errors_after_retries(server: _Server) -> None:
    server.fail_next = 1
    with pytest.raises(ProviderError, match="embedding endpoint failed"):
        build_embedder(_settings(server)).embed(["boom"])
    server.fail_next = 1
    retrying = build_embedder(_settings(server).model_copy(update={"max_retries": 1}))
    assert retrying.embed(["recovers"]).shape == (1, 8)


def test_unreachable_endpoint_is_a_provider_error() -> None:
    settings = EmbeddingSettings(
        provider="openai", base_url="http://127.0.0.1:9/v1", api_key="k", max_retries=0, timeout_s=2
    )
    with pytest.raises(ProviderError):
        build_embedder(settings).embed(["x"])


def test_knowledge_store_runs_on_an_openai_compatible_embedder(
    server: _Server, database: Database, tmp_path: Path
) -> None:
    from search2o.accounts import Principal
    from search2o.knowledge.settings import KnowledgeSettings

    (tmp_path / "a.md").write_text("# Bikes\n\nbicycle racks stand by the door\n")
    (tmp_path / "b.md").write_text("# Food\n\nlunch is at noon in the cafeteria\n")
    store = KnowledgeStore(database, build_embedder(_settings(server)), KnowledgeSettings())
    summary = store.ingest_paths([tmp_path], AccessList())
    assert summary.count("added") == 2
    hits = store.search(Principal(1, "a@example.com", ()), "bicycle racks", 2).hits
    assert Path(hits[0].source).name == "a.md"
