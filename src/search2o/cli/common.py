"""What every CLI command shares: the runtime from global options, and error reporting.

Errors print one line to stderr: exit code 2 for bad input (:class:`InputError`), 1 for any
other :class:`Search2oError`. Tracebacks are for bugs only.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.text import Text

from search2o.config import Settings, load_settings
from search2o.errors import InputError, Search2oError
from search2o.logs import configure_logging
from search2o.runtime import Runtime

__all__ = ["console", "err_console", "handle_errors", "open_runtime", "set_global_options"]

# Markup and emoji codes off: document text, titles, answers and user input are printed
# literally, never as styles (a chunk saying "[/etc/hosts]" must neither vanish nor crash the
# table) nor with ":smile:" turned into an emoji.
console = Console(markup=False, highlight=False, emoji=False)

# C0 controls but newline and tab, DEL, and C1 controls: a stored title or message holding
# ESC sequences must not clear or recolour the user's terminal (ECMA-48 control functions).
_CONTROLS = {c: "\ufffd" for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)] if c not in (9, 10)}


def printable(text: str) -> str:
    """Return ``text`` with terminal control characters (ESC...) replaced by U+FFFD."""
    return text.translate(_CONTROLS)


err_console = Console(stderr=True, markup=False, highlight=False, emoji=False)

_OVERRIDES: dict[str, Any] = {}

P = ParamSpec("P")
R = TypeVar("R")


def set_global_options(data_dir: Path | None, database_url: str | None) -> None:
    """Remember ``--data-dir`` and ``--database-url`` for :func:`settings`."""
    _OVERRIDES.clear()
    if data_dir is not None:
        _OVERRIDES["data_dir"] = data_dir
    if database_url is not None:
        _OVERRIDES["database_url"] = database_url


def settings(**extra: Any) -> Settings:
    """Build the settings from the environment, the TOML file, global options and ``extra``.

    Raises:
        ConfigError: a value is invalid (the message names the setting).
    """
    loaded = load_settings(**_OVERRIDES, **{k: v for k, v in extra.items() if v is not None})
    configure_logging(loaded.log_level if loaded.log_level != "INFO" else "WARNING", "text")
    return loaded


def open_runtime(*, migrate: bool = True) -> Runtime:
    """Open the runtime for a command (the caller closes it, usually with ``with``)."""
    return Runtime(settings(), migrate=migrate)


def _print_error(message: str) -> None:
    err_console.print(Text.assemble(("error:", "red"), " ", message), soft_wrap=True)


def handle_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn :class:`Search2oError` into one line on stderr and exit code 2 or 1."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except InputError as exc:
            _print_error(exc.message)
            raise typer.Exit(2) from None
        except Search2oError as exc:
            _print_error(exc.message)
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            err_console.print(
                "interrupted; nothing half-written was kept (each document, or reindex batch, "
                "is stored whole or not at all): run the command again to continue"
            )
            sys.exit(130)

    return wrapper
