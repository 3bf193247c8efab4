"""Extensions' routes on the app: authenticated like the API unless declared open.

:func:`add_extension_routes` calls every extension's ``add_routes`` and notes the routes each
one added. A route the extension did not list in its ``open_routes`` needs an API caller, as
``/v1/me`` does, whatever its path: :class:`~search2o.api.ingress.Ingress` asks
:meth:`ExtensionRoutes.needs_caller`. The verifier of each open route an extension adds is
imported and checked to be callable here, so an extension cannot serve a webhook open without
the code that verifies it (a route it does not add, e.g. a surface that is off, is not checked).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import FastAPI
from starlette.routing import BaseRoute, Match

from search2o import extensions
from search2o.errors import ConfigError

__all__ = ["ExtensionRoutes", "add_extension_routes"]


class ExtensionRoutes:
    """The extensions' routes that need a caller, and what runs while the app serves.

    Attributes:
        serving: the contexts the extensions' ``add_routes`` returned.
        private: the routes added by extensions and not declared open.

    """

    def __init__(self) -> None:
        self.serving: list[AbstractAsyncContextManager[Any]] = []
        self.private: list[BaseRoute] = []

    def needs_caller(self, path: str) -> bool:
        """Tell whether ``path`` is served by an extension's route that needs a caller."""
        scope = {"type": "http", "path": path, "root_path": "", "method": "GET"}
        return any(route.matches(scope)[0] != Match.NONE for route in self.private)


def add_extension_routes(app: FastAPI, runtime: Any) -> ExtensionRoutes:
    """Add every extension's routes to ``app`` and return what :class:`Ingress` needs of them.

    Raises:
        ConfigError: an open route's verifier does not import or is not callable.

    """
    found = ExtensionRoutes()
    for extension in extensions.discover():
        if extension.add_routes is None:
            continue
        opened = {declared.path: declared for declared in extension.open_routes}
        before = {id(route) for route in app.router.routes}
        context = extension.add_routes(app, runtime)
        if context is not None:
            found.serving.append(context)
        for route in app.router.routes:
            if id(route) in before:
                continue
            declared = opened.get(getattr(route, "path", ""))
            if declared is None:
                found.private.append(route)
            elif declared.verifier:  # served open: its verifier must be there
                where = f"extension {extension.name!r}, route {declared.path!r}"
                _verifier(declared.verifier, where)
    return found


def _verifier(reference: str, where: str) -> Callable[..., Any]:
    """Import ``"module:attribute.path"`` and return it, callable.

    Raises:
        ConfigError: it does not import, or is not callable.

    """
    module, _, attributes = reference.partition(":")
    try:
        found: Any = importlib.import_module(module)
        for attribute in attributes.split("."):
            found = getattr(found, attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{where}: its verifier {reference!r} does not import: {exc}") from exc
    if not callable(found):
        raise ConfigError(f"{where}: its verifier {reference!r} is not callable")
    return found  # type: ignore[no-any-return]
