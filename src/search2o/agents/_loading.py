"""Read an agent definition's text: JSON first, else YAML, remembering keys given twice.

JSON (``json.loads``) and YAML (``yaml.safe_load``) both keep the last of two equal keys in one
object without a word. In a block that silently drops a command (two ``memory`` keys), so the
loaders here record each object's repeated keys and :func:`duplicate_problems` reports them at
their JSON path. The YAML loader is ``yaml.SafeLoader`` with one constructor replaced; it builds
nothing ``safe_load`` would not.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import yaml

from search2o.agents.commands_schema import index_path, key_path
from search2o.errors import InputError

__all__ = [
    "MAX_DEPTH",
    "MAX_VALUES",
    "SourceError",
    "check_size",
    "duplicate_problems",
    "load_source",
]

MAX_VALUES = 100_000
MAX_DEPTH = 64
_LONG_NUMBER = (
    f"holds a number of more than {sys.get_int_max_str_digits()} digits, "
    "more than Python reads from text"
)


class SourceError(ValueError):
    """The text is not a readable JSON or YAML document; ``reason`` says why and where."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def load_source(data: str | bytes, fmt: str | None) -> tuple[Any, dict[int, list[str]]]:
    """Parse a definition's text: JSON first, then YAML (``fmt`` forces one).

    Returns:
        The document and, by ``id`` of each object that had some, its keys that appeared
        more than once (JSON and PyYAML silently keep the last; :func:`duplicate_problems`
        reports them).

    Raises:
        SourceError: not UTF-8, empty, or malformed (the reason names line and column), or
            holding an integer of more digits than Python reads (4300 by default).
        InputError: ``fmt`` is not ``json``, ``yaml`` or ``None`` (field ``format``).

    """
    if fmt not in (None, "json", "yaml"):
        raise InputError("format", f"must be 'json' or 'yaml', got {fmt!r}")
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise SourceError(f"is not UTF-8 text (byte {exc.start}: {exc.reason})") from exc
    else:
        text = data
    if not text.strip():
        raise SourceError(
            "is empty: a definition is an object with name, description and functions"
        )
    json_problem = ""
    if fmt != "yaml":
        duplicates: dict[int, list[str]] = {}
        try:
            return json.loads(text, object_pairs_hook=_pairs_hook(duplicates)), duplicates
        except RecursionError as exc:
            raise SourceError(f"is nested more than {MAX_DEPTH} levels deep") from exc
        except json.JSONDecodeError as exc:
            json_problem = f"is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        except ValueError as exc:  # an int beyond Python's digit limit
            raise SourceError(_LONG_NUMBER) from exc
        if fmt == "json":
            raise SourceError(json_problem)
    looks_json = bool(json_problem) and text.lstrip()[:1] in ("{", "[")
    loader = _YamlLoader(text)
    try:
        document = loader.get_single_data()
    except yaml.YAMLError as exc:
        if looks_json:
            raise SourceError(json_problem) from exc
        raise SourceError(_yaml_problem(exc)) from exc
    except RecursionError as exc:
        raise SourceError(f"is nested more than {MAX_DEPTH} levels deep") from exc
    except ValueError as exc:  # an int beyond Python's digit limit
        raise SourceError(_LONG_NUMBER) from exc
    finally:
        loader.dispose()
    if looks_json and not isinstance(document, dict):
        raise SourceError(json_problem)
    return document, loader.duplicates


def _yaml_problem(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return f"is not valid YAML: {exc.problem} at line {mark.line + 1}, column {mark.column + 1}"
    return f"is not valid YAML: {exc}"


def _repeated(keys: list[Any]) -> list[Any]:
    counts = Counter(keys)
    return [key for key in counts if counts[key] > 1]


def _pairs_hook(
    duplicates: dict[int, list[str]],
) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) < len(pairs):
            duplicates[id(obj)] = _repeated([key for key, _ in pairs])
        return obj

    return hook


class _YamlLoader(yaml.SafeLoader):
    """``yaml.safe_load``'s loader that also records duplicate keys (PyYAML keeps the last)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.duplicates: dict[int, list[str]] = {}


def _construct_map(loader: yaml.SafeLoader, node: yaml.MappingNode) -> Iterator[dict[Any, Any]]:
    data: dict[Any, Any] = {}
    yield data
    keys = [
        key.value
        for key, _ in node.value
        if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge"
    ]
    data.update(loader.construct_mapping(node))
    if isinstance(loader, _YamlLoader) and len(set(keys)) < len(keys):
        loader.duplicates[id(data)] = _repeated(keys)


_YamlLoader.add_constructor("tag:yaml.org,2002:map", _construct_map)


def duplicate_problems(
    value: Any, duplicates: Mapping[int, list[str]], path: str = "$"
) -> Iterator[tuple[str, str]]:
    """Yield ``(path, reason)`` for every object of ``value`` that had a key twice."""
    if isinstance(value, dict):
        for key in duplicates.get(id(value), ()):
            yield (
                path,
                f"key {key!r} appears more than once (only the last was kept); give repeated "
                "commands distinct names, e.g. 'memory.first' and 'memory.second'",
            )
        for key, item in value.items():
            yield from duplicate_problems(item, duplicates, key_path(path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from duplicate_problems(item, duplicates, index_path(path, index))


def check_size(document: Any) -> None:
    """Refuse a document too big or too deep to check (YAML aliases can make a small text huge).

    Raises:
        SourceError: more than :data:`MAX_VALUES` values or :data:`MAX_DEPTH` levels.

    """
    stack: list[tuple[Any, int]] = [(document, 0)]
    count = 0
    while stack:
        value, depth = stack.pop()
        count += 1
        if count > MAX_VALUES:
            raise SourceError(f"holds more than {MAX_VALUES} values (YAML aliases count each time)")
        if depth > MAX_DEPTH:
            raise SourceError(f"is nested more than {MAX_DEPTH} levels deep")
        if isinstance(value, dict):
            stack.extend((item, depth + 1) for item in value.values())
        elif isinstance(value, list):
            stack.extend((item, depth + 1) for item in value)
