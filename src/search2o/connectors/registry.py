"""The installed connector kinds, gathered from the extensions registry.

Every connector, built in or not, arrives the same way: an extension
(:class:`search2o.extensions.Extension`) lists its connector classes in ``connectors``.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from search2o.connectors.contract import Connector
from search2o.errors import ConfigError
from search2o.extensions import Extension, discover

__all__ = ["connector_kinds", "kinds_of"]

_KIND = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


def kinds_of(extensions: tuple[Extension, ...]) -> dict[str, type[Connector]]:
    """Return the connector classes of ``extensions`` by kind.

    Raises:
        ConfigError: a class is not a :class:`Connector`, its kind breaks the rule, its
            ``Settings`` do not refuse unknown keys, or two share a kind; the message names
            the extension.

    """
    found: dict[str, type[Connector]] = {}
    for extension in extensions:
        for entry in extension.connectors:
            where = f"extension {extension.name!r}"
            cls = _resolve(entry, where)
            if not (isinstance(cls, type) and issubclass(cls, Connector)):
                raise ConfigError(f"{where}: {cls!r} is not a search2o Connector class")
            kind = getattr(cls, "kind", "")
            if not isinstance(kind, str) or not _KIND.match(kind):
                raise ConfigError(f"{where}: connector kind {kind!r} must match {_KIND.pattern}")
            if cls.Settings.model_config.get("extra") != "forbid":
                raise ConfigError(
                    f"{where}: the {kind} connector's Settings must refuse unknown keys"
                )
            if kind in found:
                raise ConfigError(f"{where}: connector kind {kind!r} is registered twice")
            found[kind] = cls
    return found


def connector_kinds() -> dict[str, type[Connector]]:
    """Return every installed connector class by kind (:func:`search2o.extensions.discover`).

    Raises:
        ConfigError: as :func:`kinds_of`.

    """
    return kinds_of(discover())


def _resolve(entry: Any, where: str) -> Any:
    """Return ``entry``, or the object its ``"module:attribute"`` path names.

    Raises:
        ConfigError: the path does not import.

    """
    if not isinstance(entry, str):
        return entry
    module, _, attribute = entry.partition(":")
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{where}: connector {entry!r} does not import: {exc}") from exc
