r"""The JSON Schema of an ``llm`` command: what it may hold, and checking an answer against it.

A schema comes from an agent definition and the answer from a model, so neither is trusted:

* **Nothing is ever fetched.** JSON Schema lets ``$ref`` name any URI, and jsonschema's
  default registry retrieves remote ones (a definition could make the server request an
  internal URL on every run and echo what it got in the error). :func:`schema_problems`
  refuses, at upload, every reference that is not a local ``#...`` into the schema itself
  (``$ref``, ``$dynamicRef``, ``$recursiveRef``) or does not resolve there, a ``$id`` that
  would change the base URI, and ``$schema`` anywhere but at the top (where it must name a
  draft jsonschema knows). At run time :func:`answer_problem` validates with a
  ``referencing.Registry`` whose ``retrieve`` refuses every URI
  (https://referencing.readthedocs.io/ "Resolving References"), so even a schema that
  slipped past the upload check cannot fetch.
* **Patterns run in linear time.** Python's ``re`` backtracks: ``^([a-zA-Z0-9]+\s?)+$``
  against 25 characters takes seconds, doubling per character. Every ``pattern`` and
  ``patternProperties`` key is matched with RE2 (PyPI ``google-re2``,
  https://github.com/google/re2/wiki/Syntax), whose time is linear in the text; a pattern RE2
  does not accept (backreferences, lookaround) is refused at upload, naming its path. The
  keywords that run patterns (``pattern``, ``patternProperties``, ``additionalProperties``)
  are replaced with :func:`jsonschema.validators.extend`; ``unevaluatedProperties``, which
  runs them deep inside jsonschema, may not be combined with ``patternProperties``. The
  metaschema check at upload skips jsonschema's ``regex`` format (Python's syntax): RE2 is
  the one regex language of a schema.
* **Validation is bounded.** ``anyOf`` over references can make the work exponential in the
  schema's size; a validation applies at most :data:`MAX_STEPS` keywords in
  :data:`MAX_SECONDS`, and a schema that refers to itself without end is an error, not a
  crash.
"""

from __future__ import annotations

import contextvars
import functools
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import jsonschema
import re2
import referencing
import referencing.jsonschema
from jsonschema.exceptions import ValidationError
from referencing.exceptions import NoSuchResource, Unresolvable

__all__ = ["MAX_SECONDS", "MAX_STEPS", "answer_problem", "schema_problems"]

MAX_STEPS = 100_000
"""Keyword applications one validation of an answer may make."""

MAX_SECONDS = 1.0
"""Wall-clock time one validation of an answer may take (checked every 1000 keywords)."""

Segment = str | int
"""One step of a path inside the schema: an object key or a list index."""

_REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")
# Keywords whose values are data, not schemas: a "$ref" key inside them is just a key.
_DATA = frozenset({"const", "default", "enum", "examples"})
_DEFAULT = jsonschema.Draft202012Validator
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print every refused pattern to stderr


def _no_retrieval(uri: str) -> referencing.Resource[Any]:
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # attrs init, untyped


_REGISTRY: referencing.Registry[Any] = referencing.Registry(retrieve=_no_retrieval)  # type: ignore[call-arg]


@functools.lru_cache(maxsize=512)
def _regex(pattern: str) -> Any:
    return re2.compile(pattern, options=_OPTIONS)


def _pattern_problem(pattern: str) -> str | None:
    try:
        _regex(pattern)
    except re2.error as exc:
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        return (
            f"is a pattern RE2 does not accept ({detail}); patterns run in linear time, "
            "without backreferences or lookaround"
        )
    return None


def _search(pattern: str, text: str) -> bool:
    # RE2 reads UTF-8: a lone surrogate (which JSON can carry) cannot be encoded, so it
    # is matched as U+FFFD.
    try:
        return _regex(pattern).search(text) is not None
    except UnicodeEncodeError:
        return _regex(pattern).search(text.encode("utf-8", "replace").decode()) is not None


# --------------------------------------------------------------------------------------------
# Upload


def schema_problems(schema: Mapping[str, Any]) -> list[tuple[list[Segment], str]]:
    """Return every rule ``schema`` breaks, as (path segments inside it, reason), in order.

    The rules are those of the module docstring; the metaschema of the schema's draft is
    checked too (one problem at the top, jsonschema's best match), without its ``regex``
    format. Nothing is fetched.
    """
    problems: list[tuple[list[Segment], str]] = []
    references: list[tuple[list[Segment], str]] = []
    shape = {"unevaluated": False, "patterns": False}
    _walk(schema, [], problems, references, shape)
    if shape["unevaluated"] and shape["patterns"]:
        problems.append(
            (
                [],
                "cannot combine unevaluatedProperties with patternProperties (patterns "
                "would run outside the linear-time matcher)",
            )
        )
    dialect = schema.get("$schema")
    if dialect is not None and (
        not isinstance(dialect, str)
        or jsonschema.validators.validator_for({"$schema": dialect}, default=None) is None  # type: ignore[call-overload]
    ):
        problems.append((["$schema"], f"names no JSON Schema draft this server knows: {dialect!r}"))
    if problems:
        return problems
    cls = jsonschema.validators.validator_for(schema, default=_DEFAULT)
    try:
        cls(cls.META_SCHEMA, format_checker=_METASCHEMA_FORMATS).validate(schema)
    except jsonschema.ValidationError as exc:
        return [([], f"is not a valid JSON Schema: {exc.message}")]
    resolver = _resolver(cls, schema)
    for path, reference in references:
        try:
            resolver.lookup(reference)
        except Unresolvable:
            problems.append((path, f"{reference!r} does not resolve inside the schema"))
    return problems


_METASCHEMA_FORMATS = jsonschema.FormatChecker(
    formats=[name for name in jsonschema.FormatChecker.checkers if name != "regex"]
)


def _walk(
    node: Any,
    path: list[Segment],
    problems: list[tuple[list[Segment], str]],
    references: list[tuple[list[Segment], str]],
    shape: dict[str, bool],
) -> None:
    if isinstance(node, list):
        for index, item in enumerate(node):
            _walk(item, [*path, index], problems, references, shape)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        here = [*path, key]
        if key in _DATA:
            continue
        if key in _REFERENCES and isinstance(value, str):
            if value.startswith("#"):
                references.append((here, value))
            else:
                problems.append(
                    (
                        here,
                        "must refer inside the schema ('#/$defs/name' or '#anchor'); "
                        "remote and file references are never fetched",
                    )
                )
        elif key == "$id" and isinstance(value, str) and not value.startswith("#"):
            problems.append(
                (
                    here,
                    "may not set a base URI: a schema is one document; use $defs with "
                    "'#/$defs/name' references or $anchor",
                )
            )
        elif key == "$schema" and path:
            problems.append((here, "may only be given at the top of the schema"))
        elif key == "pattern" and isinstance(value, str):
            problem = _pattern_problem(value)
            if problem is not None:
                problems.append((here, problem))
        elif key == "patternProperties" and isinstance(value, dict):
            shape["patterns"] = shape["patterns"] or bool(value)
            for pattern in value:
                problem = _pattern_problem(pattern)
                if problem is not None:
                    problems.append(([*here, pattern], problem))
        elif key == "unevaluatedProperties":
            shape["unevaluated"] = True
        _walk(value, here, problems, references, shape)


def _resolver(cls: type[Any], schema: Mapping[str, Any]) -> Any:
    specification = referencing.jsonschema.specification_with(
        cls.META_SCHEMA.get("$schema", ""), default=referencing.jsonschema.DRAFT202012
    )
    return _REGISTRY.resolver_with_root(specification.create_resource(schema))


# --------------------------------------------------------------------------------------------
# Run time


class _OverBudgetError(Exception):
    pass


class _Budget:
    __slots__ = ("deadline", "steps")

    def __init__(self) -> None:
        self.steps = 0
        self.deadline = time.perf_counter() + MAX_SECONDS

    def tick(self, steps: int = 1) -> None:
        self.steps += steps
        if self.steps > MAX_STEPS:
            raise _OverBudgetError(f"more than {MAX_STEPS} keyword checks")
        if self.steps % 1000 < steps and time.perf_counter() > self.deadline:
            raise _OverBudgetError(f"longer than {MAX_SECONDS:g} s")


_BUDGET: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar(
    "search2o_schema_budget", default=None
)

Keyword = Callable[[Any, Any, Any, Any], Any]


def _counted(name: str, keyword: Keyword) -> Keyword:
    # uniqueItems compares the items pairwise when they are unhashable: n*n/2 steps
    pairwise = name == "uniqueItems"

    def counted(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        budget = _BUDGET.get()
        if budget is not None:
            size = len(instance) if pairwise and isinstance(instance, list) else 1
            budget.tick(max(1, size * size // 2))
        return keyword(validator, value, instance, schema)

    return counted


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [
        key
        for key in instance
        if key not in properties and not any(_search(p, key) for p in patterns)
    ]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        names = ", ".join(repr(extra) for extra in sorted(extras))
        yield ValidationError(f"Additional properties are not allowed ({names} unexpected)")


_REPLACED: dict[str, Keyword] = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
}


@functools.cache
def _validator_class(base: type[Any]) -> type[Any]:
    """Return ``base`` (a draft's validator class) with RE2 patterns, every keyword counted."""
    keywords = {name: _REPLACED.get(name, keyword) for name, keyword in base.VALIDATORS.items()}
    extended: type[Any] = jsonschema.validators.extend(
        base, {name: _counted(name, keyword) for name, keyword in keywords.items()}
    )
    return extended


def answer_problem(schema: Mapping[str, Any], answer: Any) -> str | None:
    """Check ``answer`` (parsed JSON) against ``schema``; return what is wrong, or ``None``.

    The reason completes "the model's answer ...": ``"does not match the schema at items/0:
    'x' is not of type 'integer'"`` (jsonschema's best match), or why it could not be checked
    (a reference that does not resolve, endless self-reference, the budget).
    """
    cls = _validator_class(jsonschema.validators.validator_for(schema, default=_DEFAULT))
    validator = cls(schema, registry=_REGISTRY)
    token = _BUDGET.set(_Budget())
    try:
        error = jsonschema.exceptions.best_match(validator.iter_errors(answer))
    except _OverBudgetError as exc:
        return f"could not be checked against the schema: it took {exc}"
    except Unresolvable as exc:
        return f"could not be checked against the schema: a reference does not resolve ({exc})"
    except RecursionError:
        return "could not be checked against the schema: it refers to itself without end"
    finally:
        _BUDGET.reset(token)
    if error is None:
        return None
    at = "/".join(map(str, error.absolute_path)) or "the top"
    return f"does not match the schema at {at}: {error.message}"
