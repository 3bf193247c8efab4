"""The operator guards of an evaluation: ``**``, ``*``, ``<<``, ``+``, ``%``, comparisons, keys.

Each estimates the size of its result before computing it and charges what a comparison,
hash or copy walks; the policy (:mod:`search2o.agents._sandbox_policy`) rewrites the operators
into calls of these methods (``_s2o_add_`` and so on).
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from search2o.agents._sandbox_budget import _Budget
from search2o.agents._sandbox_sizes import _refuse
from search2o.agents._sandbox_values import (
    _BUILT_TYPES,
    _SEQUENCES,
    Namespace,
    _length,
)

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


class _OperatorGuards(_Budget):
    """The guards of operators, comparisons, keys, spreading and f-string fields."""

    __slots__ = ()

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
