"""``search2o slack``: the Slack app's manifest, a check of the installation, Socket Mode.

See docs/slack.md. ``socket`` holds the Socket Mode connection (``slack.mode = socket``, the
default); answers run as jobs in ``search2o serve`` or ``search2o worker``.
"""

from __future__ import annotations

import json
import signal
from typing import Annotated, Literal

import typer

from search2o.cli.common import handle_errors, open_runtime, print_plain, settings
from search2o.stop_signals import stop_on_signals
from search2o.surfaces.slack.settings import slack_settings

__all__ = ["slack_app"]

slack_app = typer.Typer(help="The Slack surface: manifest, check, Socket Mode (docs/slack.md).")


@slack_app.command("manifest")
@handle_errors
def slack_manifest(
    mode: Annotated[
        Literal["socket", "http"] | None,
        typer.Option(help="socket or http (default: slack.mode)"),
    ] = None,
    url: Annotated[
        str | None, typer.Option(help="http mode: this server as Slack reaches it (https://...)")
    ] = None,
    name: Annotated[str, typer.Option(help="the app's display name")] = "search2o",
) -> None:
    """Print the Slack app manifest (JSON) with exactly the scopes the surface needs.

    Paste it in "Create an app → From a manifest" at api.slack.com/apps.
    """
    from search2o.errors import InputError
    from search2o.surfaces.slack.manifest import manifest

    chosen = mode or slack_settings(settings()).mode
    if chosen == "http" and not url:
        raise InputError("--url", "http mode needs this server's public URL, e.g. https://...")
    if chosen == "http" and url is not None and not url.startswith("https://"):
        raise InputError("--url", f"{url[:100]!r}: Slack sends events only to https URLs")
    print_plain(json.dumps(manifest(chosen, url, name), indent=2, ensure_ascii=False))


@slack_app.command("check")
@handle_errors
def slack_check() -> None:
    """Diagnose the installation: tokens, scopes, Socket Mode; one line per problem.

    Exit code 1 when anything is wrong, 0 when Slack accepts the tokens with every scope.
    """
    from search2o.surfaces.slack.manifest import check

    chosen = settings()
    slack = slack_settings(chosen)
    # The service token first: without it no answer reaches the API, whatever Slack says.
    token_problem = slack.service_token_problem("slack", chosen.auth_mode)
    problems = [token_problem] if token_problem else []
    problems += check(slack)
    for line in problems:
        print_plain(line)
    if problems:
        raise typer.Exit(1)
    print_plain("ok: the bot token has every scope the surface needs")


@slack_app.command("socket")
@handle_errors
def slack_socket() -> None:
    """Receive Slack's deliveries over Socket Mode until SIGTERM or Ctrl-C.

    Needs slack.app_token. Questions are recorded and enqueued here; `search2o serve` (or
    `search2o worker`) runs the answer jobs.
    """
    from search2o.surfaces.slack.settings import EXTRA

    EXTRA.check("`search2o slack socket`")
    from search2o.surfaces.slack.socket import run_socket

    with open_runtime() as runtime, stop_on_signals((signal.SIGTERM,)) as stop:
        try:
            run_socket(runtime, stop)
        except KeyboardInterrupt:
            stop.set()
