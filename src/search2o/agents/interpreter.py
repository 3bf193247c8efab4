"""The interpreter of agent functions: commands run in order, with ask, call, return, end, fail.

One :class:`Interpreter` executes one run. It knows nothing of databases or HTTP: what a
command needs from the outside (a model call, a knowledge search, a memory search) comes
through :class:`Services`, and what a run changes is collected in :class:`RunEffects` for the
runner to save (:mod:`search2o.agents.runner`). So a failed run simply drops its effects.
Those types, and the signals :class:`Paused` and :class:`Ended`, are in
:mod:`search2o.agents.run_types`.

**Positions and pauses.** ``ask`` pauses the run: :class:`Paused` carries the question and the
call stack as JSON frames ``{"function", "position", "locals"}`` (outermost first; a position is
a path of command indexes and branch names, ``[2, "then", 0]``). Resuming runs the innermost
frame from the ``ask`` itself with the user's answer as ``result``, then the rest of each frame
after its position, so commands before an ``ask`` never run twice. ``ask.check`` (an expression
over ``result``) refuses an answer: the run pauses again on the same ``ask`` with the ``retry``
question, up to ``max_attempts`` answers.

**Names in expressions** (:mod:`search2o.agents.expressions`): ``sys`` (``query``,
``user_email``, ``conversation_id``, ``now``, ``inputs``), ``conv`` and ``agent`` (the
variables as they stand, this run's sets included), the frame's local variables (a function's
``call`` arguments; ``main`` gets the run's inputs) and ``result``, the previous command's
result. Values handed to expressions are deep copies (JSON), so nothing an expression does can
reach the state.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from search2o.agents._schemas import answer_problem
from search2o.agents.commands_schema import Command
from search2o.agents.definition import text_problems
from search2o.agents.expressions import Namespace, render
from search2o.agents.run_types import (
    MAX_CALL_DEPTH,
    Ended,
    Paused,
    RunContext,
    RunEffects,
    Services,
    TraceEntry,
    _Frame,
    _json_text,
    _Returned,
    _Step,
    _strip_fence,
)
from search2o.errors import InputError, RunError, Search2oError
from search2o.providers.chat import ChatMessage, Passage
from search2o.query.citations import CitationRegistry, section_key
from search2o.state.values import check_json
from search2o.textrules import text_problem

__all__ = ["Interpreter"]


class Interpreter:
    """Executes one run of ``context.definition`` (see the module docstring).

    Args:
        context: the run's inputs.
        services: model calls and searches.
        effects: where the run's changes go (a validation run's memory changes never apply).
        trace: record a :class:`TraceEntry` per command (validation runs).
        on_step: called with (function, command key) as each command starts (progress).

    """

    def __init__(
        self,
        context: RunContext,
        services: Services,
        effects: RunEffects,
        *,
        trace: bool = False,
        on_step: Callable[[str, str], None] | None = None,
    ) -> None:
        self.context = context
        self._on_step = on_step
        self.services = services
        self.effects = effects
        self._trace = trace
        definition = context.definition
        self._agent = definition.name
        self._conv = copy.deepcopy(context.state.conv)
        self._vars = copy.deepcopy(context.state.agent.get(definition.name, {}))
        self._sys = Namespace(
            {
                "query": context.query,
                "user_email": context.user_email,
                "conversation_id": context.conversation_id,
                "now": context.now,
                "inputs": Namespace(dict(context.inputs), "sys.inputs"),
            },
            "sys",
        )
        self.commands_run = 0
        self._started = time.monotonic()
        self.citations = CitationRegistry()

    # --- entry points ------------------------------------------------------------------------

    def start(self) -> Any:
        """Run ``main`` from its first command; return the output, or raise :class:`Paused`.

        Raises:
            Paused: an ``ask`` waits for the user.
            RunError: ``fail``, or an error in a command.

        """
        return self._main(lambda: self._function("main", dict(self.context.inputs), None, 0))

    def resume(self, frames: Sequence[Mapping[str, Any]], answer: str, attempts: int) -> Any:
        """Resume a paused run with the user's ``answer`` (see the module docstring).

        Raises:
            Paused, RunError: as :meth:`start`.

        """
        plan = [dict(f) for f in frames]
        return self._main(lambda: self._resume_frame(plan, 0, answer, attempts))

    def _main(self, body: Callable[[], Any]) -> Any:
        try:
            body()
        except (_Returned, Ended) as done:
            return done.value if isinstance(done, _Returned) else done.output
        return None

    # --- frames and blocks --------------------------------------------------------------------

    def _function(
        self, name: str, local: dict[str, Any], resume: list[int | str] | None, depth: int
    ) -> Any:
        if depth >= MAX_CALL_DEPTH:
            raise RunError(
                f"function {name}: call depth exceeds {MAX_CALL_DEPTH} (recursion through call)",
                name,
                "call",
            )
        frame = _Frame(name, local, depth)
        return self._run_frame(frame, resume)

    def _run_frame(self, frame: _Frame, position: list[int | str] | None) -> Any:
        """Run a function's block from ``position``; return its ``return`` value (or None).

        ``return`` from ``main`` ends the run (:class:`Ended`).
        """
        try:
            self._block(frame, self.context.definition.functions[frame.function], [], position)
        except _Returned as returned:
            if frame.function == "main":
                raise Ended(returned.value) from None
            return returned.value
        return None

    def _resume_frame(
        self, plan: list[dict[str, Any]], level: int, answer: str, attempts: int
    ) -> Any:
        saved = plan[level]
        name = str(saved["function"])
        if name not in self.context.definition.functions:
            raise RunError(f"cannot resume: the agent no longer has a function {name!r}", name)
        frame = _Frame(name, dict(saved.get("locals") or {}), level)
        if level + 1 < len(plan):  # an outer frame: finish its call, then go on
            frame.resume_call = lambda: self._resume_frame(plan, level + 1, answer, attempts)
        else:
            frame.answer = (answer, attempts)
        return self._run_frame(frame, list(saved["position"]))

    def _block(
        self,
        frame: _Frame,
        commands: Sequence[Command],
        prefix: list[int | str],
        resume: list[int | str] | None,
    ) -> None:
        start = int(resume[0]) if resume else 0
        for index in range(start, len(commands)):
            inner = list(resume[1:]) if resume and index == start else None
            self._command(frame, commands[index], [*prefix, index], inner)

    # --- one command --------------------------------------------------------------------------

    def _command(
        self,
        frame: _Frame,
        command: Command,
        position: list[int | str],
        resume: list[int | str] | None,
    ) -> None:
        handler = getattr(self, f"_do_{command.kind}")
        entry = TraceEntry(frame.function, command.key, position, None)
        started = time.perf_counter()
        self.commands_run += 1
        self._check_budget(frame, command)
        if self._trace:  # in the order commands start (an if before its branch)
            self.effects.trace.append(entry)
        if self._on_step is not None:
            self._on_step(frame.function, command.key)
        try:
            frame.result = handler(_Step(frame, command, position, resume, entry))
            entry.result = frame.result
        except (Paused, Ended, _Returned):
            raise
        except RunError as exc:
            entry.error = exc.message
            raise
        except Search2oError as exc:  # an expression, a bad value, a failed search or model
            entry.error = exc.message
            raise RunError(
                f"function {frame.function}, command {command.key}: {exc.message}",
                frame.function,
                command.key,
            ) from exc
        finally:
            entry.ms = (time.perf_counter() - started) * 1000

    def _check_budget(self, frame: _Frame, command: Command) -> None:
        """Stop a run that was cancelled or is over its command or time budget."""
        limits = self.context.run_limits
        where = f"function {frame.function}, command {command.key}"
        if self.context.cancelled.is_set():
            raise RunError(f"{where}: the run was stopped", frame.function, command.key)
        if self.commands_run > limits.max_commands:
            raise RunError(
                f"{where}: the run executed more than {limits.max_commands} commands",
                frame.function,
                command.key,
            )
        if time.monotonic() - self._started > limits.max_seconds:
            raise RunError(
                f"{where}: the run took longer than {limits.max_seconds:g} s",
                frame.function,
                command.key,
            )

    def _value(self, value: Any, field_name: str) -> Any:
        """Return ``value`` as plain JSON of bounded size, or fail naming ``field_name``.

        Raises:
            InputError: not JSON (a namespace, a set, bytes, NaN ...), too large, or holding
                an int of more digits than Python writes as text.

        """
        checked = check_json(value, field_name)
        size = len(_json_text(checked, field_name))
        limit = self.context.run_limits.max_value_chars
        if size > limit:
            raise InputError(field_name, f"is {size} characters as JSON; at most {limit}")
        return checked

    def _eval(self, frame: _Frame, value: Any) -> Any:
        names: dict[str, Any] = dict(frame.locals)
        names.update(
            sys=self._sys,
            conv=Namespace(copy.deepcopy(self._conv), "conv"),
            agent=Namespace(copy.deepcopy(self._vars), "agent"),
            result=copy.deepcopy(frame.result),
        )
        return render(value, names, self.context.limits)

    @staticmethod
    def _string(value: Any, field_name: str) -> str:
        if not isinstance(value, str):
            raise InputError(field_name, f"must be a string, got {type(value).__name__}")
        return value

    def _text(self, frame: _Frame, value: Any, field_name: str) -> str:
        rendered = self._eval(frame, value)
        if isinstance(rendered, str):
            return rendered
        return _json_text(rendered, field_name, default=str)

    # --- the commands -------------------------------------------------------------------------

    def _prompt_key(self, name: str | None) -> tuple[str, str | None, str]:
        definition = self.context.definition
        chosen = name or definition.default_prompt
        spec = definition.prompts[chosen]
        agent = self._agent if spec.scope == "agent" else None
        return spec.scope, agent, chosen

    def _history(self, key: tuple[str, str | None, str]) -> tuple[str, list[dict[str, Any]]]:
        """Return the prompt's system text and history: stored, then this run's changes."""
        scope, agent, name = key
        stored = self.context.state.prompt(scope, name, agent)
        system = stored.system if stored is not None else ""
        history = list(stored.history) if stored is not None else []
        for change in self.effects.state.prompts:
            if (change.scope, change.agent, change.name) == key:
                system = change.system if change.system is not None else system
                history.extend(change.append)
        if not system:
            spec = self.context.definition.prompts[name]
            system = spec.system
        return system, history

    def _do_prompt(self, step: _Step) -> Any:
        frame, command = step.frame, step.command
        scope, agent, name = self._prompt_key(command.get("name"))
        system = command.get("system")
        rendered_system = None if system is None else self._text(frame, system, "system")
        appended = [
            {"role": role, "content": self._text(frame, command.get(role), role)}
            for role in ("user", "assistant")
            if command.get(role) is not None
        ]
        self.effects.state.append_prompt(scope, name, appended, agent=agent, system=rendered_system)
        step.entry.arguments = {
            "prompt": name,
            "system": rendered_system,
            "append": appended,
        }
        return frame.result

    def _do_llm(self, step: _Step) -> Any:
        frame, command = step.frame, step.command
        key = self._prompt_key(command.get("prompt"))
        system, history = self._history(key)
        system = self._text(frame, system, "system") if system else ""
        messages = [ChatMessage("system", system)] if system else []
        messages += [
            ChatMessage(entry["role"], str(entry.get("content") or ""))
            for entry in history
            if entry.get("role") in ("user", "assistant")
        ]
        passages = self._passages(self._eval(frame, command.get("passages")))
        arguments: dict[str, Any] = {"profile": command.get("profile"), "prompt": key[2]}
        exchange: list[dict[str, Any]] = []
        if not messages or messages[-1].role != "user":
            # Nothing is asked yet (no history, or it ends with the model's answer): the
            # user's message is the question, and it joins the history with the answer.
            messages.append(ChatMessage("user", self.context.query))
            exchange.append({"role": "user", "content": self.context.query})
        if passages is not None:  # the sources go with the question (ChatMessage.passages)
            messages[-1] = ChatMessage("user", messages[-1].content, passages=passages)
            arguments["passages"] = [p.number for p in passages]
        if command.get("schema") is not None:
            wanted = json.dumps(command.get("schema"), ensure_ascii=False)
            last = messages[-1]
            messages[-1] = ChatMessage(
                "user",
                f"{last.content}\n\nAnswer with JSON only, matching this JSON Schema: {wanted}",
                passages=last.passages,
            )
        step.entry.arguments = arguments
        temperature = command.get("temperature")
        if temperature is not None:
            arguments["temperature"] = temperature
            answer = self.services.llm(command.get("profile"), messages, float(temperature))
        else:
            answer = self.services.llm(command.get("profile"), messages)
        where = f"function {frame.function}, command {command.key}"
        # The model's text comes from outside: what no store can keep fails the run here,
        # not the save (textrules: NUL, lone surrogates).
        unstorable = text_problem(answer)
        if unstorable is not None:
            raise RunError(f"{where}: the model's answer {unstorable}", frame.function, command.key)
        exchange.append({"role": "assistant", "content": answer})
        self.effects.state.append_prompt(key[0], key[2], exchange, agent=key[1])
        schema = command.get("schema")
        if schema is None:
            return answer
        try:
            parsed = json.loads(_strip_fence(answer))
        except ValueError:
            raise RunError(
                f"{where}: the model's answer is not the JSON the schema asks for",
                frame.function,
                command.key,
            ) from None
        for at, reason in text_problems(parsed, "answer"):  # JSON escapes such as \ud800
            raise RunError(f"{where}: the model's {at} {reason}", frame.function, command.key)
        problem = answer_problem(schema, parsed)
        if problem is not None:
            raise RunError(f"{where}: the model's answer {problem}", frame.function, command.key)
        return parsed

    def _do_search(self, step: _Step) -> Any:
        frame, command = step.frame, step.command
        query = self._text(frame, command.get("query"), "query")
        limit = self._eval(frame, command.get("limit"))
        if limit is not None and (not isinstance(limit, int) or not 1 <= limit <= 50):
            raise InputError("limit", f"must be an integer from 1 to 50, got {limit!r}")
        step.entry.arguments = {"query": query, "limit": limit}
        hits = self.services.search(query, limit)
        for hit in hits:  # one number per document section for the run, as in a chat turn
            headings = list(hit.get("heading_path") or [])
            hit["number"] = self.citations.register(
                section_key(hit.get("document_id"), headings),
                title=str(hit.get("title", "")),
                source=str(hit.get("source", "")),
                heading_path=headings,
                document_id=hit.get("document_id"),
                chunk_id=hit.get("chunk_id"),
            )
        return hits

    def _passages(self, value: Any) -> list[Passage] | None:
        """Turn ``llm.passages`` into the model's passages, numbered in the run's registry.

        Hits of ``search`` keep their number; other sources (``{"title", "text"}`` objects,
        e.g. memories) get the next free one, so every ``[n]`` of the answer is a citation.
        """
        if value is None:
            return None
        if not isinstance(value, list) or not all(
            isinstance(h, dict) and isinstance(h.get("text"), str) for h in value
        ):
            raise InputError(
                "passages", "must be a list of sources with a `text` (the hits of a `search`)"
            )
        passages = []
        for index, hit in enumerate(value):
            title = str(hit.get("title", ""))
            source = str(hit.get("source", ""))
            headings = [str(h) for h in hit.get("heading_path") or []]
            document = hit.get("document_id")
            key = (
                section_key(document, headings)
                if document is not None
                else f"given:{title}:{index}"
            )
            number = self.citations.register(
                key,
                title=title,
                source=source,
                heading_path=headings,
                document_id=document if isinstance(document, int) else None,
                chunk_id=hit.get("chunk_id") if isinstance(hit.get("chunk_id"), int) else None,
            )
            location = " > ".join([source, *headings]) if source else title
            passages.append(
                Passage(
                    number, title, location, hit["text"], hit.get("similarity"), tuple(headings)
                )
            )
        return passages

    def _do_memory(self, step: _Step) -> Any:
        frame, command = step.frame, step.command
        store = {
            label: self._string(self._eval(frame, text), f"store.{label}")
            for label, text in (command.get("store") or {}).items()
        }
        delete = list(command.get("delete") or [])
        query_field = command.get("query")
        query = None if query_field is None else self._text(frame, query_field, "query")
        arguments: dict[str, Any] = {"store": store, "delete": delete, "query": query}
        step.entry.arguments = arguments
        if store or delete:
            rejected = self.effects.memory.record(self._agent, store=store, delete=delete)
            arguments["rejected"] = [{"label": r.label, "reason": r.reason} for r in rejected]
        if query is None:
            return None
        return self.services.memory_search(
            query,
            command.get("agentName"),
            command.get("label"),
            int(command.get("limit")),
            self.effects.memory,
        )

    def _do_set(self, step: _Step) -> Any:
        frame, command = step.frame, step.command
        values = {
            name: self._value(self._eval(frame, value), name)
            for name, value in command.fields.items()
        }
        step.entry.arguments = values
        for name, value in values.items():
            if name.startswith("conv."):
                self._conv[name[5:]] = copy.deepcopy(value)
                self.effects.state.set_conv(name[5:], value)
            elif name.startswith("agent."):
                self._vars[name[6:]] = copy.deepcopy(value)
                self.effects.state.set_agent(self._agent, name[6:], value)
            else:
                frame.locals[name] = value
        return frame.result

    def _do_if(self, step: _Step) -> Any:
        frame, command, position, resume = step.frame, step.command, step.position, step.resume
        if resume:  # resuming inside a branch: the condition was decided before the ask
            branch = str(resume[0])
            self._block(frame, command.fields[branch], [*position, branch], list(resume[1:]))
            return frame.result
        chosen = "then" if self._eval(frame, command.get("condition")) else "else"
        step.entry.arguments = {"branch": chosen}
        self._block(frame, command.fields.get(chosen) or (), [*position, chosen], None)
        return frame.result

    def _do_call(self, step: _Step) -> Any:
        frame, command, position, resume = step.frame, step.command, step.position, step.resume
        name = command.get("function")
        if frame.resume_call is not None and resume is not None:
            call, frame.resume_call = frame.resume_call, None
            try:
                return call()
            except Paused as paused:
                raise self._outer(paused, frame, position) from None
        args = {
            k: self._value(self._eval(frame, v), f"args.{k}")
            for k, v in (command.get("args") or {}).items()
        }
        step.entry.arguments = {"function": name, "args": args}
        try:
            return self._function(name, args, None, frame.depth + 1)
        except Paused as paused:
            raise self._outer(paused, frame, position) from None

    def _outer(self, paused: Paused, frame: _Frame, position: list[int | str]) -> Paused:
        outer = {"function": frame.function, "position": position, "locals": frame.locals}
        return Paused(paused.question, [outer, *paused.frames], paused.attempts)

    def _do_ask(self, step: _Step) -> Any:
        frame, command, position, resume = step.frame, step.command, step.position, step.resume
        if frame.answer is not None and resume is not None:
            answer, attempts = frame.answer
            frame.answer = None
            check = command.get("check")
            frame.result = answer
            step.entry.arguments = {"answer": answer, "attempt": attempts}
            if check is None or self._eval(frame, check):
                return answer
            if attempts >= int(command.get("max_attempts")):
                raise RunError(
                    f"function {frame.function}, command {command.key}: no valid answer after "
                    f"{attempts} attempts",
                    frame.function,
                    command.key,
                )
            retry = command.get("retry") or command.get("question")
            question = self._text(frame, retry, "retry")
            raise Paused(question, [self._frame_json(frame, position)], attempts + 1)
        question = self._text(frame, command.get("question"), "question")
        step.entry.arguments = {"question": question}
        raise Paused(question, [self._frame_json(frame, position)], 1)

    @staticmethod
    def _frame_json(frame: _Frame, position: list[int | str]) -> dict[str, Any]:
        return {"function": frame.function, "position": position, "locals": frame.locals}

    def _do_return(self, step: _Step) -> Any:
        frame, command = step.frame, step.command
        value = self._value(self._eval(frame, command.get("value")), "value")
        step.entry.arguments = {"value": value}
        raise _Returned(value)

    def _do_end(self, step: _Step) -> Any:
        frame, command = step.frame, step.command
        output = self._value(self._eval(frame, command.get("output")), "output")
        step.entry.arguments = {"output": output}
        raise Ended(output)

    def _do_fail(self, step: _Step) -> Any:
        frame, command = step.frame, step.command
        message = self._text(frame, command.get("message"), "message")
        step.entry.arguments = {"message": message}
        raise RunError(message, frame.function, command.key)
