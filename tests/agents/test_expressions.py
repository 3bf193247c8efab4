"""Dynamic strings: what the sandbox evaluates, what it refuses, and its bounds on work."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

import pytest

from search2o.agents.expressions import (
    Expression,
    ExpressionError,
    ExpressionSyntaxError,
    Namespace,
    SandboxLimits,
    _compile_cached,
    compile_expression,
    is_dynamic,
    parse_dynamic,
    render,
)
from search2o.errors import Search2oError

# An attack must be refused before it does its damage; the real figure is well under 0.1 s,
# the bound is loose because the test machine is shared.
FAST = 1.0


def names() -> dict[str, object]:
    return {
        "sys": Namespace({"query": "Which Airline?", "user": {"email": "a@example.com"}}, "sys"),
        "conv": Namespace({"topic": "travel"}, "conv"),
        "agent": Namespace({}, "agent"),
        "airline": "KLM",
        "result": [{"text": "likes window seats"}, {"text": "flies KLM"}],
        "d": {"k": 3},
        "words": ["b", "a", "c"],
    }


def evaluate(source: str, values: Mapping[str, object] | None = None, **limits: float) -> object:
    return compile_expression(source).evaluate(
        names() if values is None else values, SandboxLimits(**limits)
    )


def refused(source: str, values: Mapping[str, object] | None = None, **limits: float) -> str:
    """Evaluate an expression that must fail fast; return the reason.

    Fast is this thread's CPU time (the evaluation runs in it): wall time also counts the waits
    for a core that other processes hold.
    """
    start = time.thread_time()
    with pytest.raises(ExpressionError) as caught:
        evaluate(source, values, **limits)
    assert time.thread_time() - start < FAST, f"{source} took too long to be refused"
    assert caught.value.expression == source
    return caught.value.reason


def syntax_error(source: str) -> str:
    with pytest.raises(ExpressionSyntaxError) as caught:
        compile_expression(source)
    return caught.value.reason


# -- dynamic strings ---------------------------------------------------------------------------


def test_only_a_whole_braced_string_is_dynamic() -> None:
    assert is_dynamic("{ sys.query }") and is_dynamic("  {x}\n")
    assert not is_dynamic("hello {name}") and not is_dynamic("{ a } b") and not is_dynamic("")
    assert parse_dynamic("hello {name}") is None
    expression = parse_dynamic("  { sys.query }  ")
    assert isinstance(expression, Expression) and expression.source == "sys.query"


def test_a_dict_literal_inside_the_braces_is_the_expression() -> None:
    assert render("{ {'a': 1, 'b': [1,2]} }", {}) == {"a": 1, "b": [1, 2]}


@pytest.mark.parametrize(
    ("value", "reason"),
    [("{ }", "empty"), ("{   \n }", "empty"), ("{ 1 + * 2 }", "invalid syntax at column 5")],
)
def test_empty_or_bad_syntax_is_a_syntax_error(value: str, reason: str) -> None:
    with pytest.raises(ExpressionSyntaxError) as caught:
        parse_dynamic(value)
    assert reason in caught.value.reason
    assert not isinstance(caught.value, Search2oError)


def test_render_is_deep_and_keeps_keys_and_scalars() -> None:
    definition = {
        "{ airline }": "{ airline }",
        "items": ["{ sys.query }", "literal", 3, None, True, {"n": "{ len(result) }"}],
    }
    assert render(definition, names()) == {
        "{ airline }": "KLM",
        "items": ["Which Airline?", "literal", 3, None, True, {"n": 2}],
    }


def test_render_reports_bad_syntax_as_an_expression_error() -> None:
    with pytest.raises(ExpressionError) as caught:
        render({"x": "{ 1 + }"}, {})
    assert caught.value.expression == "1 +" and "invalid syntax" in caught.value.reason


def test_render_compiles_each_source_once() -> None:
    source = "{ f'cache probe {airline}' }"
    render(source, names())
    before = _compile_cached.cache_info()
    assert render(source, names()) == "cache probe KLM"
    after = _compile_cached.cache_info()
    assert after.hits == before.hits + 1 and after.misses == before.misses


# -- what works --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("sys.query", "Which Airline?"),
        ("f'The user prefers to fly {airline}'", "The user prefers to fly KLM"),
        (
            "f'What I remember: {[m[\"text\"] for m in result]}. Question: {sys.query}'",
            "What I remember: ['likes window seats', 'flies KLM']. Question: Which Airline?",
        ),
        ("len(result) > 0 and conv.topic == 'travel'", True),
        ("sys.user['email']", "a@example.com"),
        ("'a,b'.split(',')", ["a", "b"]),
        ("sys.query.lower()", "which airline?"),
        ("d.get('k', 0) + d.get('missing', 0)", 3),
        ("', '.join(words)", "b, a, c"),
        ("sorted(words)[:2]", ["a", "b"]),
        ("words[::-1]", ["c", "a", "b"]),
        ("'yes' if 'query' in sys else 'no'", "yes"),
        ("'missing' in sys or not words", False),
        ("(2 + 3) * 4 ** 2 // 3 - 10 % 4", 24),
        ("1 < 2 <= 2 != 3", True),
        ("f'{3.14159:.2f}|{airline!r:>6}|{7:03d}'", "3.14| 'KLM'|007"),
        ("'%s flies %05.1f' % (airline, 2.25)", "KLM flies 002.2"),
        ("sorted(result, key=lambda m: len(m['text']))[0]['text']", "flies KLM"),
        ("{w: i for i, w in enumerate(words)}", {"b": 0, "a": 1, "c": 2}),
        ("dict(zip(words, range(3)))", {"b": 0, "a": 1, "c": 2}),
        ("[*words, *'xy']", ["b", "a", "c", "x", "y"]),
        ("{**d, 'z': [x * x for x in range(4) if x % 2]}", {"k": 3, "z": [1, 9]}),
        ("sum(x for x in range(5)) + max(words, key=len).count('b')", 11),
        ("set(words) - {'a'} == {'b', 'c'}", True),
        (
            "round(2.675, 1), abs(-2), int('7'), float('1.5'), bool(0), str(12)",
            (2.7, 2, 7, 1.5, False, "12"),
        ),
        ("any(w == 'a' for w in words) and all(words) and tuple(words)[0]", "b"),
        ("2 ** 100 > 1 << 90", True),
        ("None", None),
    ],
)
def test_the_everyday_expressions_work(source: str, expected: object) -> None:
    assert evaluate(source) == expected


def test_names_hide_builtins_of_the_same_name() -> None:
    assert evaluate("max + 1", {"max": 41}) == 42


def test_a_missing_namespace_attribute_names_the_namespace() -> None:
    reason = refused("sys.nope")
    assert reason == "AttributeError: sys has no 'nope'"


def test_a_namespace_is_read_only_and_shows_only_its_keys() -> None:
    ns = Namespace({"query": "secret text"}, "sys")
    with pytest.raises(AttributeError, match="read-only"):
        ns.query = "x"  # type: ignore[misc]
    assert repr(ns) == "<Namespace sys: query>"
    assert evaluate("f'{sys}'", {"sys": ns}) == "<Namespace sys: query>"
    assert "query" in ns and len(ns) == 1 and list(ns) == ["query"] and ns["query"] == "secret text"


# -- what is refused at compile time -----------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "named"),
    [
        ("__import__('os')", "'__import__'"),
        ("().__class__.__bases__[0].__subclasses__()", "__"),
        ("_private", "'_private'"),
        ("sys._values", "'_values'"),
        ("sys.__dict__", "'__dict__'"),
        ("result.__class__", "'__class__'"),
        ("[x for _x in words]", "'_x'"),
        ("(lambda _a: 1)(2)", "'_a'"),
    ],
)
def test_underscore_names_and_attributes_are_refused_at_compile(source: str, named: str) -> None:
    reason = syntax_error(source)
    assert "names starting with '_' are not allowed" in reason and named in reason


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("(x := 1)", "assignment expressions"),
        ("print(1)", "'print' is not available"),
        ("eval('1')", "Eval calls are not allowed"),
        ("exec('1')", "Exec calls are not allowed"),
        ("[(yield) for x in words]", "yield is not allowed"),
    ],
)
def test_assignment_print_eval_and_yield_are_refused_at_compile(source: str, reason: str) -> None:
    assert reason in syntax_error(source)


def test_a_syntax_error_carries_the_source_in_its_message() -> None:
    with pytest.raises(ExpressionSyntaxError) as caught:
        compile_expression("1 +")
    assert str(caught.value) == f"expression {{ 1 + }}: {caught.value.reason}"


# -- what is refused at run time ---------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["open", "getattr", "type", "vars", "globals", "compile", "format", "isinstance"]
)
def test_dangerous_builtins_are_not_defined(name: str) -> None:
    source = f"{name}('/etc/passwd')"
    assert refused(source) == f"NameError: name {name!r} is not defined"


def test_open_is_an_expression_error_with_a_clear_message() -> None:
    with pytest.raises(ExpressionError) as caught:
        evaluate("open('/etc/passwd')")
    assert isinstance(caught.value, Search2oError)
    assert str(caught.value) == (
        "expression { open('/etc/passwd') }: NameError: name 'open' is not defined"
    )


@pytest.mark.parametrize(
    "source",
    [
        "words.append('x')",
        "words.sort()",
        "d.update({'k': 4})",
        "d.pop('k')",
        "d.setdefault('z', 1)",
        "set(words).add('x')",
        "result[0].clear()",
    ],
)
def test_mutating_methods_are_refused_and_the_callers_values_stay_unchanged(source: str) -> None:
    values = names()
    reason = refused(source, values)
    assert "values are read-only in expressions; build a new one instead" in reason
    assert values["words"] == ["b", "a", "c"] and values["d"] == {"k": 3}
    assert values["result"] == [{"text": "likes window seats"}, {"text": "flies KLM"}]


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("'{}'.format(1)", "str.format is not allowed"),
        ("'x'.translate({})", "str.translate is not allowed"),
        ("(5).to_bytes(10**9, 'big')", "int.to_bytes is not allowed"),
        ("len.x", "attributes of builtin_function_or_method values are not available"),
        ("words.nope", "AttributeError: 'list' object has no attribute 'nope'"),
    ],
)
def test_other_attributes_are_refused(source: str, reason: str) -> None:
    assert reason in refused(source)


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("1 / 0", "ZeroDivisionError: division by zero"),
        ("d['x']", "KeyError: 'x'"),
        ("1 + 'a'", "TypeError: unsupported operand type(s) for +: 'int' and 'str'"),
        ("words[10]", "IndexError: list index out of range"),
        ("int('x')", "ValueError: invalid literal for int() with base 10: 'x'"),
        ("(1).nope", "AttributeError: 'int' object has no attribute 'nope'"),
        ("(lambda f: f(f))(lambda f: f(f))", "RecursionError: maximum recursion depth exceeded"),
        ("undefined_name", "NameError: name 'undefined_name' is not defined"),
    ],
)
def test_python_errors_become_expression_errors(source: str, reason: str) -> None:
    assert refused(source).startswith(reason)


def test_a_memory_error_becomes_an_expression_error() -> None:
    def exhaust() -> None:
        raise MemoryError

    assert refused("exhaust()", {"exhaust": exhaust}) == "MemoryError"


def test_a_huge_key_is_shortened_in_the_message() -> None:
    reason = refused("d[key]", {"d": {}, "key": "k" * 10_000})
    assert reason.startswith("KeyError: 'kkk") and len(reason) < 200


def test_functions_and_generators_are_not_results() -> None:
    assert "contains a function" in refused("lambda: 1")
    assert "contains an iterator" in refused("(w for w in words)")
    assert "contains an iterator" in refused("[(w for w in words)]")


# -- bounds on work and memory -----------------------------------------------------------------


@pytest.mark.parametrize(
    "source", ["10**10**10", "1 << 10**9", "(10**700) * (10**700)", "round(5, -10**9)"]
)
def test_huge_ints_are_refused_before_they_are_computed(source: str) -> None:
    reason = refused(source)
    assert "max_int_bits=4096" in reason or "out of range" in reason


def test_ints_up_to_the_limit_are_computed() -> None:
    assert evaluate("2 ** 4000 > 0") is True
    assert refused("2 ** 5000").startswith("the number would have about 5000 bits")


@pytest.mark.parametrize(
    "source",
    [
        "'x' * 10**10",
        "[0] * 10**9",
        "'ab' * 10**7",
        "10**9 * (1,)",
        "'x' * 60000 + 'y' * 60000",
        "'x'.ljust(10**9)",
        "'x'.rjust(10**9)",
        "'x'.center(10**9)",
        "'x'.zfill(10**9)",
        "'a\\tb'.expandtabs(10**9)",
        "b'x'.ljust(10**9)",
        "big.replace('x', big)",
        "''.join([big] * 50000)",
    ],
)
def test_big_strings_and_lists_are_refused_before_they_are_built(source: str) -> None:
    reason = refused(source, {"big": "x" * 50_000})
    assert "max_result_chars=100000" in reason or "too many steps" in reason


@pytest.mark.parametrize(
    "source",
    [
        "f'{1:>{10**9}}'",
        "f'{1.5:.1000000000f}'",
        "f'{airline:0>1000000000}'",
        "'%1000000000d' % 1",
        "'%.1000000000f' % 1.5",
        "'%*d' % (10**9, 1)",
        "b'%1000000000d' % 1",
    ],
)
def test_huge_format_widths_are_refused(source: str) -> None:
    reason = refused(source)
    assert "format width or precision" in reason and "max_result_chars=100000" in reason


@pytest.mark.parametrize("source", ["'{:>1000000000}'.format(1)", "format(1, '>1000000000')"])
def test_format_with_a_huge_width_is_refused(source: str) -> None:
    refused(source)


@pytest.mark.parametrize(
    "source",
    [
        "str([big] * 50000)",
        "f'{[big] * 50000}'",
        "'%s' % ([big] * 50000,)",
        "f'{[big] * 50000!r}'",
    ],
)
def test_text_of_a_container_with_many_references_is_refused_before_rendering(
    source: str,
) -> None:
    reason = refused(source, {"big": "x" * 50_000})
    assert "into text would take more than max_result_chars=100000" in reason


@pytest.mark.parametrize(
    "source",
    [
        "[x for x in range(10**9)]",
        "[1 for a in range(10**4) for b in range(10**4)]",
        "sum(1 for a in range(60000) for b in range(2))",
        "[list(big) for a in range(1000)]",
        "[[*big] for a in range(1000)]",
        "[big[:] for a in range(1000)]",
        "[sorted(big) for a in range(1000)]",
        "[x in big for x in range(1000)]",
        "[s | s for a in range(1000)]",
        "(lambda f: f(f, 40))(lambda f, n: n and (f(f, n - 1), f(f, n - 1)))",
    ],
)
def test_loops_and_copies_run_out_of_steps(source: str) -> None:
    values = {"big": [0] * 50_000, "s": set(range(50_000))}
    assert refused(source, values).startswith("too many steps")


def test_steps_follow_the_limit() -> None:
    assert evaluate("len([x for x in range(900)])", max_steps=1000) == 900
    assert refused("len([x for x in range(1100)])", max_steps=1000).startswith("too many steps")


def test_the_wall_clock_stops_a_long_evaluation() -> None:
    reason = refused(
        "[1 for a in range(3000) for b in range(3000)]", max_steps=10**8, max_seconds=0.05
    )
    assert reason == "took longer than max_seconds=0.05 s"


def test_sum_adds_numbers_only() -> None:
    assert "sum() adds numbers only" in refused("sum([[1]] * 10, [])")


def test_a_result_larger_than_the_limit_is_refused_and_names_the_size() -> None:
    reason = refused("big", {"big": "x" * 200_000})
    assert reason == "the result has 200000 characters, more than max_result_chars=100000"
    reason = refused("['x' * 100 for i in range(20)]", max_result_chars=1000)
    assert reason == "the result is more than max_result_chars=1000 characters as JSON"
    assert len(str(evaluate("['x' * 100 for i in range(5)]", max_result_chars=1000))) > 500


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_steps must be positive"):
        SandboxLimits(max_steps=0)


# -- concurrency -------------------------------------------------------------------------------


def test_threads_evaluate_independently_with_their_own_budgets() -> None:
    # Each thread sums n numbers: 2n steps (range consumed by the comprehension, then by sum).
    # With max_steps=9_000, threads with n <= 4000 succeed and the others run out of steps,
    # whatever the others are doing at the same time.
    expression = compile_expression("sum([x * k for x in range(n)])")
    limits = SandboxLimits(max_steps=9_000)
    barrier = threading.Barrier(8)
    outcomes: dict[int, list[object]] = {}

    def work(k: int) -> None:
        n = 1000 * k
        barrier.wait()
        results: list[object] = []
        for _ in range(20):
            try:
                results.append(expression.evaluate({"k": k, "n": n}, limits))
            except ExpressionError as exc:
                results.append(exc.reason.split(":")[0])
        outcomes[k] = results

    threads = [threading.Thread(target=work, args=(k,)) for k in range(1, 9)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for k in range(1, 9):
        n = 1000 * k
        expected = k * n * (n - 1) // 2 if k <= 4 else "too many steps"
        assert outcomes[k] == [expected] * 20, k
