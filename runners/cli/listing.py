"""`run-scenario list [DIR]`: every scenario in DIR with its runs, time and description."""
from __future__ import annotations

import argparse
from pathlib import Path

from runners.backends import BACKENDS
from runners.cli.common import costs_for, estimate_backend
from runners.console.output import err
from runners.errors import EXIT_INPUT, EXIT_OK
from runners.paths import REPO, RESULTS


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run-scenario list", description="One line per scenario file in DIR: name, "
                                "number of runs, estimated time on the backend `auto` would choose, description.")
    p.add_argument("dir", nargs="?", default=str(REPO / "scenarios"), metavar="DIR")
    p.add_argument("--backend", choices=["auto", *BACKENDS], default="auto")
    return p


def main(argv: list[str]) -> int:
    from scenarios.spec.loader import ScenarioError, load_experiment
    from runners.runset.estimate import duration, job_table

    p = build_parser()
    a = p.parse_args(argv)
    files = sorted(Path(a.dir).glob("*.yaml")) + sorted(Path(a.dir).glob("*.yml"))
    if not Path(a.dir).is_dir() or not files:
        err(f"{a.dir}: no scenario files (*.yaml) there")
        return EXIT_INPUT
    rows, backend, bad = [], None, 0
    for f in files:
        try:
            exp = load_experiment(f)
        except ScenarioError as e:
            rows.append((f.name, "-", "-", "invalid: " + e.render().splitlines()[-1].strip()[:80]))
            bad += 1
            continue
        if backend is None:
            backend, _ = estimate_backend(a.backend, exp)
        jobs, _, seconds = job_table(exp, None, costs_for(exp, backend, RESULTS))
        desc = " ".join((exp.scenario.description or "").split())
        rows.append((f.name, str(sum(r.runs for r in jobs)), duration(seconds), desc[:70] + ("..." if len(desc) > 70 else "")))
    widths = [max(len(r[i]) for r in rows + [("file", "runs", "time", "")]) for i in range(3)]
    print("  ".join(h.ljust(w) for h, w in zip(("file", "runs", "time"), widths)) + "  description")
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r[:3], widths)) + "  " + r[3])
    print(f"times: estimated for the {backend or a.backend} backend (see --dry-run for one scenario's table)")
    return EXIT_INPUT if bad else EXIT_OK
