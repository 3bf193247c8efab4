"""``search2o telegram check`` and ``search2o telegram poll`` (docs/telegram.md)."""

from __future__ import annotations

import typer

from search2o.cli.common import console, handle_errors, open_runtime, print_plain, settings
from search2o.errors import ConfigError
from search2o.stop_signals import stop_on_signals
from search2o.surfaces.telegram.settings import telegram_settings

__all__ = ["telegram_app"]

telegram_app = typer.Typer(
    help="The Telegram surface: check its setup, poll for updates.", no_args_is_help=True
)


@telegram_app.command("check")
@handle_errors
def telegram_check() -> None:
    """Diagnose the Telegram setup in one line (bot token, getMe, service token, webhook).

    Exit code 0 when the bot can answer, 1 otherwise.
    """
    from search2o.surfaces.telegram.surface import check

    ok, line = check(settings())
    print_plain(line)
    if not ok:
        raise typer.Exit(1)


@telegram_app.command("poll")
@handle_errors
def telegram_poll() -> None:
    """Read updates with getUpdates (telegram.mode polling) until SIGINT/SIGTERM.

    Updates are recorded and answered by jobs (run `search2o worker`, or `search2o serve`
    alongside). The offset is kept in the database, so a restart loses and repeats nothing.
    """
    from search2o.surfaces.telegram.polling import Poller
    from search2o.surfaces.telegram.surface import BotIdentity, bot_api, pipeline, store

    with open_runtime() as runtime:
        telegram = telegram_settings(runtime.settings)
        if not telegram.configured or telegram.mode != "polling":
            raise ConfigError(
                "telegram polling needs SEARCH2O_TELEGRAM__BOT_TOKEN and "
                "SEARCH2O_TELEGRAM__MODE=polling"
            )
        api = bot_api(runtime.settings)
        workspace = str(BotIdentity(runtime.settings, api).id)
        poller = Poller(
            api,
            pipeline(runtime, api),
            store(runtime),
            workspace,
            timeout_s=telegram.poll_timeout_s,
        )
        console.print(f"telegram: polling getUpdates from offset {poller.offset()}")
        try:
            with stop_on_signals() as stop:
                poller.run(stop)
        finally:
            api.close()
        console.print("telegram: stopped")
