"""What every settings section shares: URL rules, field helpers and the typed look-up of a section.

The root :class:`search2o.config.Settings` assembles the core's sections and the sections that
extensions contribute (:mod:`search2o.extensions`); a section module imports this one, never
the root, so a section can live next to its package without an import cycle.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, Field

from search2o.errors import ConfigError
from search2o.netpolicy import url_problem

__all__ = ["Endpoint", "edit_pause", "endpoint_url", "section_of", "token_url"]

SectionT = TypeVar("SectionT", bound=BaseModel)


def endpoint_url(value: str | None) -> str | None:
    """Check a configured model or search endpoint by the one URL policy (netpolicy).

    Plain http is allowed here (model servers often run on a private network); credentials in
    the URL are not (they belong in ``api_key``).
    """
    if value is None:
        return None
    problem = url_problem(value, secure=False)
    if problem is not None:
        raise ValueError(problem)
    return value


Endpoint = Annotated[str | None, AfterValidator(endpoint_url)]
"""A model or search endpoint's base URL, checked by :func:`endpoint_url`."""


def token_url(value: str | None) -> str | None:
    """Check a URL a messenger's bot token (or our service token) is sent to; return its base.

    https, plain http to loopback only, no query (:func:`search2o.netpolicy.url_problem`);
    returned stripped, without a trailing slash (each section adds its own convention).

    Raises:
        ValueError: the URL's problem, which pydantic reports naming the setting.

    """
    if value is None:
        return None
    problem = url_problem(value, secure=True, query=False)
    if problem is not None:
        raise ValueError(problem)
    return value.strip().rstrip("/")


def edit_pause(default: float, what: str = "edits") -> Any:
    """Return the ``update_every_s`` field of a messenger section: its own default, 0-60 s."""
    return Field(
        default=default,
        ge=0,
        le=60,
        description=f"shortest pause between two {what} of one answer",
    )


def section_of(settings: object, name: str, kind: type[SectionT]) -> SectionT:
    """Return the section ``name`` of ``settings``, typed as ``kind``.

    An extension's section is a field of the assembled root (:func:`search2o.config.Settings`),
    which type checkers do not see; its package reads it through this look-up.

    Raises:
        ConfigError: ``settings`` has no such section, or it is not a ``kind`` (the extension
            that contributes it is not installed, or another took its name).

    """
    value = getattr(settings, name, None)
    if not isinstance(value, kind):
        raise ConfigError(
            f"settings section {name!r} is not a {kind.__name__}: the extension that "
            "contributes it is not installed (pip install it), or another took its name"
        )
    return value
