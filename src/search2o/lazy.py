"""Lazy re-exports for a package's ``__init__`` (PEP 562, module ``__getattr__``).

A package that re-exports its public names eagerly makes every import of any of its modules
pay for all of them: ``import search2o.knowledge.isolation`` used to load the web server,
SQLAlchemy and the models (1.3 s) because ``search2o/__init__.py`` imported ``create_app``. A
child process that only parses a file must start in a fraction of that. With
:func:`lazy_exports` a name is imported on first access, and ``from search2o import Runtime``
works as before. https://peps.python.org/pep-0562/
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, names: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return a package's module-level ``__getattr__`` and ``__dir__`` for lazy re-exports.

    Args:
        package: the package's ``__name__`` (named in the error of an unknown attribute).
        names: public name -> absolute name of the module that defines it.

    Returns:
        ``(__getattr__, __dir__)``. ``__getattr__(name)`` imports ``names[name]`` and returns
        its attribute ``name``; it raises ``AttributeError`` for a name not in ``names``.

    """

    def getattr_(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    def dir_() -> list[str]:
        return sorted(names)

    return getattr_, dir_
