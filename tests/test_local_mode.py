"""Local single-user mode stays on loopback unless the operator accepts the risk by name.

Without a token every caller of a local-mode server is the local admin, so the server refuses
to start on a non-loopback address (``search2o serve`` and ``create_app`` alike), and a
local-mode app answers tokenless requests only from loopback peers, whatever ASGI server runs
it and wherever that server binds.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from search2o import accounts
from search2o.api.app import create_app
from search2o.config import Settings
from search2o.errors import ConfigError
from search2o.runtime import Runtime
from tests.test_cli import SCRIPT

REMOTE_PEER = ("203.0.113.7", 50123)  # TEST-NET-3 (RFC 5737): never a real neighbour


def test_create_app_refuses_local_mode_beyond_loopback(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", host="0.0.0.0")
    with pytest.raises(ConfigError) as caught:
        create_app(settings)
    message = caught.value.message
    assert "0.0.0.0" in message and "SEARCH2O_AUTH_MODE=token" in message
    assert "--insecure-local-mode" in message and "SEARCH2O_INSECURE_LOCAL_MODE" in message
    assert not (tmp_path / "data").exists()  # refused before anything was opened


@pytest.mark.parametrize(
    "update",
    [
        {"host": "127.0.0.2"},
        {"host": "::1"},
        {"host": "0.0.0.0", "auth_mode": "token"},
        {"host": "0.0.0.0", "insecure_local_mode": True},
    ],
)
def test_create_app_allows_loopback_token_mode_or_the_explicit_flag(
    tmp_path: Path, update: dict[str, object]
) -> None:
    settings = Settings(data_dir=tmp_path / "data", **update)  # type: ignore[arg-type]
    app = create_app(settings)
    app.state.runtime.close()


@pytest.fixture
def local_runtime(tmp_path: Path, database_url: str) -> Iterator[Runtime]:
    """A local-mode runtime on each backend (no embedding model needed)."""
    runtime = Runtime(Settings(data_dir=tmp_path / "data", database_url=database_url))
    try:
        yield runtime
    finally:
        runtime.close()


def _get(runtime: Runtime, peer: tuple[str, int], token: str | None = None) -> httpx.Response:
    """``GET /v1/documents`` through the real app, arriving from ``peer`` (no socket needed)."""
    app = create_app(runtime.settings, runtime=runtime)
    headers = {"Authorization": f"Bearer {token}"} if token else {}

    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, client=peer)
        async with httpx.AsyncClient(transport=transport, base_url="http://search2o") as client:
            return await client.get("/v1/documents", headers=headers)

    return asyncio.run(call())


def test_a_local_mode_app_answers_tokenless_requests_from_loopback_only(
    local_runtime: Runtime,
) -> None:
    assert _get(local_runtime, ("127.0.0.1", 40000)).status_code == 200
    assert _get(local_runtime, ("::1", 40000)).status_code == 200
    refused = _get(local_runtime, REMOTE_PEER)
    assert refused.status_code == 401
    assert "SEARCH2O_AUTH_MODE=token" in refused.json()["detail"]["message"]


def test_the_insecure_flag_lets_remote_peers_act_as_the_local_user(
    local_runtime: Runtime,
) -> None:
    local_runtime.settings = local_runtime.settings.model_copy(update={"insecure_local_mode": True})
    assert _get(local_runtime, REMOTE_PEER).status_code == 200


def test_a_token_printed_in_local_mode_never_opens_a_token_mode_server(
    local_runtime: Runtime,
) -> None:
    # The token a local-mode `serve` prints, while a token-mode server shares the database.
    with local_runtime.database.session() as session:
        token = accounts.local_mode_token(session, local_runtime.settings.local_user_email)
    assert _get(local_runtime, REMOTE_PEER, token).status_code == 200  # a token needs no loopback
    local_runtime.settings = local_runtime.settings.model_copy(update={"auth_mode": "token"})
    refused = _get(local_runtime, ("127.0.0.1", 40000), token)
    assert refused.status_code == 401
    assert refused.json()["detail"]["error"] == "AuthenticationError"


# ---------------------------------------------------------------------------------------------
# search2o serve
# ---------------------------------------------------------------------------------------------


def _serve(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SEARCH2O_")}
    clean.update(SEARCH2O_DATA_DIR=str(tmp_path / "data"), HF_HUB_OFFLINE="1", NO_COLOR="1", **env)
    return subprocess.run(
        [str(SCRIPT), "serve", *args], capture_output=True, text=True, env=clean, timeout=60
    )


@pytest.mark.parametrize(
    ("args", "env"),
    [(("--host", "0.0.0.0"), {}), ((), {"SEARCH2O_HOST": "::"})],
)
def test_serve_refuses_local_mode_beyond_loopback_with_one_line(
    tmp_path: Path, args: tuple[str, ...], env: dict[str, str]
) -> None:
    proc = _serve(tmp_path, *args, "--port", "1", **env)
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.splitlines()
    assert line.startswith("error: host: local single-user mode on ")
    assert "SEARCH2O_AUTH_MODE=token" in line and "--insecure-local-mode" in line
    assert proc.stdout == ""


def test_serve_with_the_insecure_flag_passes_the_local_mode_check(tmp_path: Path) -> None:
    # The port is taken, so the command stops at the next check without ever serving.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        flag = _serve(tmp_path, "--host", "0.0.0.0", "--port", port, "--insecure-local-mode")
        setting = _serve(
            tmp_path, "--host", "0.0.0.0", "--port", port, SEARCH2O_INSECURE_LOCAL_MODE="true"
        )
    for proc in (flag, setting):
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.splitlines() == [
            f"error: port: cannot listen on 0.0.0.0:{port}: Address already in use"
        ]
