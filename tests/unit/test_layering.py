"""The architecture's rules, read from the source: no import cycles (a package's __init__ counts as a
module), imports only down the rooms' stack and along the data flow, and size limits."""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("scenarios", "topologies", "runners", "controller", "bench")
MAX_CLASS_LINES, MAX_FUNCTION_LINES, MAX_MODULE_LINES = 250, 80, 600

# runners/'s rooms, top to bottom: each may import the rooms below it (and its own modules).
STACK = ("runners.cli", "runners.backends", "runners.runset", "runners.pipeline", "runners.collect",
         "runners.traffic", "runners.linux")
EVERYWHERE = ("runners.errors", "runners.paths", "runners.console")   # importable by every room but linux
MODEL = ("scenarios", "topologies", "controller")
BESIDE = {
    # the stack writes and reads results; analysis reads them; the console shows them
    "runners.results": ("runners.errors", "runners.paths", "scenarios"),
    "runners.analysis": ("runners.results", "runners.console", "runners.errors", "scenarios"),
    "runners.console": ("runners.errors", "runners.results.derived", "runners.linux"),
    "runners.errors": (),
    "runners.paths": (),
}
# Who may import whom (prefixes); a module's own room is always allowed.
ALLOWED = {
    "scenarios": (),
    "topologies": ("scenarios",),
    "controller": (),
    **BESIDE,
    **{room: STACK[i + 1:] + EVERYWHERE + MODEL + ("runners.results",)
       + (("runners.analysis",) if i < STACK.index("runners.pipeline") else ())
       for i, room in enumerate(STACK[:-1])},
    "runners.linux": ("runners.errors",),
}
# Programs, not library modules: the warm VM's guest runs the CLI's main() in each fork.
ENTRY_POINTS = {("runners.backends.vm.warm_guest", "runners.cli"), ("runners.backends.vm.warm_guest", "runners.cli.run")}


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (REPO / pkg).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


def _type_checking_only(tree: ast.AST) -> set[int]:
    """Ids of the imports under `if TYPE_CHECKING:`: annotations only, never run."""
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            skip |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return skip


def imports_of(name: str, path: Path, known: set[str], source: str | None = None) -> set[str]:
    """Project modules imported anywhere in the file (also inside functions: a deferred import is an edge).
    `from package import module` is an edge to the package too: importing it runs its __init__."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    tree = ast.parse(path.read_text() if source is None else source)
    skip = _type_checking_only(tree)
    found = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
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
    """Package-to-submodule edges count: a package whose __init__ imports a module that imports the
    package back is a cycle (the order of imports decides whether it works)."""
    assert cycles(graph()) == []


def test_imports_follow_the_rooms_and_the_data_flow():
    wrong = []
    for mod, deps in graph().items():
        rule = next((r for r in _package_parents(mod) if r in ALLOWED), None)
        if rule is None:
            continue
        for dep in deps:
            own = dep == rule or dep.startswith(rule + ".")
            allowed = any(dep == a or dep.startswith(a + ".") for a in ALLOWED[rule])
            if not own and not allowed and (mod, dep) not in ENTRY_POINTS:
                wrong.append(f"{mod} imports {dep}")
    assert wrong == []


def test_every_runners_module_is_in_a_room():
    """A new top-level module or room would escape the rules above: it gets a line in them first."""
    rooms = set(STACK) | set(BESIDE) | {"runners.analysis"}
    homeless = [m for m in modules() if m.startswith("runners.") and not any(
        m == r or m.startswith(r + ".") for r in rooms)]
    assert homeless == []


def test_runners_top_level_holds_three_files():
    assert sorted(p.name for p in (REPO / "runners").glob("*.py")) == ["__init__.py", "errors.py", "paths.py"]


def test_each_room_says_what_it_does_and_may_import():
    for init in sorted((REPO / "runners").rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and "import" in doc.lower(), f"{init.relative_to(REPO)}: a docstring saying what the room may import"


def test_the_rules_see_real_imports():
    """The checker itself: it must find the edges it is meant to police."""
    g = graph()
    assert "runners.results.store" in g["runners.analysis.report"]
    assert "scenarios.spec.model" in g["topologies.kinds"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    known = {"runners.backends", "runners.backends.probe", "runners.backends.kernel_features"}
    probe = REPO / "runners" / "backends" / "probe.py"
    assert imports_of("runners.backends.probe", probe, known, "from . import kernel_features\n") == {
        "runners.backends", "runners.backends.kernel_features"}
    assert imports_of("runners.backends.probe", probe, known,
                      "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import kernel_features\n") == set()
    assert "runners.pipeline" in ALLOWED["runners.backends"] and "runners.cli" not in ALLOWED["runners.pipeline"]


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


def test_no_module_over_600_lines():
    too_long = [f"{name}: {n} lines" for name, path in modules().items()
                if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES]
    assert too_long == []


def test_every_topology_kind_has_a_planner():
    from scenarios.spec.model import TOPOLOGY_KINDS
    from topologies.kinds import PLANNERS

    assert set(PLANNERS) == set(TOPOLOGY_KINDS)


def test_a_topology_kind_is_a_model_module_and_a_planner_module_of_one_name():
    """The mirrored pair: kind `dual-homed` is scenarios/spec/model/topology/dual_homed.py (its model
    class) and topologies/dual_homed.py (its planner)."""
    from scenarios.spec.model import TOPOLOGY_CLASSES, TOPOLOGY_KINDS
    from topologies.kinds import PLANNERS

    apart = []
    for cls, kind in zip(TOPOLOGY_CLASSES, TOPOLOGY_KINDS):
        module = kind.replace("-", "_")
        if cls.__module__ != f"scenarios.spec.model.topology.{module}":
            apart.append(f"{kind}: model class {cls.__name__} in {cls.__module__}")
        if PLANNERS[kind].__module__ != f"topologies.{module}":
            apart.append(f"{kind}: planner {PLANNERS[kind].__name__} in {PLANNERS[kind].__module__}")
    assert apart == []
