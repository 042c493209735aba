"""The walk of one run through the code: which modules it enters, and how often it goes back to one it left.

Runs a scenario natively in this process (`run-scenario FILE --backend native --repeat 1 --no-plots`) and,
for each run, follows the main thread from the start of runners.pipeline.one_run.one_run to its return
with sys.setprofile: every call into a module of runners/, topologies/ or scenarios/ (the standard
library, Mininet and other packages are passed through; other threads, such as the samplers', are not
followed; a comprehension, a lambda or a property read is not a call of its own). The calls' modules, in
order, with repeats in a row collapsed, are the walk. A *return* is a call into a module the walk had
entered before and then left; one_run's own helpers count, as in issue 29's count (read at bfb330e, from
NativeRunner._one_run: 14 modules, 12 returns).

Each walk is given at two depths: `calls of one_run` (one_run's own calls in order, as one reads it) and
`every depth` (all calls under it: a step's own helpers and what they call). Nothing is asserted.

Usage: python -m bench.module_walk [FILE] [--backend auto|native|vm] [--out DIR]
(FILE: the default scenario, scenarios/two-paths.yaml). As root on a kernel with netem, or --backend vm:
one micro-VM boot runs it inside. Writes DIR/<UTC stamp>/module-walk.json (DIR: bench/out).
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # run as a script too

from runners.paths import REPO  # noqa: E402
from runners.results.store import atomic_write, utc_stamp  # noqa: E402

PROJECT = ("runners.", "topologies.", "scenarios.")


def accessors() -> set:
    """The code of every property of the project's classes imported so far (`job.run_id`, `ctx.plan`):
    reading an attribute is not a step of the walk."""
    import functools

    codes = set()
    for name, module in list(sys.modules.items()):
        if not name.startswith(PROJECT):
            continue
        for cls in [v for v in vars(module).values() if isinstance(v, type) and v.__module__ == name]:
            for attr in vars(cls).values():
                fn = attr.fget if isinstance(attr, property) else getattr(attr, "func", None) \
                    if isinstance(attr, functools.cached_property) else None
                if fn is not None and hasattr(fn, "__code__"):
                    codes.add(fn.__code__)
    return codes


class Walk:
    """The profile hook: (module, depth) of every call into the project's modules, depth counted in the
    project's frames under one_run (one_run itself: 0). A comprehension's or a lambda's frame is its
    caller's body, and a property's is an attribute read: neither is a call of the walk."""

    def __init__(self):
        self.calls: list[tuple[str, int, str]] = []   # (module, depth, function)
        self.stack: list[bool] = []    # per Python frame under the hook: is it a call of the walk
        self.skip = accessors()

    def __call__(self, frame, event, arg) -> None:
        if event == "call":
            code = frame.f_code
            ours = (frame.f_globals.get("__name__", "").startswith(PROJECT) and not code.co_name.startswith("<")
                    and code not in self.skip)
            if ours:
                self.calls.append((frame.f_globals["__name__"], sum(self.stack), code.co_qualname))
            self.stack.append(ours)
        elif event == "return" and self.stack:
            self.stack.pop()


def summarise(calls: list[tuple[str, int, str]], depth: int | None) -> dict:
    """The walk down to `depth` (None: every depth): its modules in order, how many, and the returns (with
    the function each return entered by)."""
    walk: list[str] = []
    entered_by: list[str] = []
    for module, d, function in calls:
        if (depth is None or d <= depth) and (not walk or walk[-1] != module):
            walk.append(module)
            entered_by.append(f"{module}.{function}")
    returns: dict[str, int] = {}
    for i, module in enumerate(walk):
        if module in walk[:i]:
            returns[module] = returns.get(module, 0) + 1
    return {"walk": walk, "modules": len(set(walk)), "returns": sum(returns.values()),
            "returns_by_module": dict(sorted(returns.items(), key=lambda kv: -kv[1])),
            "returns_by": [f for i, (m, f) in enumerate(zip(walk, entered_by)) if m in walk[:i]]}


def walk_runs(scenario: Path, out: Path) -> list[dict]:
    """Run the scenario natively in this process, each run under the hook; one summary per run."""
    from runners import cli
    import runners.pipeline.runner as runner_module

    real, runs = runner_module.one_run, []

    def one_run_walked(ctx, job):
        walk = Walk()
        sys.setprofile(walk)
        try:
            return real(ctx, job)
        finally:
            sys.setprofile(None)
            runs.append({"run": job.run_id, "mode": job.mode, "calls": len(walk.calls),
                         "calls_of_one_run": summarise(walk.calls, 1), "every_depth": summarise(walk.calls, None)})
    runner_module.one_run = one_run_walked
    try:
        code = cli.main([str(scenario), "--backend", "native", "--repeat", "1", "--no-plots", "--out", str(out / "runs")])
    finally:
        runner_module.one_run = real
    if code != 0:
        raise RuntimeError(f"the run of {scenario} exited {code}")
    return runs


def report(doc: dict) -> str:
    lines = [f"module walk of {doc['scenario']}, {doc['date_utc']}, kernel {doc['kernel']}, backend {doc['backend']}"]
    for run in doc["runs"]:
        for name, label in (("calls_of_one_run", "calls of one_run"), ("every_depth", "every depth")):
            w = run[name]
            lines.append(f"run {run['run']} ({run['mode']}), {label}: {w['modules']} modules, {w['returns']} returns"
                         + (f" ({', '.join(f'{m} {n}' for m, n in w['returns_by_module'].items())})"
                            if w["returns"] else ""))
            if name == "calls_of_one_run":
                lines.append("  walk: " + " -> ".join(m.removeprefix("runners.") for m in w["walk"]))
                lines.append("  returns by: " + ", ".join(f.removeprefix("runners.") for f in w["returns_by"]))
    return "\n".join(lines)


def in_vm(args, out: Path) -> int:
    """One micro-VM boot runs this script natively inside, into `out` (shared with the guest)."""
    from runners.backends.vm.boot import plan_vm, run_in_vm

    plan = plan_vm([sys.executable, "-m", "bench.module_walk", str(args.scenario), "--backend", "native",
                    "--dir", str(out)], [out])
    code = run_in_vm(plan)
    doc_path = out / "module-walk.json"
    if doc_path.exists():
        doc = json.loads(doc_path.read_text())
        doc["backend"] = f"vm ({'KVM' if plan.kvm else 'TCG'}, {plan.cpus} CPUs, kernel {plan.kernel.name})"
        atomic_write(doc_path, json.dumps(doc, indent=1) + "\n")
        print(report(doc))
    return code


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenario", nargs="?", type=Path, default=REPO / "scenarios" / "two-paths.yaml")
    ap.add_argument("--backend", choices=["auto", "native", "vm"], default="auto")
    ap.add_argument("--out", default=str(REPO / "bench" / "out"))
    ap.add_argument("--dir", help=argparse.SUPPRESS)  # internal: exact output folder (VM guest side)
    args = ap.parse_args()
    args.scenario = args.scenario.resolve()
    from runners.backends.choice import choose_backend
    from scenarios.spec.loader import load_scenario

    out = Path(args.dir) if args.dir else Path(args.out).resolve() / utc_stamp()
    out.mkdir(parents=True, exist_ok=True)
    choice = choose_backend(args.backend, [load_scenario(args.scenario)])
    if choice.refusal:
        print(choice.refusal, file=sys.stderr)
        return 1
    if choice.name == "vm":
        return in_vm(args, out)
    doc = {"scenario": str(args.scenario.relative_to(REPO) if args.scenario.is_relative_to(REPO) else args.scenario),
           "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "kernel": platform.release(),
           "backend": "native", "runs": walk_runs(args.scenario, out)}
    atomic_write(out / "module-walk.json", json.dumps(doc, indent=1) + "\n")
    print(report(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
