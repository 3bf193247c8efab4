"""What every CLI command shares: runtime, error reporting, the only ways to the terminal.

Errors print one line to stderr: exit code 2 for bad input (:class:`InputError`, and settings
that do not load: an unknown ``SEARCH2O_*`` variable or TOML key, a value out of range), 1 for
any other :class:`Search2oError`. Tracebacks are for bugs only.

Output goes through :data:`console` and :data:`err_console`, whose every string and rendered
segment passes :func:`~search2o.terminal.printable`, or through :func:`print_json`,
:func:`print_plain` and :func:`confirm`: stored text cannot reach the terminal as control
functions. ``tests/test_cli_terminal.py`` checks that no other module of the CLI writes to it.
"""

from __future__ import annotations

import functools
import importlib
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import typer
from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Text
from typer.core import TyperGroup

from search2o.config import Settings, load_settings
from search2o.errors import ConfigError, InputError, MissingExtraError, Search2oError
from search2o.extensions import missing_extra
from search2o.logs import configure_logging
from search2o.runtime import Runtime
from search2o.terminal import has_controls, printable

__all__ = [
    "INT32_MAX",
    "INT64_MAX",
    "OneLineUsageErrors",
    "SafeConsole",
    "confirm",
    "console",
    "err_console",
    "handle_errors",
    "open_runtime",
    "print_json",
    "print_plain",
    "printable",
    "set_global_options",
]


class SafeConsole(Console):
    """A Rich console that writes no control character it was given (ECMA-48 functions).

    Strings are sanitised before layout (so tables keep their widths); any segment still
    holding one, e.g. from a ``Text`` built elsewhere, is sanitised as it is rendered. Rich's own
    styling and cursor control (segments with ``control`` set) are untouched.
    """

    def print(self, *objects: Any, soft_wrap: bool | None = None, **kwargs: Any) -> None:
        """Print like Rich, but a line made only of strings is never broken by Rich.

        Rich word-wraps text at the console width, inserting newlines: a database URL, a
        path or a link longer than the terminal would be cut in two and no longer paste
        whole. Such a line is soft-wrapped instead (the terminal folds it, and copying it
        gives one line). Tables and other renderables still fit the width; an explicit
        ``soft_wrap`` wins.
        """
        if soft_wrap is None and objects and all(isinstance(o, str) for o in objects):
            soft_wrap = True
        super().print(*objects, soft_wrap=soft_wrap, **kwargs)

    def render_str(self, text: str, **kwargs: Any) -> Text:
        """Make a ``Text`` of ``text`` with its control characters replaced by U+FFFD."""
        return super().render_str(printable(text), **kwargs)

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        """Render like Rich, replacing control characters in every text segment."""
        for segment in super().render(renderable, options):
            if segment.control is None and has_controls(segment.text):
                yield Segment(printable(segment.text), segment.style)
            else:
                yield segment


# Markup and emoji codes off: document text, titles, answers and user input are printed
# literally, never as styles (a chunk saying "[/etc/hosts]" must neither vanish nor crash the
# table) nor with ":smile:" turned into an emoji.
console = SafeConsole(markup=False, highlight=False, emoji=False)
err_console = SafeConsole(stderr=True, markup=False, highlight=False, emoji=False)

# DEL and C1 controls: JSON may hold them raw (RFC 8259 section 7 requires escaping only
# U+0000..U+001F), so they are written as \u escapes, which decode to the same text.
_JSON_RAW = {c: f"\\u{c:04x}" for c in [0x7F, *range(0x80, 0xA0)]}


def print_json(data: Any, *, indent: int | None = 2) -> None:
    """Write ``data`` as JSON on stdout, never wrapped, with every control character escaped.

    Non-ASCII text is kept as it is (``ensure_ascii=False``); ``default=str`` writes dates and
    paths as strings.
    """
    text = json.dumps(data, indent=indent, ensure_ascii=False, default=str)
    sys.stdout.write(text.translate(_JSON_RAW) + "\n")
    sys.stdout.flush()


def print_plain(text: str) -> None:
    """Write one line on stdout as it is (no wrapping, no styling), control characters made inert.

    For values meant to be copied, such as a new token.
    """
    typer.echo(printable(text))


def confirm(question: str) -> None:
    """Ask a yes/no question on the terminal; stop the command (exit 1) unless the answer is yes."""
    typer.confirm(printable(question), abort=True)


# The largest numbers a command passes to the database (PostgreSQL docs, "Numeric Types";
# SQLite docs, "Datatypes In SQLite"). Ids and key versions live in Integer columns, 32-bit on
# PostgreSQL, so a larger one names no row (and PostgreSQL refuses to compare it); offsets
# are 64-bit on both backends, beyond which SQLite overflows binding them.
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


# Click's exceptions, from wherever this Typer takes Click (Typer 0.2x vendors it as
# ``typer._click``); ``typer.BadParameter`` is the public name of one of them.
_CLICK_ERRORS = importlib.import_module(typer.BadParameter.__module__)
_USAGE_ERROR: type[Exception] = _CLICK_ERRORS.UsageError
_MISSING_PARAMETER: type[Exception] = _CLICK_ERRORS.MissingParameter
_NO_ARGS_IS_HELP: tuple[type[Exception], ...] = tuple(
    [_CLICK_ERRORS.NoArgsIsHelpError] if hasattr(_CLICK_ERRORS, "NoArgsIsHelpError") else []
)


class OneLineUsageErrors(TyperGroup):
    """The command group whose usage errors print one line, like every other error.

    A value Click refuses (out of its ``min``/``max`` range, not a number, a missing argument,
    an unknown option or command) prints ``error: NAME: REASON (see `... --help`)`` on stderr
    and exits 2. ``no_args_is_help`` still shows the help.
    """

    def invoke(self, ctx: Any) -> Any:
        """Run the command; turn a usage error below this group into one line and exit 2."""
        try:
            return super().invoke(ctx)
        except _NO_ARGS_IS_HELP:
            raise
        except _USAGE_ERROR as exc:
            _print_error(_usage_line(exc))
            raise typer.Exit(2) from None


def _usage_line(exc: Any) -> str:
    """``NAME: REASON (see `COMMAND --help`)`` for a Click usage error."""
    param = getattr(exc, "param", None)
    if isinstance(exc, typer.BadParameter) and param is not None:
        missing = isinstance(exc, _MISSING_PARAMETER)
        option = param.param_type_name == "option"
        name = param.opts[0] if option else str(param.name).upper()
        text = exc.format_message() if missing else f"{name}: {exc.message}"
    else:
        text = exc.format_message()
    where = exc.ctx.command_path if exc.ctx is not None else "search2o"
    return f"{text.rstrip('.')} (see `{where} --help`)"


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

    A value that is invalid or not a setting stops the command: one line, exit code 2 (the
    operator's input, like any other bad input).
    """
    try:
        loaded = load_settings(
            **{**_OVERRIDES, **{k: v for k, v in extra.items() if v is not None}}
        )
    except ConfigError as exc:
        _print_error(exc.message)
        raise typer.Exit(2) from None
    configure_logging(loaded.log_level if loaded.log_level != "INFO" else "WARNING", "text")
    return loaded


def open_runtime(*, migrate: bool = True) -> Runtime:
    """Open the runtime for a command (the caller closes it, usually with ``with``)."""
    return Runtime(settings(), migrate=migrate)


def _print_error(message: str) -> None:
    err_console.print(Text.assemble(("error:", "red"), " ", message), soft_wrap=True)


def handle_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn :class:`Search2oError` into one line on stderr and exit code 2 or 1.

    Exit 2: bad input, or a missing extra (:class:`~search2o.errors.MissingExtraError`, also
    when a module an extra installs fails to import: the line names the ``pip install``).
    Exit 1: any other error of search2o.
    """

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except (InputError, MissingExtraError) as exc:
            _print_error(exc.message)
            raise typer.Exit(2) from None
        except ModuleNotFoundError as exc:
            missing = missing_extra(exc)
            if missing is None:
                raise
            _print_error(missing.message)
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
