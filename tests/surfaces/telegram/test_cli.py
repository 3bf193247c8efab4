"""``search2o telegram check``: one line, exit 0 when the bot can answer, 1 otherwise."""

from __future__ import annotations

from pathlib import Path

from tests.surfaces.telegram.conftest import SECRET
from tests.surfaces.telegram.fake_telegram import BOT_TOKEN, FakeTelegram, running
from tests.test_cli import Cli, error_line, out


def cli_for(tmp_path: Path, fake: FakeTelegram, **env: str) -> Cli:
    cli = Cli(tmp_path / "data", f"sqlite:///{tmp_path / 'db.sqlite'}")
    cli.env.update(
        {
            "SEARCH2O_TELEGRAM__BOT_TOKEN": BOT_TOKEN,
            "SEARCH2O_TELEGRAM__API_URL": fake.url,
            "SEARCH2O_TELEGRAM__MODE": "polling",
            **env,
        }
    )
    return cli


def test_check_reports_a_polling_bot_in_one_line(tmp_path: Path) -> None:
    with running() as fake:
        result = cli_for(tmp_path, fake)("telegram", "check")
    assert result.exit_code == 0, result.stderr
    assert out(result).splitlines() == ["telegram: ok — @search2o_test_bot (7000001), polling"]


def test_check_says_when_a_webhook_is_missing_or_the_token_is_wrong(tmp_path: Path) -> None:
    with running() as fake:
        webhook = {"SEARCH2O_TELEGRAM__MODE": "webhook", "SEARCH2O_TELEGRAM__SECRET_TOKEN": SECRET}
        missing = cli_for(tmp_path, fake, **webhook)("telegram", "check")
        fake.webhook = {"url": "https://bot.example.com/telegram/webhook"}
        set_up = cli_for(tmp_path, fake, **webhook)("telegram", "check")
        wrong = cli_for(tmp_path, fake, SEARCH2O_TELEGRAM__BOT_TOKEN="7000001:wrong")(
            "telegram", "check"
        )
    assert missing.exit_code == 1
    assert out(missing).strip().endswith("but no webhook is set — call setWebhook with the secret")
    assert set_up.exit_code == 0
    assert "webhook https://bot.example.com/telegram/webhook, 0 pending" in out(set_up)
    assert wrong.exit_code == 1
    assert out(wrong).strip() == "telegram: Telegram getMe failed: 401 Unauthorized"
    assert "wrong" not in out(wrong)  # the token never shows


def test_check_without_a_token_says_how_to_set_it(tmp_path: Path) -> None:
    with running() as fake:
        result = cli_for(tmp_path, fake, SEARCH2O_TELEGRAM__BOT_TOKEN="")("telegram", "check")
    assert result.exit_code == 1
    assert "SEARCH2O_TELEGRAM__BOT_TOKEN" in out(result)


def test_webhook_mode_without_a_secret_is_a_settings_error(tmp_path: Path) -> None:
    with running() as fake:
        result = cli_for(tmp_path, fake, SEARCH2O_TELEGRAM__MODE="webhook")("telegram", "check")
    line = error_line(result, 2)
    assert line.startswith("error: setting telegram.secret_token: telegram.mode webhook needs")
    assert line.endswith("(environment SEARCH2O_TELEGRAM__SECRET_TOKEN)")  # the field itself


def test_a_link_code_for_telegram_comes_with_its_deep_link(tmp_path: Path) -> None:
    with running() as fake:
        cli = cli_for(tmp_path, fake, SEARCH2O_TELEGRAM__BOT_USERNAME="search2o_test_bot")
        cli.ok("users", "add", "dana@example.com")
        lines = out(cli.ok("users", "link-code", "dana@example.com", "--surface", "telegram"))
        other = out(cli.ok("users", "link-code", "dana@example.com", "--surface", "slack"))
    code, link = lines.splitlines()[1:3]
    assert link == f"Telegram: open https://t.me/search2o_test_bot?start={code}"
    assert "t.me" not in other
