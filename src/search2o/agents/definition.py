"""Agent definitions: parse a JSON or YAML document, check every rule, report every problem.

A definition is one JSON (or YAML) object::

    {
      "name": "travel",
      "description": "Remembers the airline you like",
      "inputs": {"city": {"type": "string", "description": "Where to", "default": "Paris"}},
      "prompts": {"main": {"system": "You are a travel assistant.", "scope": "conversation"}},
      "functions": {
        "main": {"memory": {"query": "{ city }"}, "llm": {}, "end": {"output": "{ result }"}}
      }
    }

:func:`parse_definition` checks it whole and raises one :class:`DefinitionError` listing
**every** problem with its JSON path (``$.functions.main["memory.store"].store``), so an author
fixes them all in one round. The command kinds and their fields are one table,
:data:`search2o.agents.commands_schema.COMMANDS`. :func:`check_inputs` checks a run's inputs
against the declared ``inputs`` and fills in defaults.

Prompts: a definition that declares no ``prompts`` (or ``{}``) gets one implicit prompt named
``main`` with an empty system text and scope ``conversation``; it is in
:attr:`AgentDefinition.prompts` like a declared one. A ``prompt`` or ``llm`` command without a
prompt name uses :attr:`AgentDefinition.default_prompt`, the first prompt.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from search2o.agents._loading import SourceError, check_size, duplicate_problems, load_source
from search2o.agents._sandbox_sizes import _int_text_problem
from search2o.agents.commands_schema import (
    Command,
    Context,
    check_block,
    check_text,
    ident_problem,
    index_path,
    key_path,
    type_name,
    walk_json,
)
from search2o.errors import InputError
from search2o.memory.changes import MAX_LABELS_PER_AGENT, check_agent, check_definition_labels
from search2o.textrules import text_problem

__all__ = [
    "IMPLICIT_PROMPT",
    "AgentDefinition",
    "Command",
    "DefinitionError",
    "DefinitionProblem",
    "InputSpec",
    "PromptSpec",
    "check_inputs",
    "parse_definition",
    "text_problems",
]

MAX_DESCRIPTION_CHARS = 2000
MAX_NAME_CHARS = 64
IMPLICIT_PROMPT = "main"
"""The name of the prompt a definition that declares none gets (scope ``conversation``)."""

_TOP_FIELDS = ("name", "description", "inputs", "prompts", "functions")
_INPUT_FIELDS = ("type", "description", "required", "default")
_PROMPT_FIELDS = ("system", "scope")
_SCOPES = ("conversation", "agent")
_NAME = re.compile(r"\w[\w.-]*")
_INPUT_TYPES: Mapping[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


@dataclass(frozen=True)
class DefinitionProblem:
    """One broken rule: where (a JSON path such as ``$.prompts.main.scope``) and why."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class DefinitionError(InputError):
    """A definition breaks one or more rules; ``problems`` holds them all, in document order.

    The field is ``definition``; the message lists every problem, one per line::

        definition has 2 problems:
        $.functions.main.llm.profile: unknown model profile 'gpt9'; profiles are: default, fast
        $.functions.main: is required: a run starts at function 'main'
    """

    def __init__(self, problems: tuple[DefinitionProblem, ...]) -> None:
        count = len(problems)
        text = f"definition has {count} problem{'' if count == 1 else 's'}:\n" + "\n".join(
            str(problem) for problem in problems
        )
        super().__init__("definition", text)
        self.message = text
        self.args = (text,)
        self.problems = problems


@dataclass(frozen=True)
class InputSpec:
    """One declared input of an agent.

    Attributes:
        type: ``string``, ``number``, ``integer``, ``boolean``, ``object`` or ``array``.
        description: for the caller ("" when absent).
        required: a run must give it. Absent in the definition, it is true exactly when there
            is no default.
        default: the value used when the run gives none; ``None`` when there is no default
            (``null`` is never a valid default).

    """

    name: str
    type: str
    description: str
    required: bool
    default: Any


@dataclass(frozen=True)
class PromptSpec:
    """One named prompt: its system text (literal or dynamic) and its scope.

    ``scope`` is ``conversation`` (history shared by every agent of the conversation) or
    ``agent`` (history of this agent only).
    """

    name: str
    system: str
    scope: str


@dataclass(frozen=True)
class AgentDefinition:
    """A checked agent definition.

    Attributes:
        name: the agent name (``search2o.memory.changes.check_agent`` rule).
        description: what the agent does, for people.
        inputs: declared inputs by name, in order.
        prompts: prompts by name, in order; the implicit ``main`` when none is declared.
        functions: function name -> its commands, in order (``main`` is where a run starts).
        memory_labels: the distinct memory labels of every ``memory`` command, in order.
        source: the document as given (for storage and GET); :meth:`to_json` returns a copy.

    """

    name: str
    description: str
    inputs: Mapping[str, InputSpec]
    prompts: Mapping[str, PromptSpec]
    functions: Mapping[str, tuple[Command, ...]]
    memory_labels: tuple[str, ...]
    source: dict[str, Any]

    @property
    def default_prompt(self) -> str:
        """The prompt a ``prompt`` or ``llm`` command without a prompt name uses: the first."""
        return next(iter(self.prompts))

    def to_json(self) -> dict[str, Any]:
        """Return (a copy of) the document the definition was parsed from."""
        return copy.deepcopy(self.source)


def parse_definition(
    data: str | bytes | Mapping[str, Any], *, profiles: Collection[str], fmt: str | None = None
) -> AgentDefinition:
    """Parse and check an agent definition.

    Args:
        data: JSON or YAML text (``bytes`` must be UTF-8), or the already parsed object.
        profiles: the model profile names the server offers (``llm.profile`` must be one).
        fmt: ``"json"`` or ``"yaml"`` to accept only that; ``None`` tries JSON, then YAML.

    Raises:
        DefinitionError: every problem found, each with its JSON path; malformed text is one
            problem at ``$`` naming the line and column.
        InputError: ``fmt`` is neither ``json``, ``yaml`` nor ``None`` (field ``format``).

    """
    duplicates: dict[int, list[str]] = {}
    try:
        if isinstance(data, Mapping):
            check_size(dict(data))
            document: Any = copy.deepcopy(dict(data))
        else:
            document, duplicates = load_source(data, fmt)
            check_size(document)
    except SourceError as exc:
        raise DefinitionError((DefinitionProblem("$", exc.reason),)) from exc
    ctx = Context(profiles=tuple(profiles))
    definition = _check_document(ctx, document, duplicates)
    if ctx.problems or definition is None:
        raise DefinitionError(tuple(DefinitionProblem(*problem) for problem in ctx.problems))
    return definition


def check_inputs(definition: AgentDefinition, inputs: Mapping[str, Any] | None) -> dict[str, Any]:
    """Check a run's inputs against the definition; return them with defaults filled in.

    An input given as ``None`` counts as not given. An optional input without a default that
    is not given is ``None`` in the result, so expressions can always name it.

    Raises:
        InputError: field ``inputs.<name>`` (or the path inside it, ``inputs.tags[2]``): an
            unknown input, a missing required one, a value of the wrong type (a boolean is not
            an integer nor a number), a key or string holding a NUL or a lone surrogate, or an
            integer of more digits than Python writes as text.

    """
    given: Mapping[str, Any] = {} if inputs is None else inputs
    if not isinstance(given, Mapping):
        raise InputError(
            "inputs", f"must be an object of input name -> value, got {type_name(given)}"
        )
    declared = ", ".join(definition.inputs) or "none"
    for name in given:
        field = key_path("inputs", name)
        if not isinstance(name, str) or text_problem(name) is not None:
            reason = text_problem(name) if isinstance(name, str) else None
            raise InputError(field, f"the input name {reason or 'must be a string'}")
        if name not in definition.inputs:
            raise InputError(
                field, f"unknown input of agent {definition.name!r}; inputs are: {declared}"
            )
    values: dict[str, Any] = {}
    for name, spec in definition.inputs.items():
        value = given.get(name)
        if value is not None:
            problem = _type_problem(spec.type, value)
            if problem is not None:
                raise InputError(f"inputs.{name}", problem)
            found = _value_problem(value, f"inputs.{name}")
            if found is not None:
                raise InputError(*found)
            values[name] = value
        elif spec.default is not None:
            values[name] = copy.deepcopy(spec.default)
        elif spec.required:
            raise InputError(
                f"inputs.{name}", f"is required ({spec.type}) by agent {definition.name!r}"
            )
        else:
            values[name] = None
    return values


def text_problems(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """Yield ``(path, reason)`` for every key and string holding a NUL or a lone surrogate.

    Neither can be stored (PostgreSQL refuses NUL in text and jsonb; no UTF-8 encodes a lone
    surrogate), see :mod:`search2o.textrules`.
    """
    if isinstance(value, str):
        problem = text_problem(value)
        if problem is not None:
            yield path, problem
    elif isinstance(value, dict):
        for key, item in value.items():
            where = key_path(path, key)
            problem = text_problem(key) if isinstance(key, str) else None
            if problem is not None:
                yield where, f"the key {problem}"
            yield from text_problems(item, where)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from text_problems(item, index_path(path, index))


def _value_problem(value: Any, path: str) -> tuple[str, str] | None:
    """Return where and why a run's input value cannot be kept, or ``None``.

    Keys must be strings; no key or string may hold a NUL or a lone surrogate; no int may have
    more digits than Python writes as text (it could not be saved or shown).
    """
    for where, reason in text_problems(value, path):
        return where, reason
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, dict):
            for key, inner in item.items():
                if not isinstance(key, str):
                    return where, f"keys must be strings, got {type_name(key)}"
                stack.append((inner, key_path(where, key)))
        elif isinstance(item, list):
            stack.extend((inner, index_path(where, i)) for i, inner in enumerate(item))
        elif isinstance(item, int) and not isinstance(item, bool):
            problem = _int_text_problem(item)
            if problem is not None:
                return where, problem
    return None


def _type_problem(kind: str, value: Any) -> str | None:
    fits = isinstance(value, _INPUT_TYPES[kind]) and (
        kind == "boolean" or not isinstance(value, bool)
    )
    if fits and isinstance(value, float) and value != value:  # NaN is no number in JSON
        fits = False
    article = "an" if kind[0] in "aeiou" else "a"
    return None if fits else f"must be {article} {kind}, got {type_name(value)}"


def _unknown_fields(
    ctx: Context, raw: dict[Any, Any], path: str, allowed: tuple[str, ...], what: str
) -> None:
    for key in raw:
        if key not in allowed:
            ctx.add(
                key_path(path, key),
                f"unknown field {key!r} {what}; fields are: {', '.join(allowed)}",
            )


def _name_problem(name: object, what: str) -> str | None:
    if isinstance(name, str) and len(name) <= MAX_NAME_CHARS and _NAME.fullmatch(name):
        return None
    shown = repr(name) if isinstance(name, str) else type_name(name)
    return (
        f"{shown} is not {what} (letters, digits, '_', '.', '-', starting with a letter, digit "
        f"or '_'; at most {MAX_NAME_CHARS} characters)"
    )


def _string(ctx: Context, doc: dict[str, Any], key: str, path: str, *, required: bool) -> str:
    value = doc.get(key)
    if key not in doc:
        if required:
            ctx.add(key_path(path, key), "is required")
        return ""
    if not isinstance(value, str):
        ctx.add(key_path(path, key), f"must be a string, got {type_name(value)}")
        return ""
    return value


def _check_document(
    ctx: Context, doc: Any, duplicates: Mapping[int, list[str]]
) -> AgentDefinition | None:
    if not isinstance(doc, dict):
        ctx.add(
            "$", f"must be an object with name, description and functions, got {type_name(doc)}"
        )
        return None
    for path, reason in text_problems(doc, "$"):
        ctx.add(path, reason)
    if ctx.problems:  # other rules would quote the text in their reasons
        return None
    for path, reason in duplicate_problems(doc, duplicates):
        ctx.add(path, reason)
    _unknown_fields(ctx, doc, "$", _TOP_FIELDS, "in a definition")
    name = _string(ctx, doc, "name", "$", required=True)
    if isinstance(doc.get("name"), str):
        try:
            check_agent(name, "name")
        except InputError as exc:
            ctx.add("$.name", exc.reason)
    description = _string(ctx, doc, "description", "$", required=True)
    if isinstance(doc.get("description"), str) and not description.strip():
        ctx.add("$.description", "must not be empty: say what the agent does")
    elif len(description) > MAX_DESCRIPTION_CHARS:
        ctx.add(
            "$.description", f"is {len(description)} characters; at most {MAX_DESCRIPTION_CHARS}"
        )
    declared = doc.get("prompts")
    ctx.prompts = tuple(declared) if isinstance(declared, dict) and declared else (IMPLICIT_PROMPT,)
    functions_raw = doc.get("functions")
    ctx.functions = tuple(functions_raw) if isinstance(functions_raw, dict) else ()
    inputs = _check_inputs_spec(ctx, doc.get("inputs", {}))
    prompts = _check_prompts(ctx, declared)
    functions = _check_functions(ctx, doc)
    labels = _check_labels(ctx)
    if ctx.problems:
        return None
    return AgentDefinition(
        name=name,
        description=description,
        inputs=MappingProxyType(inputs),
        prompts=MappingProxyType(prompts),
        functions=MappingProxyType(functions),
        memory_labels=labels,
        source=doc,
    )


def _check_inputs_spec(ctx: Context, raw: Any) -> dict[str, InputSpec]:
    if not isinstance(raw, dict):
        ctx.add("$.inputs", f"must be an object of input name -> spec, got {type_name(raw)}")
        return {}
    inputs: dict[str, InputSpec] = {}
    for name, spec in raw.items():
        path = key_path("$.inputs", name)
        problem = ident_problem(name, "an input name")
        if problem is not None:
            ctx.add(path, problem)
        if not isinstance(spec, dict):
            ctx.add(
                path, f"must be an object with {', '.join(_INPUT_FIELDS)}, got {type_name(spec)}"
            )
            continue
        _unknown_fields(ctx, spec, path, _INPUT_FIELDS, "of an input")
        kind = spec.get("type")
        if "type" not in spec:
            ctx.add(f"{path}.type", f"is required: one of {', '.join(_INPUT_TYPES)}")
        elif not isinstance(kind, str) or kind not in _INPUT_TYPES:
            ctx.add(f"{path}.type", f"must be one of {', '.join(_INPUT_TYPES)}, got {kind!r}")
        description = _string(ctx, spec, "description", path, required=False)
        has_default = "default" in spec
        if has_default:
            walk_json(ctx, spec["default"], f"{path}.default", dynamic=False)
            if isinstance(kind, str) and kind in _INPUT_TYPES:
                problem = _type_problem(kind, spec["default"])
                if problem is not None:
                    ctx.add(f"{path}.default", problem)
        required = spec.get("required", not has_default)
        if not isinstance(required, bool):
            ctx.add(f"{path}.required", f"must be a boolean, got {type_name(required)}")
        elif required and has_default:
            ctx.add(
                f"{path}.required",
                "cannot be true with a default (the default would never be used)",
            )
        if isinstance(name, str) and isinstance(kind, str):
            inputs[name] = InputSpec(name, kind, description, required is True, spec.get("default"))
    return inputs


def _check_prompts(ctx: Context, raw: Any) -> dict[str, PromptSpec]:
    if raw is None or raw == {}:
        return {IMPLICIT_PROMPT: PromptSpec(IMPLICIT_PROMPT, "", "conversation")}
    if not isinstance(raw, dict):
        ctx.add(
            "$.prompts",
            f"must be an object of prompt name -> {{system, scope}}, got {type_name(raw)}",
        )
        return {}
    prompts: dict[str, PromptSpec] = {}
    for name, spec in raw.items():
        path = key_path("$.prompts", name)
        problem = _name_problem(name, "a prompt name")
        if problem is not None:
            ctx.add(path, problem)
        if not isinstance(spec, dict):
            ctx.add(path, f"must be an object with system and scope, got {type_name(spec)}")
            continue
        _unknown_fields(ctx, spec, path, _PROMPT_FIELDS, "of a prompt")
        system = spec.get("system", "")
        check_text(ctx, system, f"{path}.system")
        scope = spec.get("scope", "conversation")
        if scope not in _SCOPES:
            ctx.add(f"{path}.scope", f"must be one of {', '.join(_SCOPES)}, got {scope!r}")
        prompts[str(name)] = PromptSpec(str(name), str(system), str(scope))
    return prompts


def _check_functions(ctx: Context, doc: dict[str, Any]) -> dict[str, tuple[Command, ...]]:
    raw = doc.get("functions")
    if "functions" not in doc:
        ctx.add("$.functions", "is required: an object of function name -> block, with 'main'")
        return {}
    if not isinstance(raw, dict):
        ctx.add("$.functions", f"must be an object of function name -> block, got {type_name(raw)}")
        return {}
    functions: dict[str, tuple[Command, ...]] = {}
    for name, block in raw.items():
        path = key_path("$.functions", name)
        problem = _name_problem(name, "a function name")
        if problem is not None:
            ctx.add(path, problem)
        functions[str(name)] = check_block(ctx, block, path)
    if "main" not in raw:
        ctx.add("$.functions.main", "is required: a run starts at function 'main'")
    return functions


def _check_labels(ctx: Context) -> tuple[str, ...]:
    """Check the distinct labels of the whole definition; report the 11th at its command."""
    distinct: list[str] = []
    culprit = "$.functions"
    for label, command in ctx.labels:
        if label not in distinct:
            distinct.append(label)
            if len(distinct) == MAX_LABELS_PER_AGENT + 1:
                culprit = command
    try:
        check_definition_labels(distinct)
    except InputError as exc:
        ctx.add(culprit, exc.reason)
    return tuple(distinct)
