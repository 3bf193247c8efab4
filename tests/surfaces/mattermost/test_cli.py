"""``search2o mattermost check``: one line per part, exit 0 when the bot can answer, else 1."""

from __future__ import annotations

from pathlib import Path

from tests.surfaces.mattermost.fake_mattermost import BOT_ID, BOT_TOKEN, FakeMattermost
from tests.test_cli import Cli, error_line, out


def cli_for(tmp_path: Path, fake: FakeMattermost, **env: str) -> Cli:
    cli = Cli(tmp_path / "data", f"sqlite:///{tmp_path / 'db.sqlite'}")
    cli.env.update(
        {
            "SEARCH2O_MATTERMOST__URL": fake.url,
            "SEARCH2O_MATTERMOST__BOT_TOKEN": BOT_TOKEN,
            **env,
        }
    )
    return cli


def test_check_reports_each_part_in_one_line(
    tmp_path: Path, fake_mattermost: FakeMattermost
) -> None:
    result = cli_for(tmp_path, fake_mattermost)("mattermost", "check")
    assert result.exit_code == 0, result.stderr
    assert out(result).splitlines() == [
        f"mattermost: ok — @search2o ({BOT_ID}) at {fake_mattermost.url}",
        "mattermost: the bot is in 2 channel(s)",
        "mattermost: no service token needed (local mode)",
        "mattermost: slash command off (SEARCH2O_MATTERMOST__COMMAND_TOKEN)",
    ]


def test_check_says_when_the_token_is_wrong_or_missing(
    tmp_path: Path, fake_mattermost: FakeMattermost
) -> None:
    wrong = cli_for(tmp_path, fake_mattermost, SEARCH2O_MATTERMOST__BOT_TOKEN="wrong-token")(
        "mattermost", "check"
    )
    assert wrong.exit_code == 1
    assert out(wrong).strip() == (
        "mattermost: Mattermost GET users/me failed: 401 api.context.session_expired.app_error"
    )
    assert "wrong-token" not in out(wrong)  # the token never shows
    missing = cli_for(tmp_path, fake_mattermost, SEARCH2O_MATTERMOST__BOT_TOKEN="")(
        "mattermost", "check"
    )
    assert missing.exit_code == 1 and "SEARCH2O_MATTERMOST__BOT_TOKEN" in out(missing)
    token_mode = cli_for(tmp_path, fake_mattermost, SEARCH2O_AUTH_MODE="token")(
        "mattermost", "check"
    )
    assert token_mode.exit_code == 1 and "search2o surfaces token mattermost" in out(token_mode)


def test_a_plain_http_url_beyond_loopback_is_a_settings_error(
    tmp_path: Path, fake_mattermost: FakeMattermost
) -> None:
    result = cli_for(tmp_path, fake_mattermost, SEARCH2O_MATTERMOST__URL="http://chat.example.com")(
        "mattermost", "check"
    )
    assert "mattermost.url" in error_line(result, 2) or "url" in error_line(result, 2)
