"""The values an expression sees: the caller's read-only :class:`Namespace`, and their sizes.

:func:`_length` and :func:`_text_size` estimate how big a value is (or would be as text)
before a guard of :mod:`search2o.agents._sandbox_guards` builds anything from it;
:func:`_describe` turns an evaluation's exception into the reason an ExpressionError gives.
"""

from __future__ import annotations

import reprlib
import sys
from collections.abc import Iterator, Mapping

from search2o.agents._sandbox_sizes import _check_int_text, _refuse


class Namespace:
    """Read-only attribute access over a mapping: ``Namespace({"query": "hi"}, "sys")``.

    In an expression ``sys.query`` reads ``values["query"]``; a missing key raises
    ``AttributeError("sys has no 'x'")``, which evaluation reports as an
    :class:`~search2o.agents.expressions.ExpressionError`.
    ``"query" in sys``, ``sys["query"]``, ``len(sys)`` and iterating over the keys work too.
    The namespace has no public attributes of its own, so any key (even ``name`` or ``get``) is
    reachable; it keeps a reference to ``values`` and never changes it.

    Args:
        values: the mapping to expose; keys are attribute names.
        name: what error messages call it (``sys``, ``conv``, ``agent``).

    """

    __slots__ = ("_name", "_values")

    _name: str
    _values: Mapping[str, object]

    def __init__(self, values: Mapping[str, object], name: str = "namespace") -> None:
        object.__setattr__(self, "_values", values)
        object.__setattr__(self, "_name", name)

    def __getattr__(self, attr: str) -> object:
        if attr.startswith("_"):
            raise AttributeError(attr)
        try:
            return self._values[attr]
        except KeyError:
            raise AttributeError(f"{self._name} has no {attr!r}") from None

    def __setattr__(self, attr: str, value: object) -> None:
        raise AttributeError(f"{self._name} is read-only")

    def __delattr__(self, attr: str) -> None:
        raise AttributeError(f"{self._name} is read-only")

    def __getitem__(self, key: str) -> object:
        return self._values[key]

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        # Keys only: values are conversation content and must not reach logs.
        return f"<Namespace {self._name}: {', '.join(map(str, self._values))}>"


_SCALARS: frozenset[type] = frozenset({str, int, float, bool, complex, type(None)})


_SEQUENCES = (str, bytes, bytearray, list, tuple)


_SIZED_TYPES: frozenset[type] = frozenset(
    {str, bytes, bytearray, list, tuple, dict, set, frozenset, range}
)


_BUILT_TYPES: frozenset[type] = frozenset({str, bytes, list, tuple, dict, set, frozenset})


def _length(value: object) -> int:
    """Return ``len(value)`` for a sized value, 0 for an iterator (its items are charged)."""
    kind = type(value)
    if kind in _SIZED_TYPES:
        return len(value)  # type: ignore[arg-type]
    if kind in _SCALARS:
        return 0
    try:
        return len(value)  # type: ignore[arg-type]
    except TypeError:
        return 0
    except OverflowError:
        return sys.maxsize


def _text_size(value: object, limit: int, *, data_only: bool = False) -> int:
    """Estimate the length of ``value`` as JSON text, stopping once it passes ``limit``.

    Containers are walked without rendering them, so a list holding one big string 50,000 times
    is measured in microseconds, not built. An int too long to be written as text is refused
    (``_sandbox_sizes._int_text_problem``). With ``data_only``, functions and iterators (which
    would keep a finished evaluation's guards alive) are refused.
    """
    total = 0
    stack: list[object] = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str:
            total += len(item) + 2  # type: ignore[arg-type]
        elif item is None or kind is bool:
            total += 5
        elif kind is int:
            _check_int_text(item)  # type: ignore[arg-type]
            total += item.bit_length() // 3 + 2  # type: ignore[attr-defined]
        elif kind is float:
            total += len(repr(item))
        elif isinstance(item, (list, tuple, set, frozenset)):
            total += 2 * len(item) + 2
            if total <= limit:
                stack.extend(item)
        elif isinstance(item, (Mapping, Namespace)):
            values = item._values if isinstance(item, Namespace) else item
            total += 4 * len(values) + 2
            if total <= limit:
                stack.extend(values.keys())
                stack.extend(values.values())
        elif isinstance(item, (bytes, bytearray)):
            total += len(item) + 3
        elif data_only and callable(item):
            _refuse(f"the result contains a function ({kind.__name__}), not data; call it")
        elif data_only and isinstance(item, Iterator):
            _refuse(
                f"the result contains an iterator ({kind.__name__}), not data; wrap it in list(...)"
            )
        else:
            total += 16
        if total > limit:
            return total
    return total


_short_repr = reprlib.Repr()
_short_repr.maxstring = 80
_short_repr.maxother = 80


def _describe(exc: BaseException) -> str:
    """Return ``"KeyError: 'x'"`` style text for an exception, bounded in length."""
    name = type(exc).__name__
    try:
        if isinstance(exc, KeyError) and len(exc.args) == 1:
            detail = _short_repr.repr(exc.args[0])
        else:
            detail = str(exc)
    except ValueError:  # e.g. a KeyError of an int too long to be written as text
        detail = ""
    if len(detail) > 300:
        detail = detail[:297] + "..."
    return f"{name}: {detail}" if detail else name
