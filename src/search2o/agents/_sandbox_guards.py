"""Run-time guards of the expression sandbox: the evaluation's guards, and the attribute rules.

:mod:`search2o.agents.expressions` compiles an expression with the policy of
:mod:`search2o.agents._sandbox_policy`, which rewrites every operation that can build something
large or iterate into a call of a guard. The guards are split by what they guard:

* :mod:`._sandbox_budget`: :class:`_Budget`, the state of one evaluation (steps used,
  deadline, limits) and the charges every guard makes; ``_getiter_``.
* :mod:`._sandbox_operators`: ``**``, ``*``, ``<<``, ``+``, ``%``, f-string fields,
  comparisons and chains, hashed keys, ``*``/``**`` spreading.
* :mod:`._sandbox_builtins`: the budgeted builtins (``str``, ``list``, ``sorted``, ``range``
  ...) and the static ones.
* :mod:`._sandbox_values`: :class:`Namespace` (the read-only view of the caller's values) and
  the size estimates (:func:`_length`, :func:`_text_size`), error text (:func:`_describe`).
* here: :class:`_Run`, which joins them and adds RestrictedPython's ``_getattr_`` and
  ``_getitem_``; the attribute rules (the read-only methods allowed per builtin type, the
  mutating methods refused with a clear reason, the pre-checks of str/bytes methods that can
  build far more than their inputs: ``ljust``, ``replace``, ``join`` ...).

Each guard estimates the size of its result *before* computing it and charges steps for what
it iterates, copies or builds, and for what a comparison, hash or sort walks (logical sizes and
hash groups of :mod:`search2o.agents._sandbox_sizes`, whose :func:`_refuse` stops an
evaluation). :data:`_GUARDS` and the builtins' maps name what an evaluation's globals hold;
the ``_s2o_*_`` names must match those the policy emits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from search2o.agents._sandbox_builtins import _BuiltinGuards
from search2o.agents._sandbox_operators import _OperatorGuards
from search2o.agents._sandbox_sizes import _refuse
from search2o.agents._sandbox_values import _BUILT_TYPES, Namespace, _length

# --------------------------------------------------------------------------------------------
# Attribute rules


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_STR_METHODS = _words(
    """capitalize casefold center count encode endswith expandtabs find index isalnum isalpha
    isascii isdecimal isdigit isidentifier islower isnumeric isprintable isspace istitle
    isupper join ljust lower lstrip partition removeprefix removesuffix replace rfind rindex
    rjust rpartition rsplit rstrip split splitlines startswith strip swapcase title upper
    zfill"""
)
_BYTES_METHODS = _words(
    """capitalize center count decode endswith expandtabs find hex index isalnum isalpha
    isascii isdigit islower isspace istitle isupper join ljust lower lstrip partition
    removeprefix removesuffix replace rfind rindex rjust rpartition rsplit rstrip split
    splitlines startswith strip swapcase title upper zfill"""
)
_SET_METHODS = _words(
    """copy difference intersection isdisjoint issubset issuperset symmetric_difference
    union"""
)
_INT_ATTRIBUTES = _words(
    """as_integer_ratio bit_count bit_length conjugate denominator imag numerator real"""
)
_ATTRIBUTES: dict[type, frozenset[str]] = {
    str: _STR_METHODS,
    bytes: _BYTES_METHODS,
    list: frozenset({"copy", "count", "index"}),
    tuple: frozenset({"count", "index"}),
    dict: frozenset({"copy", "get", "items", "keys", "values"}),
    set: _SET_METHODS,
    frozenset: _SET_METHODS,
    int: _INT_ATTRIBUTES,
    float: frozenset({"as_integer_ratio", "conjugate", "hex", "imag", "is_integer", "real"}),
    complex: frozenset({"conjugate", "imag", "real"}),
    range: frozenset({"count", "index", "start", "step", "stop"}),
}
_MUTATORS = _words(
    """add append clear difference_update discard extend insert intersection_update pop popitem
    remove reverse setdefault sort symmetric_difference_update update"""
)
_REFUSED_METHODS = {
    "format": "str.format is not allowed in expressions; use an f-string instead",
    "format_map": "str.format_map is not allowed in expressions; use an f-string instead",
    "translate": "str.translate is not allowed in expressions; use replace instead",
    "maketrans": "str.maketrans is not allowed in expressions; use replace instead",
    "to_bytes": "int.to_bytes is not allowed in expressions",
}
_READ_ONLY = "values are read-only in expressions; build a new one instead"
# Methods that do not scan their receiver: not charged its length.
_CHEAP_METHODS = frozenset({"endswith", "get", "items", "keys", "startswith", "values"})

# --------------------------------------------------------------------------------------------
# The per-evaluation context: step budget, clock and guards


_Precheck = Callable[["_Run", Any, tuple[Any, ...], dict[str, Any]], tuple[Any, ...]]


class _Run(_OperatorGuards, _BuiltinGuards):
    """The state of one evaluation: its limits, steps used so far, and its deadline.

    Guards and builtins are bound methods of a fresh ``_Run``, so concurrent evaluations (one per
    thread) never share a budget. Methods named like the guard they implement are installed into
    the evaluation's globals by ``Expression.evaluate`` (see :data:`_GUARDS` and
    :data:`_CONTEXT_BUILTINS`). The limits are those of ``SandboxLimits``.
    """

    __slots__ = ()

    # -- RestrictedPython guards -------------------------------------------------------------

    def getitem(self, ob: Any, index: object) -> object:
        """``_getitem_``: ``ob[index]``; a slice is a copy and is charged its length.

        A key is hashed (and compared): charged its logical size.
        """
        if type(index) is not slice:
            self.deep(index)
        value = ob[index]
        if type(index) is slice:
            self.charge(_length(value))
        return value

    def getattr_(self, ob: object, name: str) -> object:
        """``_getattr_``: attributes of a Namespace, or allow-listed ones of builtin types."""
        if name.startswith("_"):
            _refuse(f"names starting with '_' are not allowed: {name!r}")
        if isinstance(ob, Namespace):
            return getattr(ob, name)
        kind = type(ob)
        allowed = _ATTRIBUTES.get(kind)
        if allowed is None:
            allowed = next((_ATTRIBUTES[c] for c in kind.__mro__ if c in _ATTRIBUTES), None)
            if allowed is None:
                _refuse(f"attributes of {kind.__name__} values are not available in expressions")
        if name not in allowed:
            if name in _MUTATORS:
                _refuse(f"{_READ_ONLY} ({kind.__name__}.{name} changes the value)")
            if name in _REFUSED_METHODS:
                _refuse(_REFUSED_METHODS[name])
            raise AttributeError(f"{kind.__name__!r} object has no attribute {name!r}")
        value = getattr(ob, name)
        if not callable(value):
            return value
        return self._method(ob, name, value)

    def _method(self, receiver: Any, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        precheck = _PRECHECKS.get(name)
        scans = name not in _CHEAP_METHODS

        def call(*args: Any, **kwargs: Any) -> Any:
            self.charge(sum(map(_length, args)) + (_length(receiver) if scans else 0))
            if precheck is not None:
                args = precheck(self, receiver, args, kwargs)
            result = method(*args, **kwargs)
            if type(result) in _BUILT_TYPES:
                self.built(len(result), result)
            return result

        return call


# Checks run before a str/bytes method that can build far more than its inputs.
def _check_width(
    run: _Run, s: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, ...]:
    width = args[0] if args else kwargs.get("width")
    if isinstance(width, int) and width > run.max_chars:
        run.built(width, s)
    return args


def _check_expandtabs(
    run: _Run, s: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, ...]:
    tabsize = args[0] if args else kwargs.get("tabsize", 8)
    if isinstance(tabsize, int):
        if isinstance(s, str):
            run.built(len(s) + s.count("\t") * max(tabsize, 0), s)
        elif isinstance(s, bytes):
            run.built(len(s) + s.count(b"\t") * max(tabsize, 0), s)
    return args


def _check_replace(
    run: _Run, s: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, ...]:
    if len(args) >= 2 and isinstance(s, (str, bytes)):
        old, new = args[0], args[1]
        count = args[2] if len(args) > 2 else kwargs.get("count", -1)
        if isinstance(old, type(s)) and isinstance(new, type(s)) and isinstance(count, int):
            found = cast(Any, s).count(old) if old else len(s) + 1
            if count >= 0:
                found = min(found, count)
            run.built(len(s) + found * max(len(new) - len(old), 0), s)
    return args


def _check_join(
    run: _Run, s: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, ...]:
    if len(args) != 1 or not isinstance(s, (str, bytes)):
        return args
    items = list(args[0])
    size = len(s) * max(len(items) - 1, 0)
    size += sum(len(item) for item in items if isinstance(item, (str, bytes, bytearray)))
    run.built(size, s)
    return (items,)


def _check_scan(
    run: _Run, s: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, ...]:
    # list/tuple.count and .index compare their argument with each item.
    if args and isinstance(s, (list, tuple)) and run.sizes.logical(args[0]) > 1:
        size = run.sizes.logical(args[0])
        for item in s:
            cost = min(size, run.sizes.logical(item))
            if cost > 1:
                run.charge(cost)
    return args


def _check_index(
    run: _Run, s: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, ...]:
    # list.index and range.index put repr(value) in their ValueError: bound it first.
    if args:
        run.check_render(args[0])
    return _check_scan(run, s, args, kwargs)


def _check_key(run: _Run, s: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    # dict.get hashes its key.
    if args:
        run.deep(args[0])
    return args


def _check_hashes(
    run: _Run, s: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, ...]:
    # Set methods hash the items of their arguments (a set's items hold their hashes).
    checked: list[Any] = []
    for arg in args:
        if type(arg) in (set, frozenset):
            run.deep(arg)
            checked.append(arg)
        else:
            items = list(arg)
            for item in items:
                run.hashed(item)
            checked.append(items)
    return tuple(checked)


_PRECHECKS: dict[str, _Precheck] = {
    "center": _check_width,
    "ljust": _check_width,
    "rjust": _check_width,
    "zfill": _check_width,
    "expandtabs": _check_expandtabs,
    "replace": _check_replace,
    "join": _check_join,
    "index": _check_index,
    "count": _check_scan,
    "get": _check_key,
    **dict.fromkeys(
        [
            "difference",
            "intersection",
            "isdisjoint",
            "issubset",
            "issuperset",
            "symmetric_difference",
            "union",
        ],
        _check_hashes,
    ),
}


# Guards bound to the evaluation (sandbox name -> _Run attribute); they override names.
_GUARDS: dict[str, str] = {
    "_getattr_": "getattr_",
    "_getitem_": "getitem",
    "_getiter_": "getiter",
    "_s2o_add_": "add",
    "_s2o_and_": "bitand",
    "_s2o_chain_": "chain",
    "_s2o_compare_": "compare",
    "_s2o_format_": "format_",
    "_s2o_key_": "key",
    "_s2o_keys_": "keys",
    "_s2o_lshift_": "lshift",
    "_s2o_mod_": "mod",
    "_s2o_mult_": "mult",
    "_s2o_or_": "bitor",
    "_s2o_pow_": "pow",
    "_s2o_spread_": "spread",
    "_s2o_sub_": "sub",
    "_s2o_tick_": "tick",
    "_s2o_xor_": "bitxor",
}
