r"""The commands an agent's functions are made of: one table of kinds and their fields.

A function is a *block*: a JSON object whose keys are commands, run in order. A command key is
its kind, optionally followed by ``.`` and a name (``memory``, ``memory.store``), so one block
can hold several commands of one kind. :data:`COMMANDS` maps each kind to a
:class:`CommandSpec`: its fields, which are required, which need at least one of them, and the
defaults; adding a kind is one entry there (and, in the runner, one handler).

:func:`check_block` applies the table to a block and records every problem (JSON path,
reason) in a :class:`Context` instead of stopping at the first, so an author sees them all at
once. A valid block becomes a ``tuple`` of :class:`Command`.
"""

from __future__ import annotations

import json
import keyword
import math
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from search2o.agents._sandbox_sizes import _int_text_problem
from search2o.agents._schemas import schema_problems
from search2o.agents.expressions import ExpressionSyntaxError, is_dynamic, parse_dynamic
from search2o.errors import InputError
from search2o.memory.changes import MAX_STORES_PER_COMMAND, check_agent, check_label
from search2o.textrules import text_problem

__all__ = [
    "COMMANDS",
    "RESERVED_NAMES",
    "Check",
    "Command",
    "CommandSpec",
    "Context",
    "FieldSpec",
    "check_block",
    "check_text",
    "ident_problem",
    "index_path",
    "key_path",
    "type_name",
    "walk_json",
]

RESERVED_NAMES = frozenset({"sys", "conv", "agent", "result"})
"""Names the runner provides in every expression; no variable, argument or input may take them."""

_PATH_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_COMMAND_KEY = re.compile(r"([a-z]+)(?:\.(\w+))?")


def key_path(path: str, key: object) -> str:
    """Return the JSON path of ``key`` inside the object at ``path``.

    ``$.functions`` + ``main`` → ``$.functions.main``; a key that is not an identifier is
    quoted: ``$.functions.main["memory.store"]``. A key holding a NUL or a lone surrogate is
    quoted with JSON escapes (``["a\u0000"]``), so the path itself can be stored and sent.
    """
    if isinstance(key, str) and _PATH_IDENT.fullmatch(key):
        return f"{path}.{key}"
    text = str(key)
    return f"{path}[{json.dumps(text, ensure_ascii=text_problem(text) is not None)}]"


def index_path(path: str, index: int) -> str:
    """Return the JSON path of item ``index`` of the list at ``path`` (``$.x.delete[3]``)."""
    return f"{path}[{index}]"


def type_name(value: object) -> str:
    """Name the type of a JSON value for a message (``int``, ``str``, ``null``)."""
    return "null" if value is None else type(value).__name__


def ident_problem(name: object, what: str) -> str | None:
    """Return why ``name`` cannot name a variable, argument or input, or ``None``.

    The rule: a Python identifier, not a keyword, not starting with ``_``, not one of
    :data:`RESERVED_NAMES`.
    """
    if (
        not isinstance(name, str)
        or not name.isidentifier()
        or keyword.iskeyword(name)
        or name.startswith("_")
    ):
        shown = repr(name) if isinstance(name, str) else type_name(name)
        return f"{shown} is not {what}: use a Python identifier that does not start with '_'"
    if name in RESERVED_NAMES:
        return f"{name!r} is reserved ({', '.join(sorted(RESERVED_NAMES))}); choose another name"
    return None


@dataclass
class Context:
    """What the checks need to know about the whole definition, and the problems found so far.

    Attributes:
        profiles: the model profile names the server offers.
        prompts: the definition's prompt names (``("main",)`` when it declares none).
        functions: the definition's function names, in order.
        problems: ``(path, reason)`` pairs, in document order.
        labels: every valid memory label a command uses, with that command's path, in order.
        command: the path of the command being checked (where a label is introduced).

    """

    profiles: Collection[str]
    prompts: Sequence[str] = ()
    functions: Sequence[str] = ()
    problems: list[tuple[str, str]] = field(default_factory=list)
    labels: list[tuple[str, str]] = field(default_factory=list)
    command: str = "$"

    def add(self, path: str, reason: str) -> None:
        """Record a problem at ``path`` (an identical one is recorded once)."""
        if (path, reason) not in self.problems:
            self.problems.append((path, reason))


Check = Callable[[Context, Any, str], Any]
"""A field check: ``(context, value, path) -> value to keep``; problems go to the context."""


def _compile(ctx: Context, value: str, path: str) -> None:
    try:
        parse_dynamic(value)
    except ExpressionSyntaxError as exc:
        ctx.add(path, f"invalid expression: {exc.reason}")


def check_text(ctx: Context, value: Any, path: str) -> Any:
    """Check a literal or dynamic string (``"{ expression }"`` is compiled)."""
    if not isinstance(value, str):
        ctx.add(path, f"must be a string, got {type_name(value)}")
    else:
        _compile(ctx, value, path)
    return value


def _expression(ctx: Context, value: Any, path: str) -> Any:
    if not isinstance(value, str):
        ctx.add(path, f"must be a string, got {type_name(value)}")
    elif not is_dynamic(value):
        ctx.add(path, "must be an expression in braces, e.g. \"{ answer != '' }\"")
    else:
        _compile(ctx, value, path)
    return value


def _integer(low: int, high: int, *, dynamic: bool = False) -> Check:
    def check(ctx: Context, value: Any, path: str) -> Any:
        if dynamic and isinstance(value, str):
            if is_dynamic(value):
                _compile(ctx, value, path)
            else:
                ctx.add(path, f"must be an integer or an expression in braces, got {value!r}")
        elif isinstance(value, bool) or not isinstance(value, int):
            ctx.add(path, f"must be an integer, got {type_name(value)}")
        elif not low <= value <= high:
            ctx.add(path, f"must be from {low} to {high}, got {value}")
        return value

    return check


def _number(low: float, high: float) -> Check:
    def check(ctx: Context, value: Any, path: str) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float):
            ctx.add(path, f"must be a number, got {type_name(value)}")
        elif not (math.isfinite(value) and low <= value <= high):
            ctx.add(path, f"must be from {low:g} to {high:g}, got {value}")
        return value

    return check


def walk_json(ctx: Context, value: Any, path: str, *, dynamic: bool) -> None:
    """Check that ``value`` is a JSON value; with ``dynamic``, compile its dynamic strings."""
    if isinstance(value, str):
        if dynamic:
            _compile(ctx, value, path)
    elif isinstance(value, float):
        if not math.isfinite(value):
            ctx.add(path, f"must be a finite number, got {value}")
    elif isinstance(value, int) and not isinstance(value, bool):
        problem = _int_text_problem(value)
        if problem is not None:
            ctx.add(path, problem)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            walk_json(ctx, item, index_path(path, index), dynamic=dynamic)
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                ctx.add(key_path(path, key), f"keys must be strings, got {type_name(key)}")
            walk_json(ctx, item, key_path(path, key), dynamic=dynamic)
    elif value is not None and not isinstance(value, bool | int):
        ctx.add(path, f"must be a JSON value, got {type_name(value)}")


def _any(ctx: Context, value: Any, path: str) -> Any:
    walk_json(ctx, value, path, dynamic=True)
    return value


def _schema(ctx: Context, value: Any, path: str) -> Any:
    """Check a JSON Schema: its draft's metaschema (2020-12 by default) and our rules.

    The rules (:func:`search2o.agents._schemas.schema_problems`): references only inside the
    schema, nothing fetched, patterns RE2 accepts; each problem at its path.
    """
    if not isinstance(value, dict):
        ctx.add(path, f"must be a JSON Schema object, got {type_name(value)}")
        return value
    before = len(ctx.problems)
    walk_json(ctx, value, path, dynamic=False)
    if len(ctx.problems) > before:  # not JSON: nothing more to check
        return value
    for segments, reason in schema_problems(value):
        where = path
        for segment in segments:
            if isinstance(segment, int):
                where = index_path(where, segment)
            else:
                where = key_path(where, segment)
        ctx.add(where, reason)
    return value


def _reference(what: str, known: Callable[[Context], Collection[str]], lead: str) -> Check:
    def check(ctx: Context, value: Any, path: str) -> Any:
        names = known(ctx)
        if not isinstance(value, str):
            ctx.add(path, f"must be a string, got {type_name(value)}")
        elif value not in names:
            listed = ", ".join(names) if names else "(none)"
            ctx.add(path, f"{lead} {value!r}; {what} are: {listed}")
        return value

    return check


def _checked_by(rule: Callable[[object, str], str]) -> Check:
    """Adapt a rule of :mod:`search2o.memory.changes` (raising InputError) to a field check."""

    def check(ctx: Context, value: Any, path: str) -> Any:
        try:
            rule(value, path)
        except InputError as exc:
            ctx.add(path, exc.reason)
        return value

    return check


def _label(ctx: Context, value: Any, path: str) -> bool:
    try:
        check_label(value, path)
    except InputError as exc:
        ctx.add(path, exc.reason)
        return False
    ctx.labels.append((value, ctx.command))
    return True


def _label_field(ctx: Context, value: Any, path: str) -> Any:
    _label(ctx, value, path)
    return value


def _store(ctx: Context, value: Any, path: str) -> Any:
    if not isinstance(value, dict):
        ctx.add(path, f"must be an object of label -> text, got {type_name(value)}")
        return value
    if len(value) > MAX_STORES_PER_COMMAND:
        ctx.add(path, f"at most {MAX_STORES_PER_COMMAND} stores in one command, found {len(value)}")
    for label, text in value.items():
        _label(ctx, label, key_path(path, label))
        check_text(ctx, text, key_path(path, label))
    return value


def _delete(ctx: Context, value: Any, path: str) -> Any:
    if not isinstance(value, list):
        ctx.add(path, f"must be a list of labels, got {type_name(value)}")
        return value
    if len(value) > MAX_STORES_PER_COMMAND:
        ctx.add(
            path, f"at most {MAX_STORES_PER_COMMAND} deletes in one command, found {len(value)}"
        )
    for index, label in enumerate(value):
        _label(ctx, label, index_path(path, index))
    return value


def _args(ctx: Context, value: Any, path: str) -> Any:
    if not isinstance(value, dict):
        ctx.add(path, f"must be an object of argument name -> value, got {type_name(value)}")
        return value
    for name, item in value.items():
        problem = ident_problem(name, "an argument name")
        if problem is not None:
            ctx.add(key_path(path, name), problem)
        walk_json(ctx, item, key_path(path, name), dynamic=True)
    return value


def _block(ctx: Context, value: Any, path: str) -> tuple[Command, ...]:
    return check_block(ctx, value, path)


@dataclass(frozen=True)
class FieldSpec:
    """One field of a command kind.

    Attributes:
        check: records the value's problems in the context; returns the value to keep.
        required: the command needs it.
        default: what :meth:`Command.get` answers when the field is absent.

    """

    check: Check
    required: bool = False
    default: Any = None


@dataclass(frozen=True)
class CommandSpec:
    """The fields of one command kind.

    Attributes:
        fields: field name -> spec, in documentation order.
        one_of: the command needs at least one of these fields.
        variables: the keys are variable names, not fields (``set``); each value is any JSON.

    """

    fields: Mapping[str, FieldSpec] = field(default_factory=dict)
    one_of: tuple[str, ...] = ()
    variables: bool = False


_TEXT = FieldSpec(check_text)
_PROMPT_REF = FieldSpec(_reference("prompts", lambda ctx: ctx.prompts, "unknown prompt"))

COMMANDS: Mapping[str, CommandSpec] = MappingProxyType(
    {
        "prompt": CommandSpec(
            {"name": _PROMPT_REF, "system": _TEXT, "user": _TEXT, "assistant": _TEXT},
            one_of=("system", "user", "assistant"),
        ),
        "llm": CommandSpec(
            {
                "profile": FieldSpec(
                    _reference(
                        "profiles", lambda ctx: sorted(ctx.profiles), "unknown model profile"
                    )
                ),
                "prompt": _PROMPT_REF,
                "schema": FieldSpec(_schema),
                "temperature": FieldSpec(_number(0, 2)),
                # hits of a `search` command, handed to the model as a tool result to cite
                "passages": FieldSpec(_any),
            }
        ),
        "search": CommandSpec(
            {
                "query": FieldSpec(check_text, required=True),
                "limit": FieldSpec(_integer(1, 50, dynamic=True)),
            }
        ),
        "memory": CommandSpec(
            {
                "store": FieldSpec(_store),
                "query": _TEXT,
                "agentName": FieldSpec(_checked_by(check_agent)),
                "label": FieldSpec(_label_field),
                "limit": FieldSpec(_integer(1, 100), default=10),
                "delete": FieldSpec(_delete),
            },
            one_of=("store", "query", "delete"),
        ),
        "set": CommandSpec(variables=True),
        "if": CommandSpec(
            {
                "condition": FieldSpec(_expression, required=True),
                "then": FieldSpec(_block, required=True),
                "else": FieldSpec(_block),
            }
        ),
        "call": CommandSpec(
            {
                "function": FieldSpec(
                    _reference("functions", lambda ctx: ctx.functions, "calls unknown function"),
                    required=True,
                ),
                "args": FieldSpec(_args),
            }
        ),
        "ask": CommandSpec(
            {
                "question": FieldSpec(check_text, required=True),
                "check": FieldSpec(_expression),
                "retry": _TEXT,
                "max_attempts": FieldSpec(_integer(1, 20), default=5),
            }
        ),
        "return": CommandSpec({"value": FieldSpec(_any)}),
        "end": CommandSpec({"output": FieldSpec(_any)}),
        "fail": CommandSpec({"message": FieldSpec(check_text, required=True)}),
    }
)
"""Every command kind and its fields. Unlisted defaults are ``None``: for ``prompt.name`` and
``llm.prompt`` the definition's first prompt, for ``llm.profile`` the server's default profile,
for ``search.limit`` the Knowledge Store's default, for ``ask.retry`` the question itself."""


@dataclass(frozen=True)
class Command:
    """One checked command of a block.

    Attributes:
        kind: ``prompt``, ``llm``, ``search``, ``memory``, ``set``, ``if``, ``call``, ``ask``,
            ``return``, ``end`` or ``fail``.
        key: the key as written (``memory.store``).
        path: its JSON path (``$.functions.main["memory.store"]``), for run-time errors.
        fields: the fields as written (dynamic strings not evaluated); for ``if``, ``then`` and
            ``else`` are ``tuple[Command, ...]``; for ``set``, variable name -> value.

    """

    kind: str
    key: str
    path: str
    fields: Mapping[str, Any]

    def get(self, name: str) -> Any:
        """Return field ``name`` as written, or its default from :data:`COMMANDS`.

        Raises:
            KeyError: ``name`` is not a field of this kind (nor, for ``set``, a variable set).

        """
        if name in self.fields:
            return self.fields[name]
        return COMMANDS[self.kind].fields[name].default


def _kind(ctx: Context, key: object, path: str) -> str | None:
    match = _COMMAND_KEY.fullmatch(key) if isinstance(key, str) else None
    if match is None:
        shown = repr(key) if isinstance(key, str) else type_name(key)
        ctx.add(
            path,
            f"{shown} is not a command key: a command kind optionally followed by '.' and a "
            f"name of letters, digits or '_' (e.g. 'memory.store')",
        )
        return None
    if match.group(1) not in COMMANDS:
        ctx.add(path, f"unknown command {match.group(1)!r}; commands are: {', '.join(COMMANDS)}")
        return None
    return match.group(1)


def _fields(ctx: Context, kind: str, spec: CommandSpec, raw: dict[Any, Any], path: str) -> Any:
    fields: dict[str, Any] = {}
    for name, value in raw.items():
        field_path = key_path(path, name)
        if spec.variables:
            scope, dot, ident = name.partition(".") if isinstance(name, str) else ("", "", name)
            problem = (
                f"{name!r} is not a variable: use 'conv.<name>', 'agent.<name>' or '<name>'"
                if dot and scope not in ("conv", "agent")
                else ident_problem(ident if dot else name, "a variable name")
            )
            if problem is not None:
                ctx.add(field_path, problem)
            walk_json(ctx, value, field_path, dynamic=True)
            fields[name] = value
        elif name in spec.fields:
            fields[name] = spec.fields[name].check(ctx, value, field_path)
        else:
            ctx.add(
                field_path,
                f"unknown field {name!r} for command {kind!r}; fields are: "
                f"{', '.join(spec.fields)}",
            )
    if spec.variables and not raw:
        ctx.add(path, "must set at least one variable")
    for name, field_spec in spec.fields.items():
        if field_spec.required and name not in raw:
            ctx.add(key_path(path, name), "is required")
    if spec.one_of and not any(name in raw for name in spec.one_of):
        ctx.add(path, f"needs at least one of: {', '.join(spec.one_of)}")
    return fields


def check_block(ctx: Context, raw: Any, path: str) -> tuple[Command, ...]:
    """Check a block (command key -> fields, in order); return its commands.

    Every problem is recorded in ``ctx``; a bad command is left out of the result (the caller
    raises when ``ctx.problems`` is not empty, so a partial block is never run).
    """
    if not isinstance(raw, dict):
        ctx.add(
            path,
            'must be an object whose keys are commands, in order (e.g. {"ask": {...}, '
            f'"return": {{...}}}}), got {type_name(raw)}',
        )
        return ()
    if not raw:
        ctx.add(path, "must hold at least one command")
        return ()
    commands: list[Command] = []
    for key, value in raw.items():
        command_path = key_path(path, key)
        kind = _kind(ctx, key, command_path)
        if kind is None:
            continue
        if not isinstance(value, dict):
            ctx.add(command_path, f"must be an object of fields, got {type_name(value)}")
            continue
        outer, ctx.command = ctx.command, command_path
        try:
            fields = _fields(ctx, kind, COMMANDS[kind], value, command_path)
        finally:
            ctx.command = outer
        commands.append(Command(kind, key, command_path, MappingProxyType(fields)))
    return tuple(commands)
