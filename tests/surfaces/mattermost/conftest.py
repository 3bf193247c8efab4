"""A search2o server in token mode with Mattermost on, pointed at a fake Mattermost.

The server and its jobs are :mod:`tests.surfaces.environment`'s, shared by every messenger;
the Mattermost server is :class:`~tests.surfaces.mattermost.fake_mattermost.FakeMattermost`,
also served on loopback. Every test gets a fresh database on each backend.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from search2o.surfaces.mattermost.listener import Listener
from search2o.surfaces.mattermost.surface import pipeline, rest_api
from tests.conftest import MemoEmbedder, free_port
from tests.jobs.conftest import wait_until
from tests.surfaces.environment import SurfaceEnv, serve_on, serve_runtime, surface_settings
from tests.surfaces.mattermost.fake_mattermost import BOT_TOKEN, COMMAND_TOKEN, FakeMattermost


class MattermostEnv(SurfaceEnv[FakeMattermost]):
    """The server, its runtime, the fake Mattermost and the chat model of one test."""

    @property
    def base(self) -> str:
        return f"{self.http.base_url}".rstrip("/")


MattermostFactory = Callable[..., MattermostEnv]


@pytest.fixture
def fake_mattermost() -> Iterator[FakeMattermost]:
    """The fake Mattermost, served on a loopback port."""
    fake = FakeMattermost()
    port = free_port()
    with serve_on(fake.app(), port):
        fake.url = f"http://127.0.0.1:{port}"
        try:
            yield fake
        finally:
            fake.drop()


@pytest.fixture
def mattermost_env(
    tmp_path: Path, database_url: str, embedder: MemoEmbedder, fake_mattermost: FakeMattermost
) -> Iterator[MattermostFactory]:
    """Start the server: ``mattermost_env(script, builtin, jobs_in_server, **mattermost)``.

    ``builtin``: the built-in chat model and the handbook instead of a scripted model.
    """
    with contextlib.ExitStack() as stack:

        def start(
            script: Any = None,
            builtin: bool = False,
            jobs_in_server: bool = True,
            **mattermost: Any,
        ) -> MattermostEnv:
            port = free_port()
            section: dict[str, Any] = {
                "url": fake_mattermost.url,
                "bot_token": BOT_TOKEN,
                "command_token": COMMAND_TOKEN,
                "public_url": f"http://127.0.0.1:{port}",  # the buttons call this server back
                **mattermost,
            }
            settings = surface_settings(
                "mattermost",
                tmp_path / "data",
                database_url,
                section,
                jobs_in_server=jobs_in_server,
                port=port,
            )
            runtime, model, http = serve_runtime(stack, settings, embedder, script, builtin)
            return MattermostEnv("mattermost", runtime, fake_mattermost, model, http)

        yield start


@contextmanager
def listening(env: MattermostEnv, watchdog_s: float = 30.0) -> Iterator[Listener]:
    """Run ``search2o mattermost listen``'s listener against the fake in a thread."""
    settings = env.runtime.settings
    api = rest_api(settings)
    listener = Listener(
        env.fake.url,
        BOT_TOKEN,
        api,
        pipeline(env.runtime, api),
        watchdog_s=watchdog_s,
        backoff_s=0.1,
    )
    stop = threading.Event()
    thread = threading.Thread(target=listener.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_until(lambda: env.fake.sockets and listener.pipeline.since(), 10, "the listener")
        yield listener
    finally:
        stop.set()
        env.fake.drop()
        thread.join(timeout=15)
        api.close()
        assert not thread.is_alive(), "the listener did not stop"
