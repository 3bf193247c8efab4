"""``search2o mattermost check`` and ``search2o mattermost listen`` (docs/mattermost.md)."""

from __future__ import annotations

import typer

from search2o.cli.common import console, handle_errors, open_runtime, print_plain, settings
from search2o.errors import ConfigError
from search2o.stop_signals import stop_on_signals
from search2o.surfaces.mattermost.settings import mattermost_settings

__all__ = ["mattermost_app"]

mattermost_app = typer.Typer(
    help="The Mattermost surface: check its setup, listen to its event stream.",
    no_args_is_help=True,
)


@mattermost_app.command("check")
@handle_errors
def mattermost_check() -> None:
    """Diagnose the Mattermost setup, one line each (URL, bot, channels, tokens).

    Exit code 0 when the bot can answer, 1 otherwise.
    """
    from search2o.surfaces.mattermost.surface import check

    lines = check(settings())
    for _, line in lines:
        print_plain(line)
    if not all(ok for ok, _ in lines):
        raise typer.Exit(1)


@mattermost_app.command("listen")
@handle_errors
def mattermost_listen() -> None:
    """Read the bot's WebSocket event stream until SIGINT/SIGTERM.

    Posts are recorded and answered by jobs (run `search2o worker`, or `search2o serve`
    alongside). After every reconnect what was posted during the gap is backfilled over REST.
    """
    from search2o.surfaces.mattermost.listener import Listener
    from search2o.surfaces.mattermost.surface import pipeline, rest_api

    with open_runtime() as runtime:
        mattermost = mattermost_settings(runtime.settings)
        if not mattermost.configured:
            raise ConfigError(
                "mattermost listen needs SEARCH2O_MATTERMOST__URL and "
                "SEARCH2O_MATTERMOST__BOT_TOKEN"
            )
        assert mattermost.url is not None and mattermost.bot_token is not None
        api = rest_api(runtime.settings)
        listener = Listener(
            mattermost.url,
            mattermost.bot_token.get_secret_value(),
            api,
            pipeline(runtime, api),
            watchdog_s=mattermost.watchdog_s,
            backfill_max_s=mattermost.backfill_max_s,
        )
        console.print(f"mattermost: listening at {listener.ws_url}")
        try:
            with stop_on_signals() as stop:
                listener.run(stop)
        finally:
            api.close()
        console.print("mattermost: stopped")
