"""A search2o server in token mode with Telegram on, pointed at a fake Bot API.

The server and its jobs are :mod:`tests.surfaces.environment`'s, shared by every messenger;
the Bot API is :class:`~tests.surfaces.telegram.fake_telegram.FakeTelegram`. Every test gets a
fresh database on each backend.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import MemoEmbedder
from tests.surfaces.environment import SurfaceEnv, serve_runtime, surface_settings
from tests.surfaces.telegram.fake_telegram import BOT_TOKEN, FakeTelegram, send_webhook

SECRET = "s3cr3t_webhook-token_0123456789"


class TelegramEnv(SurfaceEnv[FakeTelegram]):
    """The server, its runtime, the fake Bot API and the chat model of one test."""

    def webhook(self, update: dict[str, Any], secret: str | None = SECRET) -> list[int]:
        """Deliver ``update`` as Telegram's webhook does; return the statuses."""
        url = f"{self.http.base_url}".rstrip("/") + "/telegram/webhook"
        return send_webhook(url, update, secret)


TelegramFactory = Callable[..., TelegramEnv]


@pytest.fixture
def telegram_env(
    tmp_path: Path, database_url: str, embedder: MemoEmbedder
) -> Iterator[TelegramFactory]:
    """Start the server and the fake: ``telegram_env(script, builtin, jobs_in_server, **telegram)``.

    ``builtin``: the built-in chat model and the handbook instead of a scripted model.
    """
    with contextlib.ExitStack() as stack:

        def start(
            script: Any = None, builtin: bool = False, jobs_in_server: bool = True, **telegram: Any
        ) -> TelegramEnv:
            fake = stack.enter_context(FakeTelegram())
            section = {
                "bot_token": BOT_TOKEN,
                "secret_token": SECRET,
                "mode": "webhook",
                "api_url": fake.url,
                **telegram,
            }
            settings = surface_settings(
                "telegram", tmp_path / "data", database_url, section, jobs_in_server=jobs_in_server
            )
            runtime, model, http = serve_runtime(stack, settings, embedder, script, builtin)
            return TelegramEnv("telegram", runtime, fake, model, http)

        yield start
