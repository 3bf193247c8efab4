"""The one registry of extensions: surfaces and connectors plug in; the core never imports them.

An extension is a package at the edge (``search2o.surfaces.slack``, a customer's connector)
that contributes any of:

* a **settings section** (a pydantic model): the root :class:`search2o.config.Settings` gets a
  field of the extension's ``name``, read from ``SEARCH2O_<NAME>__*`` and the TOML table
  ``[<name>]`` and as strict on unknown keys as every core section;
* **job kinds**: ``add_kinds(registry, runtime)`` adds its kinds to the
  :class:`~search2o.jobs.registry.JobRegistry` that ``search2o serve`` and ``search2o worker``
  build (:func:`search2o.jobs.kinds.build_registry`);
* **routes**: ``add_routes(app, runtime)`` mounts its endpoints on the FastAPI app
  (:func:`search2o.api.app.create_app`) and may return a context that runs while it serves.
  Every route an extension adds needs the API's authentication (a bearer token or a session,
  as ``/v1/me``), wherever its path lies, unless the extension lists it in ``open_routes``: a
  signed webhook with the function that verifies its requests, or a route that serves public
  information only (:class:`OpenRoute`);
* **CLI commands**: ``add_commands(cli)`` adds a Typer group to ``search2o``;
* **an extra**: the optional dependency group it needs (:class:`Extra`) and the setting that
  asks for it; a server or worker whose settings ask for a feature whose extra is missing
  refuses to start, naming the setting and the ``pip install`` (:func:`check_extras`);
* **connectors**: classes implementing :class:`search2o.connectors.contract.Connector`, each a
  kind of source (``folder``) that ``search2o sources add`` and ``/v1/sources`` offer.

Each hook decides for itself whether its section is configured (a hook of an unconfigured
surface adds nothing). Built-ins register exactly as third-party packages do, as entry points
of the group ``search2o.extensions`` (Python packaging, "Entry points specification")::

    [project.entry-points."search2o.extensions"]
    slack = "search2o.surfaces.slack.extension:EXTENSION"

An extension module must import only its settings (and this module) at import time: the root
settings load it while they are being built, so its hooks import the rest of the package in
their bodies. ``docs/architecture.md`` ("Adding a surface") walks through one.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from search2o.errors import ConfigError, MissingExtraError
from search2o.plugins import load_all, require_extra

__all__ = [
    "GROUP",
    "Extension",
    "Extra",
    "OpenRoute",
    "check_extras",
    "discover",
    "load_extensions",
    "missing_extra",
]

GROUP = "search2o.extensions"
"""The entry point group every extension is registered in."""

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
_REFERENCE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


@dataclass(frozen=True)
class OpenRoute:
    """A route of an extension that answers without an API caller.

    Exactly one of:

    * ``verifier``: a signed webhook (Slack's events, Telegram's updates): the
      ``"module:function"`` (or ``"module:Class.method"``) that authenticates each of its
      requests, checked to import and be callable when the app is built;
    * ``public``: why the route may answer anyone (an RFC 9728 metadata document).

    Attributes:
        path: the route's path as the extension registers it (``/slack/events``), outside
            ``/v1/``.

    """

    path: str
    verifier: str = ""
    public: str = ""


def _never(settings: Any) -> str | None:
    return None


@dataclass(frozen=True)
class Extra:
    """The optional dependency group (``pyproject.toml`` extra) an extension needs.

    Attributes:
        name: the extra's name (``slack``): ``pip install 'search2o[slack]'``.
        modules: the top-level modules it installs (``("slack_sdk",)``).
        what: the feature, for messages (``the Slack surface``).
        asked_by: ``(settings) -> str | None``: the setting that turns the feature on in these
            root settings (``slack.bot_token``), or ``None`` when they leave it off.

    """

    name: str
    modules: tuple[str, ...]
    what: str
    asked_by: Callable[[Any], str | None] = _never

    def check(self, what: str = "", setting: str = "") -> None:
        """Refuse unless every module of the extra imports.

        Args:
            what: who needs it, for the message (default :attr:`what`): a command, say.
            setting: the setting that asked for it, named in the message.

        Raises:
            MissingExtraError: not installed (:func:`search2o.plugins.require_extra`).

        """
        require_extra(self.name, what or self.what, *self.modules, setting=setting)

    def require(self, settings: Any) -> None:
        """Refuse unless the extra imports, when ``settings`` ask for the feature.

        Raises:
            MissingExtraError: asked for and not installed; names the setting.

        """
        setting = self.asked_by(settings)
        if setting is not None:
            self.check(setting=setting)


@dataclass(frozen=True)
class Extension:
    """What one extension contributes; every hook is optional.

    Attributes:
        name: the extension's name, also its settings section's field name (lower case,
            ``[a-z][a-z0-9_]*``, at most 32 characters); equal to its entry point's name.
        settings: its settings section (a pydantic model with ``extra="forbid"`` whose fields
            all have defaults), or ``None``.
        add_kinds: ``(registry: JobRegistry, runtime: Runtime) -> None``.
        add_routes: ``(app: FastAPI, runtime: Runtime) -> AbstractAsyncContextManager | None``;
            what it returns is entered while the app serves (a transport's task group) and
            exited on shutdown.
        add_commands: ``(cli: typer.Typer) -> None``.
        open_routes: its routes that need no API caller (:class:`OpenRoute`); every other
            route it adds is authenticated like ``/v1/me``.
        extra: the optional dependency group its features need (:class:`Extra`), or ``None``.
        connectors: connector classes (:mod:`search2o.connectors.contract`), each with a
            unique ``kind``, or their ``"module:Class"`` paths (imported when first used, so
            the extension module stays light).

    The hooks take the core's objects untyped here so that this contract imports nothing of
    the core (the core imports it); each extension annotates its own hooks.

    """

    name: str
    settings: type[BaseModel] | None = None
    add_kinds: Callable[[Any, Any], None] | None = None
    add_routes: Callable[[Any, Any], AbstractAsyncContextManager[Any] | None] | None = None
    add_commands: Callable[[Any], None] | None = None
    open_routes: tuple[OpenRoute, ...] = ()
    connectors: tuple[Any, ...] = ()
    extra: Extra | None = None


def load_extensions(found: dict[str, Any]) -> tuple[Extension, ...]:
    """Check the loaded entry points ``found`` (name → object) and return them sorted by name.

    Raises:
        ConfigError: an object is not an :class:`Extension`, its name breaks the rule or
            differs from its entry point's name, or its settings are not a pydantic model
            that refuses unknown keys; the message names the entry point.

    """
    extensions = []
    for name, obj in sorted(found.items()):
        where = f"extension {name!r} ({GROUP})"
        if not isinstance(obj, Extension):
            raise ConfigError(f"{where} is a {type(obj).__name__}, not a search2o Extension")
        if not _NAME.fullmatch(obj.name):
            raise ConfigError(f"{where}: name {obj.name!r} must match {_NAME.pattern}")
        if obj.name != name:
            raise ConfigError(f"{where}: its name is {obj.name!r}; the entry point must match")
        if obj.settings is not None and not (
            isinstance(obj.settings, type) and issubclass(obj.settings, BaseModel)
        ):
            raise ConfigError(f"{where}: settings must be a pydantic model class")
        if obj.settings is not None and obj.settings.model_config.get("extra") != "forbid":
            # a typo in its section would otherwise serve with the default it meant to change
            raise ConfigError(
                f"{where}: its settings must refuse unknown keys "
                "(model_config = ConfigDict(extra='forbid'))"
            )
        for route in obj.open_routes:
            _check_open_route(route, where)
        extensions.append(obj)
    return tuple(extensions)


def _check_open_route(route: object, where: str) -> None:
    """Refuse an open route without its verifier (or its reason to be public).

    Raises:
        ConfigError: names the extension and the route.

    """
    if not isinstance(route, OpenRoute):
        raise ConfigError(f"{where}: open_routes holds a {type(route).__name__}, not an OpenRoute")
    if not route.path.startswith("/") or route.path.startswith("/v1/"):
        raise ConfigError(f"{where}: open route {route.path!r} must be a path outside /v1/")
    if bool(route.verifier) == bool(route.public.strip()):
        raise ConfigError(
            f"{where}: open route {route.path!r} needs its verifier ('module:function' that "
            "authenticates each request) or, for public information only, a reason (public=...)"
        )
    if route.verifier and not _REFERENCE.match(route.verifier):
        raise ConfigError(
            f"{where}: the verifier of {route.path!r} must be 'module:function', "
            f"not {route.verifier!r}"
        )


@functools.cache
def discover() -> tuple[Extension, ...]:
    """Return every installed extension, sorted by name (loaded once per process).

    Raises:
        ConfigError: an entry point fails to import (:func:`search2o.plugins.load_all`), or
            :func:`load_extensions` refuses it.

    """
    return load_extensions(load_all(GROUP, "extension"))


def check_extras(settings: Any) -> None:
    """Refuse settings that turn on a feature whose extra is not installed.

    ``search2o serve`` (:func:`search2o.api.app.create_app`) and ``search2o worker`` call it
    before anything opens, so a configured surface without its extra is a one-line refusal
    naming the setting, never a traceback in the middle of start-up.

    Raises:
        MissingExtraError: the first such feature, its setting and the ``pip install``.

    """
    for extension in discover():
        if extension.extra is not None:
            extension.extra.require(settings)


_CORE_EXTRAS = {"psycopg": "postgres", "pgvector": "postgres", "opentelemetry": "otel"}
"""Top-level modules of the core's own extras (``pyproject.toml``) -> the extra's name."""


def missing_extra(exc: ImportError) -> MissingExtraError | None:
    """Return the :class:`MissingExtraError` an import failure stands for, if any.

    Args:
        exc: a failed import (``ModuleNotFoundError: No module named 'slack_sdk'``).

    Returns:
        The error naming the extra that installs the missing module (the core's ``postgres``
        and ``otel``, or an extension's :class:`Extra`), ``None`` for any other module.

    """
    top = (exc.name or "").split(".")[0]
    extra = _CORE_EXTRAS.get(top) or next(
        (e.extra.name for e in discover() if e.extra is not None and top in e.extra.modules),
        None,
    )
    if extra is None:
        return None
    return MissingExtraError(
        f"this needs the `{extra}` extra ({top} is not installed): pip install 'search2o[{extra}]'",
        extra,
    )
