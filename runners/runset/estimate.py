"""What a run set would do and how long it would take, before anything starts (`--dry-run`, `list`).

Pure: the job table comes from the same planner the runner uses (runners.runset.jobs), and the time from
per-phase costs: the ones a finished set of the same scenario measured (its metadata.json), else
defaults measured on this project's CI machine kind (TCG micro-VM, 2026-11-25; docs/benchmark.md).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from runners.pipeline.job import topology_signature
from runners.runset.jobs import plan_jobs, runs_in
from runners.runset.session import RUN_OVERHEAD_S, job_seconds


@dataclass(frozen=True)
class Costs:
    """Seconds, per phase, of one run set on one backend."""
    start: float          # the interpreter, the probe and, for the VM, its boot and power-off
    build: float          # one network: build, shaping and teardown
    run_overhead: float   # a run beyond its traffic and pause: endpoints, pings, counters, records
    report: float
    source: str

    def describe(self) -> str:
        return (f"start {self.start:.0f} s, {self.build:.0f} s per network, {self.run_overhead:.1f} s per run "
                f"beyond its traffic, report {self.report:.0f} s ({self.source})")


# The default scenario's phases, measured in the TCG micro-VM (README "How long the first run takes",
# 2026-11-25): boot 9.1 s + the guest's Python 5.0 s + prepare 2.3-2.5 s; build 1.2-1.6 s + shaping
# 0.8-1.0 s + teardown 0.2 s; 1.3-1.7 s per run; report 0.3 s. A warm VM: hand-over 0.8 s + 0.4 s
# prepare. Natively there is no emulation: the native row is an estimate (these, at most), until a set
# of the scenario has run. Larger networks (routers, switches) take longer to build.
DEFAULTS = {
    "vm": Costs(start=16.6, build=2.6, run_overhead=1.7, report=0.3, source="defaults measured in the TCG VM"),
    "warm vm": Costs(start=1.2, build=2.7, run_overhead=1.7, report=0.3, source="defaults measured in the TCG VM"),
    "native": Costs(start=2.0, build=2.6, run_overhead=1.7, report=0.3, source="defaults (estimated)"),
}


def measured_costs(metadata: dict, where: str) -> Costs | None:
    """The costs a finished set recorded (metadata.json's phases), or None when it holds too little."""
    phases = metadata.get("phases") or {}
    runs = [r for r in phases.get("runs", []) if "wall" in r and "traffic" in r]
    if not runs or "build" not in phases:
        return None
    start = sum(phases.get(k, 0.0) for k in ("python_start", "prepare", "vm_boot_and_exit", "warm_vm_job_overhead"))
    overhead = statistics.median(max(0.0, r["wall"] - r["traffic"]) for r in runs)
    backend = metadata.get("backend", "?")
    return Costs(start=start, build=phases["build"] + phases.get("shaping", 0.0) + phases.get("teardown", 0.0), run_overhead=overhead,
                 report=phases.get("report", 4.0),
                 source=f"measured by {where} ({backend}, {str(metadata.get('finished_utc', '?'))[:10]})")


@dataclass(frozen=True)
class Row:
    point: str
    label: str
    modes: str
    primaries: str
    repeats: int
    runs: int
    seconds: float


def job_table(exp, repeat: int | None, costs: Costs) -> tuple[list[Row], int, float]:
    """(one row per point, the number of networks built, the estimated wall seconds)."""
    repeats = repeat or exp.scenario.runs.repeat
    jobs = plan_jobs(exp.points, range(1, repeats + 1), 0, len(exp.points) > 1)
    rows = []
    for pt in exp.points:
        mine = [j for j in jobs if j.point.id == pt.id]
        rows.append(Row(point=pt.id, label=pt.label, modes=", ".join(pt.scenario.runs.compare),
                        primaries=", ".join(sorted({p for j in mine for p in j.paths})), repeats=repeats,
                        runs=runs_in(mine),
                        seconds=sum(job_seconds(j) - RUN_OVERHEAD_S + costs.run_overhead for j in mine)))
    # each kernel of a kernel sweep is a boot of its own, and builds its own networks
    networks = len({(p.kernel, topology_signature(p)) for p in exp.points})
    kernels = len({p.kernel for p in exp.points})
    total = kernels * costs.start + networks * costs.build + sum(r.seconds for r in rows) + costs.report
    return rows, networks, total


def render_table(exp, repeat: int | None, costs: Costs, backend: str) -> str:
    rows, networks, total = job_table(exp, repeat, costs)
    head = ("point", "label", "modes", "primaries", "repeat", "runs", "time")
    body = [(r.point, r.label, r.modes, r.primaries, str(r.repeats), str(r.runs), duration(r.seconds)) for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in (head, *body)]
    runs = sum(r.runs for r in rows)
    kernels = sorted({p.kernel for p in exp.points if p.kernel})
    on = f" and {len(kernels)} kernels ({', '.join(kernels)}: a boot each)" if kernels else ""
    lines += ["", f"{runs} runs on {networks} network(s){on}, about {duration(total)} on the {backend} backend",
              f"costs: {costs.describe()}"]
    return "\n".join(lines)


def duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 2 * 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds / 3600:.1f} h"
