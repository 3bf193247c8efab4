"""Dynamic strings of the Agent Engine, evaluated in a sandbox.

An agent definition is JSON whose string values may be *dynamic*: a string whose whole value,
after stripping outer whitespace, starts with ``{`` and ends with ``}`` holds a Python
*expression* between the braces (``"{ sys.query }"``, ``"{ f'Fly {airline}' }"``,
``"{ {'a': 1} }"``). Any other string is a literal and is used as is.

How an expression is run
    The text is parsed in ``eval`` mode and compiled by RestrictedPython
    (https://restrictedpython.readthedocs.io/, "usage/basic_usage" and "usage/policy") with our
    own policy, a subclass of ``RestrictingNodeTransformer``. The compiled code never sees the real
    builtins: its globals hold the caller's ``names``, a small set of safe builtins and the guard
    functions that RestrictedPython's rewritten code calls (``_getattr_``, ``_getitem_``,
    ``_getiter_``, ``_iter_unpack_sequence_``, ``_write_``) plus our own ``_s2o_*_`` guards.

What the sandbox allows
    Names given by the caller (the runner passes ``sys``, ``conv`` and ``agent`` as
    :class:`Namespace` objects, local variables by name, and ``result``), literals, f-strings,
    comprehensions, conditional expressions, ``lambda`` (e.g. a ``sorted`` key), slicing,
    comparisons, boolean logic and arithmetic; the read-only methods of ``str``, ``bytes``,
    ``list``, ``tuple``, ``dict``, ``set``, numbers and ``range``; the builtins ``len str int float
    bool list dict tuple set sorted min max sum any all enumerate zip range round abs``.

What it refuses, and why
    * At compile time (:class:`ExpressionSyntaxError`): any name or attribute starting with ``_``
      (this closes ``().__class__.__bases__[0].__subclasses__()`` and ``__import__``),
      ``print``, assignment expressions (``:=``), ``yield``, ``await``; RestrictedPython's own
      checks apply too.
    * At run time (:class:`ExpressionError`): every name that is not given (``open``, ``getattr``,
      ``type``, ``vars``, ``eval``, ``exec``, ``compile``, ``globals``, ``format`` ...);
      attributes of any type outside the list above; ``str.format``/``format_map`` (they can
      reach attributes and build unbounded text: use an f-string); methods that change a value
      (``append``, ``update``, ``sort`` ...): values are read-only, build a new one instead.
    * Work and memory are bounded per evaluation by :class:`SandboxLimits`. CPython cannot
      interrupt one C-level operation such as ``10**10**10`` or ``'x' * 10**10``, so no timer
      could stop those: instead every operation that can build something large is rewritten into
      a guard that estimates the size of its result *before* computing it (``**``, ``*``, ``<<``,
      ``+``, ``%`` formatting, f-string fields, ``str()``, ``str.join``/``replace``/``ljust``
      ...), and every operation that iterates or copies charges steps: one per item passed
      through ``_getiter_`` (comprehensions, unpacking), the length of its input for builtins
      and methods, the size of what it built for the guards. The wall clock is checked whenever
      steps are charged in bulk and every 1000 iteration steps.

What remains outside the bounds
    A C-level operation that neither builds nor is charged (``==`` or ``<`` on big containers,
    ``hash`` of a big tuple) costs up to ``O(max_steps)`` per call; with the clock checked every
    1000 steps a loop of them can overrun ``max_seconds`` by roughly 1000 such calls (``in`` is
    charged the length it scans). Objects from the caller's ``names`` are trusted: they should
    be JSON-like values and :class:`Namespace` objects, and since methods that mutate are
    refused, the caller's values cannot be changed (passing copies is still the simplest way
    to be sure).
"""

from __future__ import annotations

import ast
import functools
import math
import re
import reprlib
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import CodeType
from typing import Any, NoReturn, cast

from RestrictedPython.compile import compile_restricted_eval
from RestrictedPython.Guards import full_write_guard, guarded_iter_unpack_sequence
from RestrictedPython.transformer import RestrictingNodeTransformer, copy_locations

from search2o.errors import Search2oError

__all__ = [
    "Expression",
    "ExpressionError",
    "ExpressionSyntaxError",
    "Namespace",
    "SandboxLimits",
    "compile_expression",
    "is_dynamic",
    "parse_dynamic",
    "render",
]

# How often (in iteration steps) the wall clock is read while a comprehension runs.
_CLOCK_EVERY = 1000
_CACHE_SIZE = 4096
_FILENAME = "<expression>"


# --------------------------------------------------------------------------------------------
# Errors and limits


class ExpressionSyntaxError(Exception):
    """An expression cannot be compiled: bad syntax, empty, or a construct the sandbox refuses.

    Raised by :func:`compile_expression` and :func:`parse_dynamic`, typically while a definition
    is validated, so the caller can name the field.

    Args:
        reason: what is wrong, e.g. ``"invalid syntax at column 7"`` or
            ``"names starting with '_' are not allowed: '__class__'"``.
        source: the expression text, when known; the message then quotes it.

    """

    def __init__(self, reason: str, source: str = "") -> None:
        super().__init__(f"expression {{ {source} }}: {reason}" if source else reason)
        self.reason = reason
        self.source = source


class ExpressionError(Search2oError):
    """Evaluating an expression failed or was stopped by the sandbox.

    Every exception raised while an expression runs (``ZeroDivisionError``, ``KeyError``,
    ``NameError`` ...) and every limit of :class:`SandboxLimits` that is exceeded becomes this
    error; nothing else escapes :meth:`Expression.evaluate`.

    Args:
        expression: the expression text (between the braces).
        reason: e.g. ``"ZeroDivisionError: division by zero"``, ``"KeyError: 'x'"`` or
            ``"too many steps: ..."``.

    """

    def __init__(self, expression: str, reason: str) -> None:
        super().__init__(f"expression {{ {expression} }}: {reason}")
        self.expression = expression
        self.reason = reason


@dataclass(frozen=True)
class SandboxLimits:
    """Bounds on the work and memory of one evaluation.

    Attributes:
        max_steps: budget of steps: one per item iterated through ``_getiter_``, plus the size
            of what guarded operations copy or build (characters, items).
        max_seconds: wall clock per evaluation, checked whenever steps are charged in bulk and
            every 1000 iteration steps.
        max_result_chars: size of the value produced (``len`` of a str; for containers, about
            the length of their JSON text); also the bound of any single str, bytes or list
            built by a guarded operation, and of any width or precision in a format spec.
        max_int_bits: an int produced by a guarded ``**``, ``<<`` or ``*`` must fit in this
            many bits; checked before computing.

    Raises:
        ValueError: a limit is not positive.

    """

    max_steps: int = 100_000
    max_seconds: float = 1.0
    max_result_chars: int = 100_000
    max_int_bits: int = 4096

    def __post_init__(self) -> None:
        for name in ("max_steps", "max_seconds", "max_result_chars", "max_int_bits"):
            if not getattr(self, name) > 0:
                raise ValueError(
                    f"SandboxLimits.{name} must be positive, got {getattr(self, name)}"
                )


DEFAULT_LIMITS = SandboxLimits()


class _RefusedError(Exception):
    """Raised inside a sandboxed evaluation; its reason becomes the ExpressionError's reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _refuse(reason: str) -> NoReturn:
    raise _RefusedError(reason)


# --------------------------------------------------------------------------------------------
# Namespace


class Namespace:
    """Read-only attribute access over a mapping: ``Namespace({"query": "hi"}, "sys")``.

    In an expression ``sys.query`` reads ``values["query"]``; a missing key raises
    ``AttributeError("sys has no 'x'")``, which evaluation reports as an :class:`ExpressionError`.
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
    is measured in microseconds, not built. With ``data_only``, functions and iterators (which
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
    if isinstance(exc, KeyError) and len(exc.args) == 1:
        detail = _short_repr.repr(exc.args[0])
    else:
        detail = str(exc)
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
    the evaluation's globals by :meth:`Expression.evaluate`.
    """

    __slots__ = (
        "deadline",
        "max_bits",
        "max_chars",
        "max_seconds",
        "max_steps",
        "next_check",
        "steps",
    )

    def __init__(self, limits: SandboxLimits) -> None:
        self.max_steps = limits.max_steps
        self.max_chars = limits.max_result_chars
        self.max_bits = limits.max_int_bits
        self.max_seconds = limits.max_seconds
        self.steps = 0
        self.next_check = min(_CLOCK_EVERY, self.max_steps + 1)
        self.deadline = time.perf_counter() + limits.max_seconds

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
        """Refuse to turn a container into text when the text would exceed the limit."""
        if type(value) in _SCALARS:
            return
        size = _text_size(value, self.max_chars)
        if size > self.max_chars:
            _refuse(
                f"turning a {type(value).__name__} into text would take more than "
                f"max_result_chars={self.max_chars} characters"
            )
        self.charge(size)

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
        """``_getitem_``: ``ob[index]``; a slice is a copy and is charged its length."""
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

    def searched(self, container: Any) -> Any:
        """``_s2o_in_``: ``x in container`` scans a sequence; charge its length."""
        if type(container) not in _HASHED and not isinstance(container, Namespace):
            self.charge(_length(container))
        return container

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
        """``_s2o_sub_``: ``a - b``; a set result is charged its size."""
        return self._charged(a - b)

    def bitor(self, a: Any, b: Any) -> Any:
        """``_s2o_or_``: ``a | b``; a set or dict result is charged its size."""
        return self._charged(a | b)

    def bitand(self, a: Any, b: Any) -> Any:
        """``_s2o_and_``: ``a & b``; a set result is charged its size."""
        return self._charged(a & b)

    def bitxor(self, a: Any, b: Any) -> Any:
        """``_s2o_xor_``: ``a ^ b``; a set result is charged its size."""
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
        """Return ``set(...)``, charged the length of its input."""
        if args:
            self._consume(args[0])
        return set(*args)

    def dict_(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        """Return ``dict(...)``, charged the length of its input."""
        if args:
            self._consume(args[0])
        return dict(*args, **kwargs)

    def sorted_(self, iterable: Any, /, *, key: Any = None, reverse: bool = False) -> list[Any]:
        """Return ``sorted(...)``, charged the length of its input."""
        self._consume(iterable)
        return sorted(iterable, key=key, reverse=reverse)

    def min_(self, *args: Any, **kwargs: Any) -> Any:
        """Return ``min(...)``, charged the length of its input."""
        if len(args) == 1:
            self._consume(args[0])
        return min(*args, **kwargs)

    def max_(self, *args: Any, **kwargs: Any) -> Any:
        """Return ``max(...)``, charged the length of its input."""
        if len(args) == 1:
            self._consume(args[0])
        return max(*args, **kwargs)

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


def _check_index(
    run: _Run, s: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, ...]:
    # list.index and range.index put repr(value) in their ValueError: bound it first.
    if args:
        run.check_render(args[0])
    return args


_PRECHECKS: dict[str, _Precheck] = {
    "center": _check_width,
    "ljust": _check_width,
    "rjust": _check_width,
    "zfill": _check_width,
    "expandtabs": _check_expandtabs,
    "replace": _check_replace,
    "join": _check_join,
    "index": _check_index,
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
    "_s2o_format_": "format_",
    "_s2o_in_": "searched",
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


# --------------------------------------------------------------------------------------------
# The compile-time policy

_BINOP_GUARDS: dict[type[ast.operator], str] = {
    ast.Add: "_s2o_add_",
    ast.Sub: "_s2o_sub_",
    ast.Mult: "_s2o_mult_",
    ast.Mod: "_s2o_mod_",
    ast.Pow: "_s2o_pow_",
    ast.LShift: "_s2o_lshift_",
    ast.BitOr: "_s2o_or_",
    ast.BitAnd: "_s2o_and_",
    ast.BitXor: "_s2o_xor_",
}
_UNAVAILABLE_NAMES = frozenset({"print", "printed", "builtins", "breakpoint"})


def _call(guard: str, args: list[ast.expr], where: ast.expr) -> ast.Call:
    call = ast.Call(func=ast.Name(guard, ast.Load()), args=args, keywords=[])
    copy_locations(call, where)
    return call


class _Policy(RestrictingNodeTransformer):
    """RestrictedPython's policy plus our checks and the rewrites into ``_s2o_*_`` guards.

    See https://restrictedpython.readthedocs.io/ "usage/policy": a policy is a
    ``RestrictingNodeTransformer`` subclass passed as ``policy=`` to ``compile_restricted_eval``.
    Errors are plain reasons (no "Line 1:" prefix) because expressions are one-liners. The
    ``visit_*`` names are ``ast.NodeVisitor``'s (hence ``noqa: N802``).
    """

    def error(self, node: ast.AST, info: str) -> None:
        self.errors.append(info)

    def check_name(self, node: Any, name: str | None, allow_magic_methods: bool = False) -> None:
        if name is None:
            return
        if name.startswith("_") and name != "_":
            self.error(node, f"names starting with '_' are not allowed: {name!r}")
        elif name in _UNAVAILABLE_NAMES:
            self.error(node, f"{name!r} is not available in expressions")
        else:
            super().check_name(node, name, allow_magic_methods)

    def visit_Name(self, node: ast.Name) -> Any:  # noqa: N802
        if node.id in _UNAVAILABLE_NAMES:
            self.error(node, f"{node.id!r} is not available in expressions")
            return node
        return super().visit_Name(node)

    def visit_Attribute(self, node: ast.Attribute) -> Any:  # noqa: N802
        if node.attr.startswith("_"):
            self.error(node, f"names starting with '_' are not allowed: attribute {node.attr!r}")
            return node
        return super().visit_Attribute(node)

    def visit_BinOp(self, node: ast.BinOp) -> Any:  # noqa: N802
        node = self.node_contents_visit(node)
        guard = _BINOP_GUARDS.get(type(node.op))
        if guard is None:
            return node
        return _call(guard, [node.left, node.right], node)

    def visit_Compare(self, node: ast.Compare) -> Any:  # noqa: N802
        # a in b -> a in _s2o_in_(b): a scan of b costs len(b) steps.
        node = self.node_contents_visit(node)
        for i, op in enumerate(node.ops):
            if isinstance(op, (ast.In, ast.NotIn)):
                node.comparators[i] = _call("_s2o_in_", [node.comparators[i]], node.comparators[i])
        return node

    def visit_FormattedValue(self, node: ast.FormattedValue) -> Any:  # noqa: N802
        # f'{value!c:spec}' -> f'{_s2o_format_(value, c, spec)}': the guard checks the spec's
        # widths and the size of the text before building it.
        node = self.node_contents_visit(node)
        spec: ast.expr = node.format_spec if node.format_spec is not None else ast.Constant("")
        call = _call("_s2o_format_", [node.value, ast.Constant(node.conversion), spec], node.value)
        new = ast.FormattedValue(value=call, conversion=-1, format_spec=None)
        copy_locations(new, node)
        return new

    def visit_Lambda(self, node: ast.Lambda) -> Any:  # noqa: N802
        # lambda args: body -> lambda args: _s2o_tick_() or body, so recursion costs steps.
        self.check_function_argument_names(node)
        node = self.node_contents_visit(node)
        body = ast.BoolOp(op=ast.Or(), values=[_call("_s2o_tick_", [], node.body), node.body])
        copy_locations(body, node.body)
        node.body = body
        return node

    def visit_Starred(self, node: ast.Starred) -> Any:  # noqa: N802
        node = self.node_contents_visit(node)
        if isinstance(node.ctx, ast.Load):
            node.value = _call("_s2o_spread_", [node.value], node.value)
        return node

    def visit_Dict(self, node: ast.Dict) -> Any:  # noqa: N802
        node = self.node_contents_visit(node)
        for i, key in enumerate(node.keys):
            if key is None:  # {**mapping}
                node.values[i] = _call("_s2o_spread_", [node.values[i]], node.values[i])
        return node

    def visit_keyword(self, node: ast.keyword) -> Any:
        node = self.node_contents_visit(node)
        if node.arg is None:  # f(**mapping)
            node.value = _call("_s2o_spread_", [node.value], node.value)
        return node

    def visit_NamedExpr(self, node: ast.NamedExpr) -> Any:  # noqa: N802
        self.error(node, "assignment expressions (:=) are not allowed; expressions cannot assign")
        return node

    def visit_Yield(self, node: ast.Yield) -> Any:  # noqa: N802
        self.error(node, "yield is not allowed in expressions")
        return node

    def visit_YieldFrom(self, node: ast.YieldFrom) -> Any:  # noqa: N802
        self.error(node, "yield is not allowed in expressions")
        return node


# --------------------------------------------------------------------------------------------
# Expressions


def _code_names(code: CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            names |= _code_names(const)
    return names


class Expression:
    """A compiled expression: immutable, reusable and safe to evaluate from many threads.

    Built by :func:`compile_expression` (or :func:`parse_dynamic`); never construct it directly.

    Attributes:
        source: the expression text (what was between the braces, stripped).

    """

    __slots__ = ("_builtins", "_code", "_guards", "_names", "source")

    def __init__(self, source: str, code: CodeType) -> None:
        used = _code_names(code)
        self.source = source
        self._code = code
        self._builtins = tuple((n, a) for n, a in _CONTEXT_BUILTINS.items() if n in used)
        self._guards = tuple((n, a) for n, a in _GUARDS.items() if n in used)
        self._names = tuple(sorted(used - _GUARDS.keys() - _STATIC_BUILTINS.keys()))

    def __repr__(self) -> str:
        return f"Expression({self.source!r})"

    def evaluate(
        self, names: Mapping[str, object], limits: SandboxLimits = DEFAULT_LIMITS
    ) -> object:
        """Evaluate with ``names`` as the variables, within ``limits``.

        Each call gets its own step budget and deadline (a fresh context whose bound methods are
        the guards ``_getattr_``, ``_getitem_``, ``_getiter_`` and ``_s2o_*_``), so evaluations in
        several threads never interfere. Values in ``names`` are never changed: methods that
        mutate are refused (passing copies is the simplest guarantee all the same).

        Args:
            names: the variables; the runner passes ``sys``, ``conv``, ``agent``
                (:class:`Namespace`), local variables by name, and ``result``. A name in
                ``names`` hides a builtin of the same name.
            limits: steps, seconds, result size and int size of this evaluation.

        Returns:
            The value of the expression: any value, checked to be data (not a function or an
            iterator) of at most ``limits.max_result_chars`` characters.

        Raises:
            ExpressionError: for any exception raised while evaluating (its reason names the
                exception, e.g. ``"ZeroDivisionError: division by zero"``) and for any limit
                exceeded.

        """
        run = _Run(limits)
        scope: dict[str, object] = {name: getattr(run, attr) for name, attr in self._builtins}
        for name in self._names:
            if name in names:
                scope[name] = names[name]
        for name, attr in self._guards:
            scope[name] = getattr(run, attr)
        scope["__builtins__"] = _STATIC_BUILTINS
        try:
            value = eval(self._code, scope)
            if type(value) is str:
                if len(value) > run.max_chars:
                    _refuse(
                        f"the result has {len(value)} characters, "
                        f"more than max_result_chars={run.max_chars}"
                    )
            elif (
                type(value) not in _SCALARS
                and _text_size(value, run.max_chars, data_only=True) > run.max_chars
            ):
                _refuse(
                    f"the result is more than max_result_chars={run.max_chars} characters as JSON"
                )
        except _RefusedError as exc:
            raise ExpressionError(self.source, exc.reason) from None
        except Exception as exc:
            raise ExpressionError(self.source, _describe(exc)) from exc
        return value


def _syntax_reason(exc: SyntaxError, text: str) -> str:
    msg = exc.msg or "invalid syntax"
    offset = exc.offset or 0
    if "\n" in text and exc.lineno:
        return f"{msg} at line {exc.lineno}, column {offset}"
    if 0 < offset <= len(text):
        return f"{msg} at column {offset}"
    return f"{msg} at the end of the expression"


def compile_expression(source: str) -> Expression:
    """Compile the expression ``source`` (the text between the braces) for the sandbox.

    Parses in ``eval`` mode, then compiles with RestrictedPython's ``compile_restricted_eval``
    and our policy (https://restrictedpython.readthedocs.io/ "usage/basic_usage" and
    "usage/policy"). Not cached: :func:`parse_dynamic` and :func:`render` go through an LRU cache.

    Args:
        source: a Python expression, e.g. ``"sys.query.lower()"``; outer whitespace is ignored.

    Returns:
        The compiled :class:`Expression`.

    Raises:
        ExpressionSyntaxError: the text is empty, is not an expression (``reason`` names the
            column), or uses a construct the sandbox refuses (names starting with ``_``, ``:=``,
            ``print`` ...).

    """
    text = source.strip()
    if not text:
        raise ExpressionSyntaxError("the expression is empty")
    try:
        tree = ast.parse(text, _FILENAME, "eval")
    except SyntaxError as exc:
        raise ExpressionSyntaxError(_syntax_reason(exc, text), text) from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise ExpressionSyntaxError(f"cannot parse: {_describe(exc)}", text) from None
    try:
        result = compile_restricted_eval(tree, _FILENAME, policy=_Policy)
    except SyntaxError as exc:
        raise ExpressionSyntaxError(_syntax_reason(exc, text), text) from None
    except (ValueError, TypeError, RecursionError, MemoryError) as exc:
        raise ExpressionSyntaxError(f"cannot compile: {_describe(exc)}", text) from None
    if result.errors:
        raise ExpressionSyntaxError(result.errors[0], text)
    if result.code is None:  # pragma: no cover - RestrictedPython gives errors or code
        raise ExpressionSyntaxError("cannot compile", text)
    return Expression(text, result.code)


# Repeated rendering of one definition compiles each expression once.
_compile_cached = functools.lru_cache(maxsize=_CACHE_SIZE)(compile_expression)


def _inner(value: str) -> str | None:
    text = value.strip()
    if len(text) >= 2 and text[0] == "{" and text[-1] == "}":
        return text[1:-1]
    return None


def is_dynamic(value: str) -> bool:
    """Tell whether ``value`` has the form of a dynamic string, ``"{ expression }"``.

    Only the shape is checked (after stripping outer whitespace it starts with ``{`` and ends
    with ``}``); :func:`parse_dynamic` also compiles it.
    """
    return _inner(value) is not None


def parse_dynamic(value: str) -> Expression | None:
    """Compile a dynamic string, or return ``None`` for a literal string.

    ``"{ sys.query }"`` gives the expression ``sys.query``; ``"{ {'a': 1} }"`` gives the dict
    literal ``{'a': 1}``; ``"hello {name}"`` is a literal. Compiled expressions are cached by
    source text (an LRU of 4096).

    Raises:
        ExpressionSyntaxError: the string is dynamic but its expression is empty (``"{ }"``),
            has bad syntax, or is refused by the sandbox.

    """
    inner = _inner(value)
    if inner is None:
        return None
    text = inner.strip()
    if not text:
        raise ExpressionSyntaxError("the expression between { and } is empty")
    return _compile_cached(text)


def render(
    value: object, names: Mapping[str, object], limits: SandboxLimits = DEFAULT_LIMITS
) -> object:
    """Evaluate every dynamic string inside a JSON-like value.

    A str is evaluated if it is dynamic and returned as is otherwise; a list and the values of a
    dict are rendered element by element (dict keys stay literal); any other value is returned
    as is. Each dynamic string is one evaluation with its own ``limits``.

    Args:
        value: a JSON-like value from an agent definition.
        names: the variables, as for :meth:`Expression.evaluate`.
        limits: the bounds of each evaluation.

    Returns:
        A new value of the same shape (``value`` itself is not changed).

    Raises:
        ExpressionError: an evaluation failed, or a dynamic string does not compile (the
            runner sees one error type; validation reports syntax earlier via
            :func:`parse_dynamic`).

    """
    if isinstance(value, str):
        try:
            expression = parse_dynamic(value)
        except ExpressionSyntaxError as exc:
            raise ExpressionError(exc.source or value.strip(), exc.reason) from None
        return value if expression is None else expression.evaluate(names, limits)
    if isinstance(value, list):
        return [render(item, names, limits) for item in value]
    if isinstance(value, dict):
        return {key: render(item, names, limits) for key, item in value.items()}
    return value
