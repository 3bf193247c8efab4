"""The process-wide ``random`` state is the embedder's: nothing in ``src`` draws from it.

A server thread that moves ``random``'s global state under a property-based test makes
Hypothesis fail the test ("Do not use the random module inside strategies"), and it would
break any seeded simulation that embeds us. Jitter (job retries, connector backoff) draws from
each module's own ``random.Random()``. Checked two ways: the source never calls a
module-level ``random`` function, and the two jitter paths leave the global state untouched.
"""

from __future__ import annotations

import ast
import random
from pathlib import Path

from search2o.connectors.contract import TransientSourceError
from search2o.connectors.politeness import Polite
from search2o.jobs.ledger import backoff_delay

SRC = Path(__file__).resolve().parents[1] / "src" / "search2o"
ALLOWED = {"Random", "SystemRandom"}


def _global_draws(tree: ast.AST) -> list[str]:
    """Uses of the ``random`` module other than building a generator, as ``line: text``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "random":
            names = {alias.name for alias in node.names}
            if names - ALLOWED:
                found.append(f"{node.lineno}: from random import {sorted(names - ALLOWED)}")
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "random"
            and node.attr not in ALLOWED
        ):
            found.append(f"{node.lineno}: random.{node.attr}")
        if isinstance(node, ast.BoolOp):  # ``rng or random`` hands out the module itself
            for value in node.values:
                if isinstance(value, ast.Name) and value.id == "random":
                    found.append(f"{node.lineno}: ... or random")
    return found


def test_no_module_of_src_draws_from_the_global_random_state() -> None:
    offenders = {
        str(path.relative_to(SRC)): hits
        for path in sorted(SRC.rglob("*.py"))
        if (hits := _global_draws(ast.parse(path.read_text(encoding="utf-8"))))
    }
    assert offenders == {}


def test_the_checker_finds_each_kind_of_global_draw() -> None:
    source = "import random\nfrom random import uniform\nrandom.choice([1])\nx = rng or random\n"
    assert len(_global_draws(ast.parse(source))) == 3
    assert _global_draws(ast.parse("import random\nR = random.Random()\n")) == []


def test_job_retry_jitter_leaves_the_global_state_alone() -> None:
    before = random.getstate()
    delays = [backoff_delay(attempt, 1.0, 30.0) for attempt in range(1, 20)]
    assert random.getstate() == before
    assert all(0.5 <= d <= 30.0 for d in delays)


def test_connector_backoff_jitter_leaves_the_global_state_alone() -> None:
    waits: list[float] = []
    polite = Polite(requests_per_s=1000.0, retries=3, max_inline_wait_s=60.0, sleep=waits.append)
    calls = 0

    def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls < 4:
            raise TransientSourceError("reset")
        return "ok"

    before = random.getstate()
    assert polite.call(flaky) == "ok"
    assert random.getstate() == before
    assert len(waits) >= 3 and all(0 <= w <= 30 for w in waits)
