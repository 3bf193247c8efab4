"""A messenger that cannot reach the API refuses at start; a reply never shows an error class.

In token mode every API call needs a token: a Slack, Telegram or Mattermost section set up
without ``service_token`` used to start and then answer every question with "Sorry, I could
not answer this (PermissionDeniedError: ...)". Now ``search2o serve``, ``search2o worker``
and the surface's own commands stop at start naming the setting, and ``<surface> check``
says it first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from search2o.api.app import create_app
from search2o.config import Settings
from search2o.errors import ConfigError
from search2o.jobs.kinds import build_registry
from search2o.runtime import Runtime
from search2o.surfaces.deliveries import failure_notice
from search2o.surfaces.telegram.surface import check as telegram_check
from tests.surfaces.telegram.fake_telegram import BOT_TOKEN, running
from tests.test_cli import Cli, out

# Each messenger, configured but for its service token (no service is called at start).
SECTIONS: dict[str, dict[str, Any]] = {
    "slack": {"bot_token": "xoxb-test", "signing_secret": "s", "mode": "http"},
    "telegram": {"bot_token": BOT_TOKEN, "mode": "polling"},
    "mattermost": {"url": "https://chat.example.com", "bot_token": "token-of-the-bot"},
}


def _settings(tmp_path: Path, section: str, auth_mode: str, **extra: Any) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        database_url=f"sqlite:///{tmp_path / 'db.sqlite'}",
        auth_mode=auth_mode,
        **{section: {**SECTIONS[section], **extra}},
    )


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_token_mode_without_the_service_token_refuses_at_start(
    tmp_path: Path, section: str
) -> None:
    settings = _settings(tmp_path, section, "token")
    with Runtime(settings) as runtime:
        for start in (
            lambda: build_registry(runtime),
            lambda: create_app(settings, runtime=runtime),
        ):
            with pytest.raises(ConfigError) as refused:
                start()
            message = refused.value.message
            assert message.startswith(f"{section}.service_token is not set ")
            assert f"SEARCH2O_{section.upper()}__SERVICE_TOKEN" in message
            assert f"search2o surfaces token {section}" in message


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_local_mode_or_a_service_token_starts(tmp_path: Path, section: str) -> None:
    for auth_mode, extra in (("local", {}), ("token", {"service_token": "s2o_svc_x"})):
        settings = _settings(tmp_path / auth_mode, section, auth_mode, **extra)
        with Runtime(settings) as runtime:
            assert build_registry(runtime).get(f"{section}.answer") is not None


def test_telegram_check_names_the_service_token_before_calling_telegram(tmp_path: Path) -> None:
    # No Telegram at api_url: the check must not need one to say what is wrong.
    settings = _settings(tmp_path, "telegram", "token", api_url="https://127.0.0.1:9")
    ok, line = telegram_check(settings)
    assert not ok
    assert line.startswith("telegram: telegram.service_token is not set")


def test_slack_check_says_the_service_token_first(tmp_path: Path) -> None:
    from tests.surfaces.slack.fake_slack import FakeSlack

    with FakeSlack() as fake:
        cli = Cli(tmp_path / "data", f"sqlite:///{tmp_path / 'db.sqlite'}")
        cli.env.update(
            {
                "SEARCH2O_AUTH_MODE": "token",
                "SEARCH2O_SLACK__BOT_TOKEN": "xoxb-test",
                "SEARCH2O_SLACK__SIGNING_SECRET": "s",
                "SEARCH2O_SLACK__MODE": "http",
                "SEARCH2O_SLACK__API_URL": fake.url,
            }
        )
        result = cli("slack", "check")
    assert result.exit_code == 1
    assert out(result).splitlines()[0].startswith("slack.service_token is not set")


def test_telegram_poll_refuses_to_start_without_the_service_token(tmp_path: Path) -> None:
    with running() as fake:
        cli = Cli(tmp_path / "data", f"sqlite:///{tmp_path / 'db.sqlite'}")
        cli.env.update(
            {
                "SEARCH2O_AUTH_MODE": "token",
                "SEARCH2O_TELEGRAM__BOT_TOKEN": BOT_TOKEN,
                "SEARCH2O_TELEGRAM__API_URL": fake.url,
            }
        )
        result = cli("telegram", "poll")
    assert result.exit_code == 1
    assert "telegram.service_token is not set" in result.stderr


@pytest.mark.parametrize(
    ("reason", "notice"),
    [
        (
            "PermissionDeniedError: this surface token may not act for that user",
            "Sorry, I could not answer this (this surface token may not act for that user). "
            "Please ask again later.",
        ),
        (
            "KeyError in the job handler (the worker log has job 0f3c)",
            "Sorry, I could not answer this. Please ask again later.",
        ),
        ("ProviderError:", "Sorry, I could not answer this. Please ask again later."),
    ],
)
def test_a_failure_notice_never_shows_an_error_class(reason: str, notice: str) -> None:
    assert failure_notice(reason) == notice
    assert "Error" not in failure_notice(reason)
