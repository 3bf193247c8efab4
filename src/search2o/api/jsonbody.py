"""Strict JSON request bodies: the one parser every JSON route uses.

RFC 8259 is the rule: a body is UTF-8 (section 8.1), holds no ``NaN``/``Infinity`` (not JSON
values, section 6), repeats no name within an object (section 4 leaves the outcome of a
duplicate to the parser; I-JSON, RFC 7493 section 2.3, forbids it, and a body whose meaning
depends on which copy wins is refused) and is parsed to a bounded depth (section 9 lets a
parser limit nesting); Python's limit on the digits of an int (4300,
``sys.get_int_max_str_digits``) bounds numbers.
Every refusal is a :class:`json.JSONDecodeError`, which FastAPI turns into a request validation
error (``type: json_invalid``) that :mod:`search2o.api.errors` answers as 422 naming ``body``
and the reason — never a 400 or a 500.

Routers use :class:`StrictJsonRoute` as their ``route_class``; it hands the route a
:class:`StrictJsonRequest`, whose :meth:`~StrictJsonRequest.json` is this parser.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

__all__ = ["StrictJsonRequest", "StrictJsonRoute", "json_depth", "parse_json_body"]

DEFAULT_MAX_DEPTH = 64


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value (RFC 8259, section 6)")


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for name, value in pairs:
        if name in obj:
            shown = name if len(name) <= 40 else name[:40] + "…"
            raise ValueError(f"duplicate name {shown!r} in an object (RFC 7493, section 2.3)")
        obj[name] = value
    return obj


def json_depth(value: Any, stop_above: int) -> int:
    """Return the nesting depth of a parsed JSON value (a scalar is 0), up to ``stop_above + 1``.

    Iterative, so a deep value cannot exhaust the stack; it stops as soon as the depth passes
    ``stop_above``.
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        if deepest > stop_above:
            return deepest
        stack.extend((child, depth) for child in children)
    return deepest


def parse_json_body(data: bytes, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """Parse a request body as strict JSON.

    Args:
        data: the raw body.
        max_depth: the deepest nesting of arrays and objects accepted.

    Returns:
        The parsed value.

    Raises:
        json.JSONDecodeError: not UTF-8, not JSON, ``NaN``/``Infinity``, a name repeated within
            an object, a number with more than 4300 digits, or nested deeper than
            ``max_depth``; ``msg`` says which.

    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise json.JSONDecodeError(f"not UTF-8 (byte {exc.start})", "", 0) from None
    try:
        value = json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_unique_object)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise json.JSONDecodeError(f"nested deeper than {max_depth} levels", "", 0) from None
    except ValueError as exc:
        reason = str(exc)
        if "digits" in reason:
            reason = "a number has more than 4300 digits"
        raise json.JSONDecodeError(reason, "", 0) from None
    if json_depth(value, max_depth) > max_depth:
        raise json.JSONDecodeError(f"nested deeper than {max_depth} levels", "", 0)
    return value


class StrictJsonRequest(Request):
    """A request whose :meth:`json` is :func:`parse_json_body` with the configured depth."""

    async def json(self) -> Any:
        """Return the body parsed by :func:`parse_json_body` (cached).

        Raises:
            json.JSONDecodeError: as :func:`parse_json_body`.

        """
        if not hasattr(self, "_json"):
            runtime = getattr(self.app.state, "runtime", None)
            depth = runtime.settings.api.max_json_depth if runtime else DEFAULT_MAX_DEPTH
            self._json = parse_json_body(await self.body(), depth)
        return self._json


class StrictJsonRoute(APIRoute):
    """An ``APIRoute`` whose handler receives a :class:`StrictJsonRequest`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """Wrap FastAPI's handler so the body is parsed by :func:`parse_json_body`."""
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(StrictJsonRequest(request.scope, request.receive))

        return strict
