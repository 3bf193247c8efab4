"""Sizes of values in the expression sandbox: what an operation will cost, known before it runs.

The guards of :mod:`search2o.agents._sandbox_guards` charge steps for what an operation
iterates, copies, builds or recurses into (lengths and JSON text sizes are measured there).
This module measures what recursive C operations cost:

* :class:`_Sizes`, one per evaluation: the *logical size* of a value (its nodes, counting a
  shared reference once per reference, as a comparison or a hash walks them) memoised by
  identity, and the groups of distinct keys hashed so far that share one hash value;
* :func:`_int_text_problem`: whether an int has too many digits to be written as text;
* :func:`_refuse` / :class:`_RefusedError`: how a guard stops an evaluation; the reason becomes
  the :class:`~search2o.agents.expressions.ExpressionError`'s reason.

Why logical sizes: ``[x] * 10`` is ten references to one ``x``, so building it costs ten
steps, but comparing it to an equal, separately built value or hashing it (as a tuple) walks
``x`` ten times, in one C call that no timer can interrupt. Ten levels of that are 10**10
nodes built for 100 steps. A logical size counts every node a recursive C operation may
visit; :class:`_Sizes` computes it over the *distinct* objects only (each once, iteratively),
saturating at a cap, so measuring is as cheap as the value was to build.

Why hash groups: CPython does not randomise the hash of ints, floats and tuples of them
(``hash(n) == n % (2**61 - 1)``, https://docs.python.org/3/library/stdtypes.html
"Hashing of numeric types"), so ``k * (2**61 - 1)`` for ``k in range(40_000)`` are 40,000
distinct ints with one hash value; inserting them into a set compares each with every one
before it, 800 million comparisons in one ``set()`` call (15 s measured). At most
:data:`MAX_SHARED_HASH` distinct keys of one evaluation may share a hash value.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterable
from typing import Any, NoReturn

__all__ = ["MAX_SHARED_HASH", "STR_CHUNK"]

STR_CHUNK = 64
"""A str or bytes counts one logical node per this many characters (``memcmp`` is that much
faster than a comparison of two nodes), plus one."""

MAX_SHARED_HASH = 64
"""Distinct keys of one evaluation that may share a hash value; more is hash flooding."""

_TEXTS: frozenset[type] = frozenset({str, bytes, bytearray})
_KEYS_VIEW: type = type({}.keys())
_VALUES_VIEW: type = type({}.values())
_ITEMS_VIEW: type = type({}.items())
_NODES: frozenset[type] = frozenset(
    {list, tuple, set, frozenset, dict, _KEYS_VIEW, _VALUES_VIEW, _ITEMS_VIEW}
)
_MODULUS = sys.hash_info.modulus  # 2**61 - 1 on 64-bit CPython
# Types whose hash CPython randomises per process (PYTHONHASHSEED): no one can flood them.
_RANDOMISED: frozenset[type] = (
    frozenset({str, bytes}) if sys.flags.hash_randomization else frozenset()
)


class _RefusedError(Exception):
    """Raised inside a sandboxed evaluation; its reason becomes the ExpressionError's reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _refuse(reason: str) -> NoReturn:
    raise _RefusedError(reason)


@functools.lru_cache(maxsize=8)
def _ten_to(digits: int) -> int:
    power: int = 10**digits
    return power


def _int_text_problem(value: int) -> str | None:
    """Return why ``value`` cannot be turned into text, or ``None``.

    CPython refuses to convert an int of more than ``sys.get_int_max_str_digits()`` digits
    (4300 by default) to or from decimal text, since the conversion is quadratic
    (https://docs.python.org/3/library/stdtypes.html "Integer string conversion length
    limitation"); ``str``, f-strings, ``%`` and ``json.dumps`` all raise ``ValueError`` then.
    """
    limit = sys.get_int_max_str_digits()
    # 3.32 bits per digit: below (limit - 1) * 3.32 bits the int surely has fewer digits.
    if not limit or value.bit_length() <= (limit - 1) * 3.32:
        return None
    if abs(value) < _ten_to(limit):
        return None
    return (
        f"an integer of more than {limit} digits cannot be written as text or JSON "
        "(Python's limit on int to text conversion)"
    )


def _check_int_text(value: int) -> None:
    problem = _int_text_problem(value)
    if problem is not None:
        _refuse(problem)


def _children(node: Any) -> Iterable[Any]:
    kind = type(node)
    if kind is dict:
        return [*node.keys(), *node.values()]
    if kind is _ITEMS_VIEW:
        mapping = node.mapping
        return [*mapping.keys(), *mapping.values()]
    return node  # type: ignore[no-any-return]


class _Sizes:
    """Logical sizes and hash groups of one evaluation (see the module docstring).

    Args:
        cap: sizes saturate here (a size above the step budget is refused whatever it is).

    Thread-confined: one per evaluation, like the ``_Run`` that owns it.
    """

    __slots__ = ("cap", "groups", "memo")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        # id -> (the object, kept alive so its id is not reused; its logical size)
        self.memo: dict[int, tuple[object, int]] = {}
        self.groups: dict[int, list[object]] = {}

    def logical(self, value: object) -> int:
        """Return the nodes a recursive comparison or hash of ``value`` may visit (capped).

        A scalar is 1; a str or bytes ``1 + len // STR_CHUNK``; a list, tuple, set, dict or
        dict view 1 plus the logical sizes of its items (keys and values), a shared item
        counted once per reference. Anything else is 1 (compared or hashed by identity, or
        in O(1)).
        """
        kind = type(value)
        if kind in _TEXTS:
            return 1 + len(value) // STR_CHUNK  # type: ignore[arg-type]
        if kind not in _NODES:
            return 1
        known = self.memo.get(id(value))
        if known is not None:
            return known[1]
        return self._walk(value)

    def _weight(self, value: object) -> int:
        kind = type(value)
        if kind in _TEXTS:
            return 1 + len(value) // STR_CHUNK  # type: ignore[arg-type]
        if kind not in _NODES:
            return 1
        known = self.memo.get(id(value))
        return self.cap if known is None else known[1]  # None: a cycle

    def _walk(self, root: object) -> int:
        """Post-order over the distinct containers below ``root``, without recursion."""
        memo, cap = self.memo, self.cap
        open_: dict[int, object] = {}  # visited, children not yet summed
        stack: list[object] = [root]
        while stack:
            node = stack[-1]
            key = id(node)
            if key in memo:
                stack.pop()
                continue
            if key not in open_:
                open_[key] = node
                for child in _children(node):
                    if type(child) in _NODES and id(child) not in memo and id(child) not in open_:
                        stack.append(child)
                continue
            stack.pop()
            total = 1 + (len(node) if type(node) is _ITEMS_VIEW else 0)  # type: ignore[arg-type]
            for child in _children(node):
                total += self._weight(child)
                if total >= cap:
                    total = cap
                    break
            memo[key] = (node, total)
            del open_[key]
        return memo[id(root)][1]

    def hash_group(self, key: object) -> list[object] | None:
        """Return the distinct keys hashed so far that share ``key``'s hash (``None``: none).

        Keys whose hash cannot be flooded (a str with hash randomisation, an int below the
        hash modulus, ``None``) have no group.

        Raises:
            TypeError: ``key`` is unhashable (Python's own message).

        """
        kind = type(key)
        if kind in _RANDOMISED or key is None:
            return None
        # An int below the hash modulus is its own hash: no other int shares it (but -1, -2).
        if (kind is int or kind is bool) and -_MODULUS < key < _MODULUS:  # type: ignore[operator]
            return None
        value = hash(key)
        group = self.groups.get(value)
        if group is None:
            self.groups[value] = [key]
            return None
        return group

    @staticmethod
    def join(group: list[object], key: object) -> None:
        """Add ``key`` to its hash group unless an equal key is there (charge it first).

        Raises:
            _RefusedError: more than :data:`MAX_SHARED_HASH` distinct keys share its hash.

        """
        if any(seen is key for seen in group) or any(seen == key for seen in group):
            return
        group.append(key)
        if len(group) > MAX_SHARED_HASH:
            _refuse(
                f"more than {MAX_SHARED_HASH} distinct keys share one hash value "
                "(hash flooding); use other keys"
            )
