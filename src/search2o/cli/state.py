"""CLI commands for conversation state: ``search2o state conformance`` checks a state hook."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

import typer
from rich.table import Table

from search2o.cli.common import console, handle_errors, print_json
from search2o.errors import InputError
from search2o.state.conformance import run_checks
from search2o.state.conformance_http import http_hook_target, reach_hook, run_http_checks

# The server refuses a shorter state.hook_secret (config.StateSettings): check what it would run.
MIN_SECRET_CHARS = 16

__all__ = ["state_app"]

state_app = typer.Typer(help="Conversation state of the Agent Engine.", no_args_is_help=True)


@state_app.command(
    "conformance",
    # The variables here, full width: in an option's narrow help cell Rich cuts a long name.
    epilog="Environment: SEARCH2O_STATE__HOOKS (--url), SEARCH2O_STATE__HOOK_SECRET (--secret).",
)
@handle_errors
def conformance(
    url: Annotated[
        str,
        typer.Option(
            help="The hook's base URL (requests go to URL/save, /restore, /delete).",
            envvar="SEARCH2O_STATE__HOOKS",
            show_envvar=False,
        ),
    ],
    secret: Annotated[
        str,
        typer.Option(
            help="The HMAC-SHA256 signing secret shared with the hook.",
            envvar="SEARCH2O_STATE__HOOK_SECRET",
            show_envvar=False,
        ),
    ],
    # The bounds of state.hook_timeout_s.
    timeout: Annotated[float, typer.Option(help="Seconds per request.", min=0.1, max=300)] = 10.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Run the state store conformance suite against an HTTP state hook.

    Uses fresh random conversations of made-up users; exit code 1 when a check fails or the
    hook cannot be reached (one line), 2 for a bad option.
    """
    if not url.startswith(("http://", "https://")):
        raise InputError("--url", f"{url!r} must start with http:// or https://")
    if len(secret) < MIN_SECRET_CHARS:
        raise InputError(
            "--secret",
            f"must be at least {MIN_SECRET_CHARS} characters (the server refuses a shorter "
            "state.hook_secret)",
        )
    reach_hook(url, timeout)
    results = run_checks(http_hook_target(url, secret, timeout))
    results += run_http_checks(url, secret, timeout)
    if as_json:
        print_json([asdict(r) for r in results])
    else:
        table = Table(title=f"state hook conformance: {url}")
        table.add_column("check", no_wrap=True)
        table.add_column("result", no_wrap=True)
        table.add_column("ms", justify="right")
        table.add_column("detail")
        for r in results:
            outcome = "PASS" if r.passed else "FAIL"
            table.add_row(
                r.name.removeprefix("check_"), outcome, f"{r.seconds * 1000:.0f}", r.detail
            )
        console.print(table)
        failed = sum(not r.passed for r in results)
        console.print(f"{len(results) - failed} passed, {failed} failed")
    if any(not r.passed for r in results):
        raise typer.Exit(1)
