"""The sandbox charges C-level work that recurses into shared structures or floods a hash.

``[x] * 10`` costs 10 steps to build but holds ``x`` ten times: ten levels of it are 10**10
nodes that one comparison, hash or sort would walk in a single C call (14.5 s measured before
the guards charged it). Each hostile expression here must be refused with an
:class:`ExpressionError`, quickly; the bound is loose because the machine is shared, the point
is that it is refused rather than run.
"""

from __future__ import annotations

import time

import pytest

from search2o.agents.expressions import ExpressionError, compile_expression

# Refused before the work: the real figure is a few milliseconds.
FAST = 2.0


def nested_list(levels: int) -> str:
    """``[[0]*10]*10`` ... ``levels`` deep: 10**levels nodes for 10 * levels steps."""
    text = "[0]*10"
    for _ in range(levels - 1):
        text = f"[{text}]*10"
    return text


def nested_tuple(levels: int) -> str:
    text = "(0,)*10"
    for _ in range(levels - 1):
        text = f"({text},)*10"
    return text


L = nested_list(10)
T = nested_tuple(10)
# Two separately built equal structures: no identity shortcut in the comparison.
HOSTILE = {
    "list equality": f"{L} == {L}",
    "list inequality": f"{L} != {L}",
    "tuple order": f"{T} < {T}",
    "wrapped order": f"[{T}] < [{T}]",
    "set display": f"{{{T}}}",
    "dict display": f"{{{T}: 1}}",
    "set comprehension": f"{{{T} for i in range(1)}}",
    "dict comprehension": f"{{{T}: i for i in range(1)}}",
    "set()": f"set([{T}])",
    "dict()": f"dict([({T}, 1)])",
    "in a set": f"{T} in {{1}}",
    "in a dict": f"{T} in {{'a': 1}}",
    "in a list": f"{T} in [{T}]",
    "not in a list": f"{T} not in [{T}]",
    "dict.get": f"{{}}.get({T})",
    "dict index": f"{{'a': 1}}[{T}]",
    "sorted": f"sorted([{T}, {T}])",
    "sorted by key": f"sorted([0, 1], key=lambda i: {L})",
    "min": f"min({L}, {L})",
    "max": f"max([{L}, {L}])",
    "list.count": f"[{L}].count({L})",
    "tuple.index": f"({T},).index({T})",
    "set union": f"{{1}}.union([{T}])",
    "set operator": f"{{1}}.union([1]) | {{{T}}}",
    "chained comparison": f"0 < 1 < 2 and {L} == {L} == {L}",
    "keys spread": f"{{*[{T}]}}",
    # distinct ints with one hash value: CPython does not randomise int hashes
    "int hash flood": "len(set([k * 2305843009213693951 for k in range(40000)]))",
    "int hash flood comprehension": "len({k * 2305843009213693951 for k in range(40000)})",
    "tuple hash flood": ("len({tuple(-1 - (k >> i & 1) for i in range(14)) for k in range(5000)})"),
}


@pytest.mark.parametrize("source", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_c_level_work_is_refused_quickly(source: str) -> None:
    start = time.perf_counter()
    with pytest.raises(ExpressionError) as caught:
        compile_expression(source).evaluate({})
    assert time.perf_counter() - start < FAST, f"{source} took too long to be refused"
    reason = caught.value.reason
    bounds = ("too many steps", "hash flooding", "into text would take more than")
    assert any(bound in reason for bound in bounds), reason


ORDINARY = [
    ("[1, 2, [3]] == [1, 2, [3]]", True),
    ("(1, 2) < (1, 3) <= (1, 3)", True),
    ("{'a', 'b'} == set('ab')", True),
    ("sorted([3.5, 1, 2])", [1, 2, 3.5]),
    ("sorted([[2, 'b'], [1, 'a']])", [[1, "a"], [2, "b"]]),
    ("sorted(['b', 'a'], key=lambda w: [len(w), w], reverse=True)", ["b", "a"]),
    ("max([[1, 2], [1, 3]])", [1, 3]),
    ("min([[1, 2], [1, 3]], key=lambda p: p[1])", [1, 2]),
    ("3 in [1, 2, 3] and 'b' in 'abc' and (1, 2) in {(1, 2)} and [1] in [[0], [1]]", True),
    ("[1] not in [[0]] and 'k' in {'k': 1} and (1, 2) in {(1, 2): 0}.keys()", True),
    ("{(i, i): i for i in range(3)}[(2, 2)]", 2),
    ("len({-1, -2, 1, 1.0, True, (1, -1), (1, -2)})", 5),
    ("[[0]].count([0]) + [[0], [1]].index([1])", 2),
    ("dict([('a', 1), ['b', 2]]) == {'a': 1, 'b': 2}", True),
    ("{1, 2} | {2, 3} == {1, 2, 3} and {'k': 1}.keys() & ['k'] == {'k'}", True),
    ("1 < 2 > 0 != 3 is not None", True),
]


@pytest.mark.parametrize(("source", "expected"), ORDINARY)
def test_ordinary_comparisons_hashes_and_sorts_keep_working(source: str, expected: object) -> None:
    assert compile_expression(source).evaluate({}) == expected


def test_a_chained_comparison_evaluates_each_operand_once_and_stops_early() -> None:
    calls: list[int] = []

    def seen(n: int) -> int:
        calls.append(n)
        return n

    assert compile_expression("seen(1) < seen(2) < seen(0) < seen(9)").evaluate({"seen": seen}) is (
        False
    )
    assert calls == [1, 2, 0]  # 9 is never evaluated, 2 only once


def test_ordinary_comparisons_cost_little() -> None:
    # 1000 comparisons of small lists and lookups of short strings fit a budget of 20,000.
    source = "len([i for i in range(1000) if [i, 'x'] == [i, 'x'] and 'k' in d])"
    expression = compile_expression(source)
    from search2o.agents.expressions import SandboxLimits

    assert expression.evaluate({"d": {"k": 1}}, SandboxLimits(max_steps=20_000)) == 1000


def test_a_big_shared_structure_is_measured_once_per_evaluation() -> None:
    # 8 levels: 10**8 nodes; comparing it to a small value costs only the small side.
    source = f"{nested_list(8)} == [0] or len({nested_list(8)}) == 10"
    assert compile_expression(source).evaluate({}) is True
