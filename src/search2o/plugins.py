"""The one loader of plugins: providers registered as entry points (Python packaging spec).

Built-in providers are registered the same way as third-party ones (``pyproject.toml``,
``[project.entry-points."search2o.<group>"]``), so every group is loaded by
:func:`load_factory` with the same message when a name is unknown or a plugin fails to import,
and checked by :func:`check_members` the same way.

Groups: ``search2o.embedders``, ``search2o.chat_models``, ``search2o.web_search``,
``search2o.key_providers``, ``search2o.state_hooks`` (one chosen by a setting:
:func:`load_factory`), and ``search2o.extensions`` (every one installed: :func:`load_all`).
"""

from __future__ import annotations

import importlib
import inspect
from importlib.metadata import entry_points
from typing import Any

from search2o.errors import ConfigError, MissingExtraError

__all__ = ["check_members", "installed", "load_all", "load_factory", "require_extra"]


def installed(group: str) -> list[str]:
    """Return the names registered in ``group``, sorted."""
    return sorted({ep.name for ep in entry_points(group=group)})


def load_factory(group: str, name: str, setting: str) -> Any:
    """Return the object the entry point ``name`` of ``group`` names (usually a factory).

    Args:
        group: the entry point group, e.g. ``search2o.embedders``.
        name: the configured name, e.g. ``builtin``.
        setting: the setting that holds ``name``, for the message (``embedding.provider``).

    Raises:
        ConfigError: no entry point of that name is installed (the message lists those that
            are), or it fails to import.

    """
    found = {ep.name: ep for ep in entry_points(group=group)}
    if name not in found:
        names = ", ".join(sorted(found)) or "none"
        raise ConfigError(
            f"setting {setting}: {name!r} is not installed in {group} (installed: {names})"
        )
    try:
        return found[name].load()
    except Exception as exc:  # a plugin's own import error: name it, keep the cause
        raise ConfigError(
            f"setting {setting}: the plugin {name!r} of {group} failed to load "
            f"({type(exc).__name__}: {exc})"
        ) from exc


def load_all(group: str, what: str = "plugin") -> dict[str, Any]:
    """Return every entry point of ``group`` loaded, by name (for groups that use them all).

    Args:
        group: the entry point group, e.g. ``search2o.extensions``.
        what: what an entry point is, for the message (``extension``).

    Raises:
        ConfigError: one fails to import; the message names it, its group and its target,
            and keeps the cause.

    """
    found: dict[str, Any] = {}
    for ep in entry_points(group=group):
        try:
            found[ep.name] = ep.load()
        except Exception as exc:  # a plugin's own import error: name it, keep the cause
            raise ConfigError(
                f"{what} {ep.name!r} ({group}, {ep.value}) failed to load "
                f"({type(exc).__name__}: {exc})"
            ) from exc
    return found


def check_members(obj: object, members: tuple[str, ...], what: str) -> None:
    """Refuse ``obj`` unless it has every one of ``members`` (a Protocol's methods/attributes).

    Uses :func:`inspect.getattr_static`, so properties are not evaluated (a property may be a
    network probe).

    Raises:
        ConfigError: a member is missing; the message names them and ``what`` the object is.

    """
    sentinel = object()
    missing = [m for m in members if inspect.getattr_static(obj, m, sentinel) is sentinel]
    if missing:
        raise ConfigError(
            f"{what} has no {', '.join(missing)}; it must provide {', '.join(members)}"
        )


def require_extra(extra: str, what: str, *modules: str, setting: str = "") -> None:
    """Refuse to go on unless the modules of the optional dependency group ``extra`` import.

    Args:
        extra: the extra's name in ``pyproject.toml`` (``slack``, ``mcp``).
        what: the feature that needs it, for the message (``the Slack surface``).
        modules: the top-level modules the extra installs (``slack_sdk``).
        setting: the setting that turned the feature on (``slack.bot_token``), named in the
            message; empty when a command, not a setting, asked for it.

    Raises:
        MissingExtraError: one cannot be imported (not installed, or shadowed by a module of
            that name earlier on ``sys.path``); the message names it and the ``pip install``.

    """
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:  # missing, or shadowed by a file of that name on sys.path
            asked = f"{setting} turns on {what}, which" if setting else what
            raise MissingExtraError(
                f"{asked} needs the `{extra}` extra ({module} cannot be imported: {exc}): "
                f"pip install 'search2o[{extra}]'",
                extra,
            ) from exc
