"""The builtins of an evaluation: those safe on their own, and those bound to its budget.

``str``, ``list``, ``sorted``, ``range`` ... are methods of the evaluation's guards that
estimate and charge what they build or iterate; :data:`_STATIC_BUILTINS` and
:data:`_CONTEXT_BUILTINS` name what an evaluation's globals hold.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from RestrictedPython.Guards import full_write_guard, guarded_iter_unpack_sequence

from search2o.agents._sandbox_budget import _Budget
from search2o.agents._sandbox_sizes import _refuse
from search2o.agents._sandbox_values import _length


class _Ordered:
    """A sort key whose ``<`` charges its run the logical size of the smaller side."""

    __slots__ = ("run", "value")

    def __init__(self, run: _Budget, value: Any) -> None:
        self.run = run
        self.value = value

    def __lt__(self, other: _Ordered) -> Any:
        cost = min(self.run.sizes.logical(self.value), self.run.sizes.logical(other.value))
        if cost > 1:
            self.run.charge(cost)
        return self.value < other.value


def _apply(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``_apply_``: RestrictedPython's call with ``*args``/``**kwargs`` (already spread-guarded)."""
    return func(*args, **kwargs)


# The builtins of every evaluation: safe on their own, or static guards.
_STATIC_BUILTINS: dict[str, object] = {
    "None": None,
    "True": True,
    "False": False,
    "abs": abs,
    "bool": bool,
    "float": float,
    "int": int,
    "len": len,
    "_apply_": _apply,
    "_iter_unpack_sequence_": guarded_iter_unpack_sequence,
    "_write_": full_write_guard,
}


# Builtins bound to the evaluation's budget (sandbox name -> _Run attribute); names override them.
_CONTEXT_BUILTINS: dict[str, str] = {
    "all": "all_",
    "any": "any_",
    "dict": "dict_",
    "enumerate": "enumerate_",
    "list": "list_",
    "max": "max_",
    "min": "min_",
    "range": "range_",
    "round": "round_",
    "set": "set_",
    "sorted": "sorted_",
    "str": "str_",
    "sum": "sum_",
    "tuple": "tuple_",
    "zip": "zip_",
}


class _BuiltinGuards(_Budget):
    """The budgeted builtins (installed under their Python names, :data:`_CONTEXT_BUILTINS`)."""

    __slots__ = ()

    def range_(self, *args: Any) -> range:
        """Return ``range(...)`` of at most ``max_steps`` items."""
        numbers = range(*args)
        size = _length(numbers)
        if size > self.max_steps:
            _refuse(
                f"too many steps: range() of {size} items is more than max_steps={self.max_steps}"
            )
        return numbers

    def str_(self, *args: Any, **kwargs: Any) -> str:
        """Return ``str(...)``, refused if the text would exceed ``max_result_chars``."""
        if args:
            self.check_render(args[0])
        text = str(*args, **kwargs)
        self.built(len(text), text)
        return text

    def list_(self, *args: Any) -> list[Any]:
        """Return ``list(...)``, charged the length of its input."""
        if args:
            self._consume(args[0])
        return list(*args)

    def tuple_(self, *args: Any) -> tuple[Any, ...]:
        """Return ``tuple(...)``, charged the length of its input."""
        if args:
            self._consume(args[0])
        return tuple(*args)

    def set_(self, *args: Any) -> set[Any]:
        """Return ``set(...)``, charged the length of its input and each item's hash."""
        if not args:
            return set()
        if len(args) > 1:
            return set(*args)  # Python's own TypeError
        return set(self._hashed_items(args[0]))

    def dict_(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        """Return ``dict(...)``, charged the length of its input and, from pairs, each key's hash.

        A mapping is copied with the hashes it holds, so only its length is charged.
        """
        if len(args) != 1:
            return dict(*args, **kwargs)
        source = args[0]
        self._consume(source)
        if isinstance(source, Mapping):
            return dict(source, **kwargs)
        pairs = [tuple(pair) for pair in source]
        for pair in pairs:
            if len(pair) == 2:
                self.hashed(pair[0])
        return dict(pairs, **kwargs)

    def sorted_(self, iterable: Any, /, *, key: Any = None, reverse: bool = False) -> list[Any]:
        """Return ``sorted(...)``, charged its input's length and each comparison of items.

        Items (or their keys) of more than one node are compared through :class:`_Ordered`,
        which charges each comparison the logical size of its smaller side: a sort makes
        about ``n log2 n`` of them, however the items share their parts.
        """
        self._consume(iterable)
        items = list(iterable)
        keys = items if key is None else [key(item) for item in items]
        if any(self.sizes.logical(k) > 1 for k in keys):
            keys = [_Ordered(self, k) for k in keys]
        elif key is None:
            return sorted(items, reverse=reverse)
        # Sorting the positions by key is what sorted(items, key=...) does, stability included.
        order = sorted(range(len(items)), key=keys.__getitem__, reverse=reverse)
        return [items[i] for i in order]

    def min_(self, *args: Any, **kwargs: Any) -> Any:
        """Return ``min(...)``, charged its input's length and the comparisons (see ``max``)."""
        return self._extreme(min, args, kwargs)

    def max_(self, *args: Any, **kwargs: Any) -> Any:
        """Return ``max(...)``, charged its input's length and the logical size of each item.

        Each item (or key) is compared with the best so far, so the comparisons cost at most
        the sum of the items' logical sizes.
        """
        return self._extreme(max, args, kwargs)

    def _extreme(
        self, pick: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if len(args) == 1:
            self._consume(args[0])
            args = (list(args[0]),)
        key = kwargs.get("key")
        if key is None:
            for item in args[0] if len(args) == 1 else args:
                self.deep(item)
        else:

            def charged_key(item: Any) -> Any:
                found = key(item)
                self.deep(found)
                return found

            kwargs = {**kwargs, "key": charged_key}
        return pick(*args, **kwargs)

    def sum_(self, iterable: Any, /, start: Any = 0) -> Any:
        """Return ``sum(...)`` of numbers only (summing lists or strs is quadratic)."""
        if not isinstance(start, (int, float, complex)):
            _refuse("sum() adds numbers only; use ''.join(...) or a comprehension")
        self._consume(iterable)
        return sum(iterable, start)

    def any_(self, iterable: Any, /) -> bool:
        """Return ``any(...)``, charged the length of its input."""
        self._consume(iterable)
        return any(iterable)

    def all_(self, iterable: Any, /) -> bool:
        """Return ``all(...)``, charged the length of its input."""
        self._consume(iterable)
        return all(iterable)

    def enumerate_(self, iterable: Any, start: int = 0) -> enumerate[Any]:
        """Return ``enumerate(...)``, charged the length of its input."""
        self._consume(iterable)
        return enumerate(iterable, start)

    def zip_(self, *iterables: Any, strict: bool = False) -> zip[Any]:
        """Return ``zip(...)``, charged the lengths of its inputs."""
        for iterable in iterables:
            self._consume(iterable)
        return zip(*iterables, strict=strict)

    def round_(self, number: Any, ndigits: Any = None) -> Any:
        """Return ``round(...)``; rounding an int to ``-n`` digits needs ``10**n``."""
        if isinstance(number, int) and isinstance(ndigits, int) and -ndigits > self.max_bits:
            _refuse(f"round() to {ndigits} digits is out of range")
        return round(number, ndigits)
