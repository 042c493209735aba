"""The architecture's rules, read from the source: no import cycles, imports only along the data flow
(scenario file -> model -> topology plan -> runner -> results -> analysis), and size limits."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("scenarios", "topologies", "runners", "controller", "bench")
MAX_CLASS_LINES, MAX_FUNCTION_LINES = 250, 80

# Who may import whom (prefixes); a module's own package is always allowed.
ALLOWED = {
    "scenarios": (),
    "topologies": ("scenarios",),
    "controller": (),
    "runners.analysis": ("scenarios", "runners.results", "runners.console", "runners.errors"),
    "runners.results.derived": (),
}


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (REPO / pkg).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Project modules imported anywhere in the file (also inside functions: a deferred import is an edge)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            targets = [mod] + [f"{mod}.{a.name}" for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports_of(name, path, set(mods)) for name, path in mods.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def _package_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(len(parts), 0, -1)]


def test_no_import_cycles():
    # a package's __init__ re-exporting its own modules is not a cycle worth failing on
    g = {m: {d for d in deps if not m.startswith(d + ".") and not d.startswith(m + ".")} for m, deps in graph().items()}
    assert cycles(g) == []


def test_imports_follow_the_data_flow():
    wrong = []
    for mod, deps in graph().items():
        rule = next((r for r in _package_parents(mod) if r in ALLOWED), None)
        if rule is None:
            continue
        for dep in deps:
            own = dep == rule or dep.startswith(rule + ".")
            if not own and not any(dep == a or dep.startswith(a + ".") for a in ALLOWED[rule]):
                wrong.append(f"{mod} imports {dep}")
    assert wrong == []


def test_the_rules_see_real_imports():
    """The checker itself: it must find the edges it is meant to police."""
    g = graph()
    assert "runners.results.store" in g["runners.analysis.report"]
    assert "scenarios.spec.model" in g["topologies.kinds"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def sizes() -> list[tuple[str, str, int]]:
    out = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                kind = "class" if isinstance(node, ast.ClassDef) else "function"
                out.append((kind, f"{name}.{node.name}", node.end_lineno - node.lineno + 1))
    return out


def test_classes_and_functions_stay_short():
    too_long = [f"{kind} {name}: {n} lines" for kind, name, n in sizes()
                if n > (MAX_CLASS_LINES if kind == "class" else MAX_FUNCTION_LINES)]
    assert too_long == []


def test_every_topology_kind_has_a_planner():
    from scenarios.spec.model import TOPOLOGY_KINDS
    from topologies.kinds import PLANNERS

    assert set(PLANNERS) == set(TOPOLOGY_KINDS)
