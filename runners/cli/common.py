"""What several subcommands share: one point of a scenario from FILE, --point, --variant and --primary
(shell, export), and the backend and per-phase costs a time estimate uses (--dry-run, list)."""
from __future__ import annotations

import sys
from pathlib import Path

from runners.results.metadata import read_metadata_file
from runners.runset.checks import as_if_from, check_plans, files_of, select_variants


def point_arguments(p) -> None:
    """FILE, --point, --variant and --primary: one point of a scenario (shell, export)."""
    p.add_argument("scenario", metavar="FILE")
    p.add_argument("--point", metavar="ID", help="which point of a sweep or variant (p001, p002...; default p001)")
    p.add_argument("--variant", action="append", metavar="NAME", help="as for a run")
    p.add_argument("--primary", metavar="PATH", help="the MPTCP primary path (default: the first)")


def load_one_point(p, a):
    """(experiment, point, primary) from point_arguments' values, or None after printing why not."""
    from scenarios.spec.loader import ScenarioError, load_experiment

    try:
        original = getattr(a, "scenario_file", None)
        exp = select_variants(as_if_from(load_experiment(a.scenario, files_from=files_of(original)), original),
                              a.variant)
        check_plans(exp)
    except ScenarioError as e:
        print(e.render(), file=sys.stderr)
        return None
    return (exp, *pick_point(p, exp, a.point, a.primary))


def pick_point(p, exp, point_id: str | None, primary: str | None):
    """The point and primary asked for (a usage error naming what there is)."""
    points = {pt.id: pt for pt in exp.points}
    point = points.get(point_id or exp.points[0].id)
    if point is None:
        p.error(f"--point {point_id}: this scenario's points are {', '.join(points)}")
    if primary is not None and primary not in point.scenario.primaries:
        p.error(f"--primary {primary}: this point's primary paths are {', '.join(point.scenario.primaries)}")
    return point, primary or point.scenario.primaries[0]


def estimate_backend(requested: str, exp) -> tuple[str, str | None]:
    """(the backend a run would use, with 'warm vm' when one is up; why auto chose the VM)."""
    from runners.backends.choice import choose_backend
    from runners.backends.vm import warm as warmvm

    choice = choose_backend(requested, [pt.scenario for pt in exp.points])
    if choice.name == "vm" and any(vm.health() is None for vm in warmvm.running()):
        return "warm vm", choice.auto_note
    return choice.name, choice.auto_note


def costs_for(exp, backend: str, out: Path):
    """The per-phase costs the newest finished set of this scenario measured on this backend, else defaults."""
    from runners.runset.estimate import DEFAULTS, measured_costs

    try:
        meta = read_metadata_file(out / exp.scenario.name / "latest")
    except (OSError, ValueError):
        meta = {}
    same = (meta.get("backend") == "native") == (backend == "native") and meta.get("status") == "ok"
    # a warm VM's first run paid its boot: it measured a run with a boot
    warm = bool((meta.get("vm") or {}).get("warm")) and not (meta.get("phases") or {}).get("vm_boot_and_exit")
    if same and (backend == "native" or warm == (backend == "warm vm")):
        costs = measured_costs(meta, f"results/{exp.scenario.name}/latest")
        if costs is not None:
            return costs
    return DEFAULTS[backend]
