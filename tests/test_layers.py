"""The layering rule of docs/architecture.md, checked on the real import graph.

The graph is grimp's (the library import-linter is built on): every ``import`` in
``src/search2o``, including those inside functions and under ``TYPE_CHECKING``. Each check
is also run on a small graph that breaks it, so that it is seen to fail.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src" / "search2o"

CORE = ("agents", "crypto", "jobs", "knowledge", "memory", "query", "state", "storage")
EDGES = ("api", "cli", "client", "connectors", "surfaces")

MAX_LINES = 600
TOO_LONG_ON_PURPOSE: dict[str, str] = {}
"""Modules allowed past :data:`MAX_LINES`, each with its reason (module path → why)."""


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    """The import graph of the installed ``search2o`` (no cache: always this checkout's)."""
    return grimp.build_graph("search2o", cache_dir=None)


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Return the import cycles of ``graph``: its strongly connected components of 2+ modules.

    Tarjan's algorithm (R. Tarjan, "Depth-first search and linear graph algorithms", SIAM J.
    Comput. 1(2), 1972), iterative so that a deep graph does not hit the recursion limit.
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def violations(graph: grimp.ImportGraph) -> list[str]:
    """Return the imports that break the rule: core → edge, or client → api (any import)."""
    found = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            source, target = _package(importer), _package(imported)
            if (source in CORE and target in EDGES) or (source == "client" and target == "api"):
                found.append(f"{importer} -> {imported}")
    return found


def _graph_of(imports: Iterable[tuple[str, str]]) -> grimp.ImportGraph:
    made = grimp.ImportGraph()
    for importer, imported in imports:
        made.add_import(importer=importer, imported=imported)
    return made


def test_no_module_imports_itself_back(graph: grimp.ImportGraph) -> None:
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle_through_a_function_level_import() -> None:
    # The cycle the rule removed: runtime -> jobs.kinds -> surfaces.slack -> client -> runtime.
    chain = ["search2o.runtime", "search2o.jobs.kinds", "search2o.surfaces.slack"]
    chain += ["search2o.client.api", "search2o.runtime"]
    made = _graph_of([*itertools.pairwise(chain), ("search2o.a", "search2o.b")])
    assert cycles(made) == [sorted(chain[:-1])]


def test_the_core_never_imports_an_edge_and_the_client_never_the_server(
    graph: grimp.ImportGraph,
) -> None:
    assert violations(graph) == []
    assert "search2o.jobs.kinds" in graph.modules  # the graph is the real one


def test_the_rule_finds_a_core_module_that_imports_a_surface() -> None:
    made = _graph_of(
        [
            ("search2o.jobs.kinds", "search2o.surfaces.slack.surface"),
            ("search2o.client.api", "search2o.api.routers.runs"),
            ("search2o.api.app", "search2o.runtime"),  # an edge on the core: allowed
        ]
    )
    assert violations(made) == [
        "search2o.client.api -> search2o.api.routers.runs",
        "search2o.jobs.kinds -> search2o.surfaces.slack.surface",
    ]


def test_the_import_contracts_hold() -> None:
    linter = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run(
        [str(linter), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def long_modules(root: Path, allowed: dict[str, str]) -> list[str]:
    """Return the modules under ``root`` past :data:`MAX_LINES` lines and not ``allowed``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root.parent).as_posix()
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES and name not in allowed:
            found.append(f"{name}: {lines} lines")
    return found


def test_no_module_is_longer_than_one_reader_holds() -> None:
    assert long_modules(SOURCE, TOO_LONG_ON_PURPOSE) == []


def test_every_allowance_is_still_needed_and_says_why() -> None:
    for name, reason in TOO_LONG_ON_PURPOSE.items():
        path = SOURCE.parent / name
        assert len(path.read_text(encoding="utf-8").splitlines()) > MAX_LINES, name
        assert len(reason.split()) >= 5, name


def test_the_size_check_finds_a_long_module(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (package / "short.py").write_text("x = 1\n" * MAX_LINES)
    assert long_modules(package, {}) == [f"pkg/long.py: {MAX_LINES + 1} lines"]
    assert long_modules(package, {"pkg/long.py": "a reason"}) == []
