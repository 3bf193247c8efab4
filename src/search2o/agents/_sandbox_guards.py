"""Run-time guards of the expression sandbox: the per-evaluation budget and what it checks.

:mod:`search2o.agents.expressions` compiles an expression with the policy of
:mod:`search2o.agents._sandbox_policy`, which rewrites every operation that can build something
large or iterate into a call of a guard. This module holds those guards and the tables that
drive them:

* :class:`_Run`, the state of one evaluation (steps used, deadline, limits). Its bound methods
  are installed into the evaluation's globals: RestrictedPython's ``_getattr_``, ``_getitem_``,
  ``_getiter_``, our ``_s2o_*_`` operator guards (``**``, ``*``, ``<<``, ``+``, ``%``,
  f-string fields, comparisons and chains, hashed keys, ``*``/``**`` spreading, lambda calls)
  and the budgeted builtins (``str``, ``list``, ``sorted``, ``range`` ...). Each estimates the
  size of its result *before* computing it and charges steps for what it iterates, copies or
  builds, and for what a comparison, hash or sort walks (logical sizes and hash groups of
  :mod:`search2o.agents._sandbox_sizes`).
* The attribute rules: the read-only methods allowed per builtin type, the mutating methods
  refused with a clear reason, and the pre-checks of str/bytes methods that can build far more
  than their inputs (``ljust``, ``replace``, ``join`` ...).
* Size estimation (:func:`_length`, :func:`_text_size`) and error text (:func:`_describe`).
* :class:`Namespace`, the read-only view of the caller's values (re-exported by
  :mod:`search2o.agents.expressions`, its public home), since ``_getattr_`` and the size
  estimate treat it specially.
* :func:`_refuse` / :class:`_RefusedError` (from :mod:`search2o.agents._sandbox_sizes`): how a
  guard stops an evaluation; the reason becomes the ExpressionError's reason.

The maps :data:`_STATIC_BUILTINS`, :data:`_CONTEXT_BUILTINS` and :data:`_GUARDS` name what an
evaluation's globals hold; the ``_s2o_*_`` names must match those the policy emits.
"""

from __future__ import annotations

import math
import operator
import re
import reprlib
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, cast

from RestrictedPython.Guards import full_write_guard, guarded_iter_unpack_sequence

from search2o.agents._sandbox_sizes import _check_int_text, _refuse, _Sizes

# How often (in iteration steps) the wall clock is read while a comprehension runs.
_CLOCK_EVERY = 1000


# --------------------------------------------------------------------------------------------
# Namespace


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


# --------------------------------------------------------------------------------------------
# Sizes


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
# Containers whose ``in`` is a hash lookup, not a scan.
_HASHED: frozenset[type] = frozenset({dict, set, frozenset, type({}.keys()), type({}.items())})
# Operands that make ``|``, ``&``, ``-``, ``^`` a set operation (hashing the other operand).
_SET_LIKE: frozenset[type] = frozenset({set, frozenset, type({}.keys()), type({}.items())})
_TEXTS = (str, bytes, bytearray)
# ``Compare`` operators by the AST class name the policy passes (``a < b`` -> "Lt").
_COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
    "Eq": operator.eq,
    "NotEq": operator.ne,
    "Lt": operator.lt,
    "LtE": operator.le,
    "Gt": operator.gt,
    "GtE": operator.ge,
    "Is": operator.is_,
    "IsNot": operator.is_not,
}

# Width and precision in a format spec, and in a printf-style conversion of ``%``.
_DIGITS = re.compile(r"\d+")
_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?")


# --------------------------------------------------------------------------------------------
# The per-evaluation context: step budget, clock and guards


_Precheck = Callable[["_Run", Any, tuple[Any, ...], dict[str, Any]], tuple[Any, ...]]


class _Run:
    """The state of one evaluation: its limits, steps used so far, and its deadline.

    Guards and builtins are bound methods of a fresh ``_Run``, so concurrent evaluations (one per
    thread) never share a budget. Methods named like the guard they implement are installed into
    the evaluation's globals by ``Expression.evaluate`` (see :data:`_GUARDS` and
    :data:`_CONTEXT_BUILTINS`). The limits are those of ``SandboxLimits``.
    """

    __slots__ = (
        "deadline",
        "max_bits",
        "max_chars",
        "max_seconds",
        "max_steps",
        "next_check",
        "sizes",
        "steps",
    )

    def __init__(
        self, *, max_steps: int, max_seconds: float, max_chars: int, max_bits: int
    ) -> None:
        self.max_steps = max_steps
        self.max_chars = max_chars
        self.max_bits = max_bits
        self.max_seconds = max_seconds
        self.steps = 0
        self.next_check = min(_CLOCK_EVERY, self.max_steps + 1)
        self.deadline = time.perf_counter() + max_seconds
        self.sizes = _Sizes(max_steps + 1)

    # -- budget ------------------------------------------------------------------------------

    def checkpoint(self) -> None:
        if self.steps > self.max_steps:
            _refuse(
                f"too many steps: more than max_steps={self.max_steps} "
                "(each item iterated and each character or item copied or built is a step)"
            )
        if time.perf_counter() > self.deadline:
            _refuse(f"took longer than max_seconds={self.max_seconds:g} s")
        self.next_check = min(self.steps + _CLOCK_EVERY, self.max_steps + 1)

    def charge(self, steps: int) -> None:
        self.steps += steps
        self.checkpoint()

    def tick(self) -> None:
        """Charge one step per call of a lambda (installed as ``_s2o_tick_``)."""
        self.steps += 1
        if self.steps >= self.next_check:
            self.checkpoint()

    def built(self, size: int, sample: object) -> None:
        """Refuse to build a str/bytes/list of ``size`` items above the limit; else charge it."""
        if size > self.max_chars:
            unit = "characters" if isinstance(sample, (str, bytes, bytearray)) else "items"
            _refuse(
                f"would build a {type(sample).__name__} of {size} {unit}, "
                f"more than max_result_chars={self.max_chars}"
            )
        self.charge(size)

    def check_render(self, value: object) -> None:
        """Refuse to turn a value into text when the text would exceed the limit.

        An int too long to be written as text is refused too (Python would raise).
        """
        if type(value) is int:
            _check_int_text(value)  # type: ignore[arg-type]
            return
        if type(value) in _SCALARS:
            return
        size = _text_size(value, self.max_chars)
        if size > self.max_chars:
            _refuse(
                f"turning a {type(value).__name__} into text would take more than "
                f"max_result_chars={self.max_chars} characters"
            )
        self.charge(size)

    def deep(self, value: object) -> int:
        """Charge the logical size of ``value`` (a hash or comparison walks it); return it.

        One node (a scalar, a short str) is free: such work is O(1).
        """
        size = self.sizes.logical(value)
        if size > 1:
            self.charge(size)
        return size

    def hashed(self, key: object) -> None:
        """Charge for inserting ``key`` into a set or dict: its hash, and its hash group."""
        size = self.deep(key)
        group = self.sizes.hash_group(key)
        if group is not None:
            self.charge(len(group) * size)  # comparing with each key of its group
            self.sizes.join(group, key)

    def scan(self, needle: object, items: Iterable[Any]) -> bool:
        """``needle in items`` item by item, each comparison charged (a deep ``needle``)."""
        size = self.sizes.logical(needle)
        for item in items:
            cost = min(size, self.sizes.logical(item))
            if cost > 1:
                self.charge(cost)
            if item is needle or item == needle:
                return True
        return False

    def check_width(self, digits: str, what: str) -> None:
        if len(digits) > len(str(self.max_chars)) or int(digits) > self.max_chars:
            _refuse(f"{what} {digits} is more than max_result_chars={self.max_chars}")

    # -- RestrictedPython guards -------------------------------------------------------------

    def getiter(self, ob: Iterable[object]) -> Iterator[object]:
        """``_getiter_``: iterate ``ob`` charging one step per item."""
        return self._counted(iter(ob))

    def _counted(self, it: Iterator[object]) -> Iterator[object]:
        for item in it:
            self.steps += 1
            if self.steps >= self.next_check:
                self.checkpoint()
            yield item

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

    def compare(self, op: str, a: Any, b: Any) -> Any:
        """``_s2o_compare_``: ``a <op> b`` for one ``Compare`` operator (AST class name).

        ``==``, ``<`` ... recurse into containers in one C call: charged the logical size of
        the smaller side (at most that many pairs of nodes are compared). ``in`` is
        :meth:`contains`; ``is`` is free.
        """
        if op == "In":
            return self.contains(b, a)
        if op == "NotIn":
            return not self.contains(b, a)
        if op != "Is" and op != "IsNot":
            cost = min(self.sizes.logical(a), self.sizes.logical(b))
            if cost > 1:
                self.charge(cost)
        return _COMPARISONS[op](a, b)

    def chain(self, ops: tuple[str, ...], left: Any, right: Any, *later: Callable[[], Any]) -> Any:
        """``_s2o_chain_``: ``a < b < c`` as Python runs it: ``a < b and b < c``.

        Each operand is evaluated once, in order; ``later`` are the operands after the
        second, as functions, so a false comparison stops before they are evaluated.
        """
        result = self.compare(ops[0], left, right)
        for op, operand in zip(ops[1:], later, strict=True):
            if not result:
                return result
            left, right = right, operand()
            result = self.compare(op, left, right)
        return result

    def contains(self, container: Any, needle: Any) -> bool:
        """``needle in container``, charged what it costs.

        A str scan costs its length; a hash lookup (dict, set, a namespace) the logical size
        of ``needle``; a sequence scan its length, and item by item the comparisons when
        ``needle`` is more than one node.
        """
        kind = type(container)
        if kind in _HASHED or isinstance(container, Namespace):
            self.deep(needle)
            return needle in container
        if kind in _TEXTS or kind is range or self.sizes.logical(needle) <= 1:
            self.charge(_length(container))
            return needle in container
        self.charge(_length(container))
        return self.scan(needle, container)

    def key(self, value: Any) -> Any:
        """``_s2o_key_``: a key of a dict or set display or comprehension, hashed."""
        self.hashed(value)
        return value

    def keys(self, value: Any) -> Any:
        """``_s2o_keys_``: ``{*items}`` / ``{**mapping}`` in a display: every key hashed."""
        if isinstance(value, Mapping):
            self.charge(len(value))
            for key in value:
                self.hashed(key)
            return value
        items = self._hashed_items(value)
        return items

    def _hashed_items(self, iterable: Any) -> list[Any]:
        self._consume(iterable)
        items = list(iterable)
        for item in items:
            self.hashed(item)
        return items

    def _set_operands(self, a: Any, b: Any) -> None:
        """Charge a set operation: set operands their logical size, others each item hashed."""
        kinds = (type(a), type(b))
        if not any(kind in _SET_LIKE for kind in kinds):
            return
        # A dict view takes any iterable as its other operand; sets take sets only.
        views = any(kind in _SET_LIKE and kind not in (set, frozenset) for kind in kinds)
        for operand in (a, b):
            if type(operand) in (set, frozenset):
                self.deep(operand)
            elif views and isinstance(operand, Iterable):
                for item in operand:
                    self.hashed(item)

    def spread(self, value: Any) -> Any:
        """``_s2o_spread_``: ``*value`` / ``**value`` copies; charge its length."""
        size = _length(value)
        if size:
            self.charge(size)
            return value
        if isinstance(value, Mapping):
            return value
        return self.getiter(value)

    # -- operators ---------------------------------------------------------------------------

    def add(self, a: Any, b: Any) -> Any:
        """``_s2o_add_``: ``a + b``; concatenation is bounded by ``max_result_chars``."""
        if isinstance(a, _SEQUENCES) and isinstance(b, _SEQUENCES):
            self.built(len(a) + len(b), a)
        return a + b

    def mult(self, a: Any, b: Any) -> Any:
        """``_s2o_mult_``: ``a * b``; ints bounded in bits, repetition in size, before computing."""
        if isinstance(a, int) and isinstance(b, int):
            if a and b:
                self._check_bits(a.bit_length() + b.bit_length())
        elif isinstance(a, _SEQUENCES) and isinstance(b, int):
            self.built(len(a) * max(b, 0), a)
        elif isinstance(b, _SEQUENCES) and isinstance(a, int):
            self.built(len(b) * max(a, 0), b)
        return a * b

    def pow(self, a: Any, b: Any) -> Any:
        """``_s2o_pow_``: ``a ** b``; for ints, ``b * log2|a|`` must fit in ``max_int_bits``."""
        if isinstance(a, int) and isinstance(b, int) and b > 0 and abs(a) > 1:
            if b > self.max_bits:
                self._check_bits(b)
            self._check_bits(math.ceil(b * math.log2(abs(a))))
        return a**b

    def lshift(self, a: Any, b: Any) -> Any:
        """``_s2o_lshift_``: ``a << b``; the shifted int must fit in ``max_int_bits``."""
        if isinstance(a, int) and isinstance(b, int) and a and b > 0:
            self._check_bits(a.bit_length() + b)
        return a << b

    def mod(self, a: Any, b: Any) -> Any:
        """``_s2o_mod_``: ``a % b``; printf-style formatting of str/bytes is bounded."""
        if not isinstance(a, (str, bytes)):
            return a % b
        text = a if isinstance(a, str) else a.decode("latin-1")
        star = False
        for match in _PERCENT_SPEC.finditer(text):
            for group in match.groups():
                if group == "*":
                    star = True
                elif group:
                    self.check_width(group, "format width or precision")
        if star:
            for arg in b if isinstance(b, tuple) else (b,):
                if isinstance(arg, int) and abs(arg) > self.max_chars:
                    self.check_width(str(abs(arg)), "format width or precision")
        self.check_render(b)
        result = a % b
        self.built(len(result), result)
        return result

    def sub(self, a: Any, b: Any) -> Any:
        """``_s2o_sub_``: ``a - b``; a set operation is charged its operands and result."""
        self._set_operands(a, b)
        return self._charged(a - b)

    def bitor(self, a: Any, b: Any) -> Any:
        """``_s2o_or_``: ``a | b``; a set operation or dict merge is charged as ``-``."""
        self._set_operands(a, b)
        return self._charged(a | b)

    def bitand(self, a: Any, b: Any) -> Any:
        """``_s2o_and_``: ``a & b``; a set operation is charged as ``-``."""
        self._set_operands(a, b)
        return self._charged(a & b)

    def bitxor(self, a: Any, b: Any) -> Any:
        """``_s2o_xor_``: ``a ^ b``; a set operation is charged as ``-``."""
        self._set_operands(a, b)
        return self._charged(a ^ b)

    def _charged(self, value: Any) -> Any:
        if type(value) in _BUILT_TYPES:
            self.charge(len(value))
        return value

    def _check_bits(self, bits: int) -> None:
        if bits > self.max_bits:
            _refuse(
                f"the number would have about {bits} bits, more than max_int_bits={self.max_bits}"
            )

    def format_(self, value: Any, conversion: int, spec: str) -> str:
        """``_s2o_format_``: one f-string field, ``format(conv(value), spec)``, bounded."""
        if spec:
            for digits in _DIGITS.findall(spec):
                self.check_width(digits, "format width or precision")
        if type(value) is str and conversion == -1 and not spec:
            text = value
        else:
            self.check_render(value)
            if conversion == ord("s"):
                value = str(value)
            elif conversion == ord("r"):
                value = repr(value)
            elif conversion == ord("a"):
                value = ascii(value)
            text = format(value, spec)
        self.built(len(text), text)
        return text

    # -- builtins ----------------------------------------------------------------------------

    def _consume(self, iterable: object) -> None:
        self.charge(_length(iterable))

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


class _Ordered:
    """A sort key whose ``<`` charges its run the logical size of the smaller side."""

    __slots__ = ("run", "value")

    def __init__(self, run: _Run, value: Any) -> None:
        self.run = run
        self.value = value

    def __lt__(self, other: _Ordered) -> Any:
        cost = min(self.run.sizes.logical(self.value), self.run.sizes.logical(other.value))
        if cost > 1:
            self.run.charge(cost)
        return self.value < other.value


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
