"""Dynamic strings of the Agent Engine, evaluated in a sandbox.

An agent definition is JSON whose string values may be *dynamic*: a string whose whole value,
after stripping outer whitespace, starts with ``{`` and ends with ``}`` holds a Python
*expression* between the braces (``"{ sys.query }"``, ``"{ f'Fly {airline}' }"``,
``"{ {'a': 1} }"``). Any other string is a literal and is used as is.

How an expression is run
    The text is parsed in ``eval`` mode and compiled by RestrictedPython
    (https://restrictedpython.readthedocs.io/, "usage/basic_usage" and "usage/policy") with our
    own policy, a subclass of ``RestrictingNodeTransformer`` (in
    :mod:`search2o.agents._sandbox_policy`). The compiled code never sees the real builtins: its
    globals hold the caller's ``names``, a small set of safe builtins and the guard functions
    that RestrictedPython's rewritten code calls (``_getattr_``, ``_getitem_``, ``_getiter_``,
    ``_iter_unpack_sequence_``, ``_write_``) plus our own ``_s2o_*_`` guards (all in
    :mod:`search2o.agents._sandbox_guards`).

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
    * Operations that recurse into containers in one C call are charged the *logical size* of
      what they walk before they run: a value built by repetition shares its parts (``[x] *
      10`` holds ``x`` ten times), so ten levels of it cost 100 steps to build but 10**10
      nodes to compare. The logical size counts a node once per reference, is computed over
      the distinct objects only and memoised per evaluation (``_sandbox_sizes``). Charged so:
      comparisons other than ``is`` (the smaller side; chains keep Python's order and
      short-circuit), hashing a key (dict and set displays and comprehensions, ``set()``,
      ``dict()`` from pairs, set methods and operators, ``in`` on a dict or set, indexing,
      ``dict.get``), ``in`` on a sequence (its length, and each comparison for a needle of
      more than one node), ``sorted``/``min``/``max`` (each comparison, about ``n log2 n`` for
      a sort) and ``list``/``tuple`` ``count``/``index``. A str counts one node per 64
      characters. CPython does not randomise the hash of ints, floats and tuples, so more
      than 64 distinct keys of one evaluation sharing a hash value are refused (hash
      flooding). An int of more than 4300 digits (Python's limit on int to text conversion)
      is refused where it would become text and as a result.

What remains outside the bounds
    Each C-level operation is bounded by the steps it is charged, and at most ``max_steps``
    can be charged, so one evaluation does at most about ``max_steps`` units of C work between
    two reads of the clock; a loop of operations is stopped by the step budget or the clock
    (read every 1000 iteration steps, so it can overrun ``max_seconds`` by up to 1000 loop
    iterations of bounded work). The charges are upper bounds of the worst case, not
    measurements: comparing two long equal lists costs their size even when Python's identity
    shortcut would make it instant, and a str is charged by length although its hash is
    cached. Work that is linear in a str and not charged by node (``str.find`` on a short
    needle, ``str.count``) costs at most ``max_result_chars`` times a small constant per call.
    Lookups in a dict or set cost at most 64 colliding probes. Objects from the caller's
    ``names`` are trusted: they should be JSON-like values and :class:`Namespace` objects
    (JSON objects have str keys, whose hashes CPython randomises), and since methods that
    mutate are refused, the caller's values cannot be changed (passing copies is still the
    simplest way to be sure).

Where the code is
    This module is the public API: the errors, :class:`SandboxLimits`, :class:`Namespace`,
    :class:`Expression`, :func:`compile_expression`, :func:`parse_dynamic`, :func:`is_dynamic`
    and :func:`render`. The compile-time policy is :mod:`search2o.agents._sandbox_policy`; the
    run-time guards, the per-evaluation budget and the attribute rules are
    :mod:`search2o.agents._sandbox_guards`.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from types import CodeType

from RestrictedPython.compile import compile_restricted_eval

from search2o.agents._sandbox_builtins import _CONTEXT_BUILTINS, _STATIC_BUILTINS
from search2o.agents._sandbox_guards import _GUARDS, _Run
from search2o.agents._sandbox_policy import _Policy
from search2o.agents._sandbox_sizes import _refuse, _RefusedError
from search2o.agents._sandbox_values import _SCALARS, Namespace, _describe, _text_size
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
            of what guarded operations copy or build (characters, items), plus the logical
            size of what comparisons, hashes and sorts walk (nodes, a shared one per reference).
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
        run = _Run(
            max_steps=limits.max_steps,
            max_seconds=limits.max_seconds,
            max_chars=limits.max_result_chars,
            max_bits=limits.max_int_bits,
        )
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
            elif type(value) is int:
                run.check_render(value)
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
