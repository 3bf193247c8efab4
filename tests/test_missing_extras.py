"""A missing extra is one line naming its ``pip install``, never a traceback.

Each case hides the extra's modules (``sys.modules[name] = None``: importing it raises
``ModuleNotFoundError``, as on an install without the extra) and runs the command as a user
would: commands exit 2 with one ``error:`` line; ``serve`` and ``worker`` with a configured
surface refuse to start, naming the setting that turned it on. One case runs ``serve`` as a
real process, to show nothing of start-up ran before the refusal.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from search2o.errors import MissingExtraError
from search2o.extensions import check_extras, missing_extra
from search2o.plugins import require_extra
from tests.conftest import free_port
from tests.test_cli import Cli, error_line

SLACK = {"SEARCH2O_SLACK__BOT_TOKEN": "xoxb-1", "SEARCH2O_SLACK__SIGNING_SECRET": "secret"}
EXTRAS = {
    "slack": ("slack_sdk",),
    "mcp": ("mcp", "joserfc"),
    "postgres": ("psycopg", "pgvector"),
    "otel": ("opentelemetry",),
}


def _hide(monkeypatch: pytest.MonkeyPatch, extra: str) -> None:
    """Make the extra's modules (and any already imported submodule) unimportable here."""
    for module in EXTRAS[extra]:
        for name in [n for n in sys.modules if n == module or n.startswith(f"{module}.")]:
            monkeypatch.setitem(sys.modules, name, None)
        monkeypatch.setitem(sys.modules, module, None)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """The command in-process on a fresh SQLite data folder."""
    return Cli(tmp_path / "data", f"sqlite:///{tmp_path / 'data' / 'search2o.db'}")


@pytest.mark.parametrize(
    ("args", "extra", "who"),
    [
        (("slack", "check"), "slack", "`search2o slack check`"),
        (("slack", "socket"), "slack", "`search2o slack socket`"),
        (("mcp",), "mcp", "`search2o mcp`"),
    ],
)
def test_a_command_whose_extra_is_missing_names_the_install_and_exits_2(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], extra: str, who: str
) -> None:
    _hide(monkeypatch, extra)
    line = error_line(cli(*args), 2)
    assert who in line and f"pip install 'search2o[{extra}]'" in line, line


def test_the_slack_manifest_needs_nothing_of_the_extra(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    _hide(monkeypatch, "slack")
    result = cli.ok("slack", "manifest", "--mode", "socket")
    assert '"socket_mode_enabled": true' in result.stdout


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_a_configured_surface_without_its_extra_refuses_to_start_naming_the_setting(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    _hide(monkeypatch, "slack")
    cli.env.update(SLACK)
    args = (command, "--port", str(free_port())) if command == "serve" else (command,)
    line = error_line(cli(*args), 2)
    assert "slack.bot_token turns on the Slack surface" in line, line
    assert "pip install 'search2o[slack]'" in line, line


def test_mcp_asked_for_without_its_extra_refuses_to_start_and_off_by_default_serves(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    _hide(monkeypatch, "mcp")
    from search2o.config import Settings

    check_extras(Settings())  # on by default, not asked for: no refusal (the endpoint is off)
    cli.env["SEARCH2O_MCP__ENABLED"] = "true"
    line = error_line(cli("serve", "--port", str(free_port())), 2)
    assert "mcp.enabled turns on the MCP server" in line, line
    assert "pip install 'search2o[mcp]'" in line, line


@pytest.mark.parametrize(
    ("env", "extra", "setting"),
    [
        (
            {"SEARCH2O_DATABASE_URL": "postgresql+psycopg://u@127.0.0.1:1/x"},
            "postgres",
            "database_url",
        ),
        ({"SEARCH2O_TRACING__ENABLED": "true"}, "otel", "tracing.enabled"),
    ],
)
def test_a_core_extra_that_is_missing_is_one_line_and_exit_2(
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    extra: str,
    setting: str,
) -> None:
    _hide(monkeypatch, extra)
    cli.env.update(env)
    line = error_line(cli("serve", "--port", str(free_port())), 2)
    assert setting in line and f"pip install 'search2o[{extra}]'" in line, line


def test_an_import_of_an_extras_module_anywhere_is_mapped_to_its_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _hide(monkeypatch, "slack")
    with pytest.raises(ModuleNotFoundError) as caught:
        import slack_sdk  # noqa: F401
    found = missing_extra(caught.value)
    assert found is not None and found.extra == "slack"
    assert "pip install 'search2o[slack]'" in found.message
    assert missing_extra(ModuleNotFoundError("x", name="no_such_module_s2o")) is None
    with pytest.raises(MissingExtraError) as refused:
        require_extra("slack", "the Slack surface", "slack_sdk", setting="slack.bot_token")
    assert refused.value.message.startswith("slack.bot_token turns on the Slack surface")


def test_serve_as_a_process_refuses_before_anything_starts(tmp_path: Path) -> None:
    """The console script's own output: one line on stderr, exit 2, no traceback."""
    runner = tmp_path / "hidden.py"
    runner.write_text(
        "import sys\n"
        "sys.modules['slack_sdk'] = None\n"
        "from search2o.cli import main\n"
        "sys.argv = ['search2o', *sys.argv[1:]]\n"
        "main()\n",
        encoding="utf-8",
    )
    env = {
        **os.environ,
        **SLACK,
        "SEARCH2O_DATA_DIR": str(tmp_path / "data"),
        "SEARCH2O_CONFIG": "",
        "NO_COLOR": "1",
        "COLUMNS": "400",
    }
    env.pop("SEARCH2O_DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, str(runner), "serve", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert [line for line in done.stderr.splitlines() if line.strip()] == [
        "error: slack.bot_token turns on the Slack surface, which needs the `slack` extra "
        "(slack_sdk cannot be imported: import of slack_sdk halted; None in sys.modules): "
        "pip install 'search2o[slack]'"
    ]
    assert not (tmp_path / "data" / "search2o.db").exists()  # nothing opened
