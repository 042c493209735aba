"""What is checked before anything starts: the variants asked for, every point's plan, the user's own code
and a very long set (the user's consent), the result folders, and what a killed run left behind. Bad input
found here exits 2 with nothing started."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def select_variants(exp, names: list[str] | None):
    """Keep the points of the named variants; without names, of every variant not marked `optional`."""
    from scenarios.spec.loader import ScenarioError

    variants = {v.name: v for v in exp.scenario.variants}
    if names:
        unknown = [n for n in names if n not in variants]
        if unknown:
            known = ", ".join(variants) or "none"
            raise ScenarioError(exp.file, [f"--variant {n}: no such variant (variants: {known})" for n in unknown])
        keep = set(names)
    else:
        keep = {n for n, v in variants.items() if not v.optional}
    if variants:
        import dataclasses
        exp = dataclasses.replace(exp, points=[p for p in exp.points if p.params.get("variant") in keep])
        if not exp.points:
            raise ScenarioError(exp.file, ["variants: every variant is optional; choose one with --variant"])
    return exp


def as_if_from(exp, original: str | None):
    """A result set's copy of the scenario, read as the file it was copied from: files it names (a
    controller app) are relative to that file's folder, and messages name it. The VM's guest and
    --resume read the copy."""
    if not original:
        return exp
    import dataclasses
    return dataclasses.replace(exp, file=original)


def files_of(original: str | None) -> Path | None:
    """The folder the files a scenario names (traces) are read from, for a copy of `original`."""
    return Path(original).resolve().parent if original else None


def bad_folders(args) -> str | None:
    """--baseline and --out, checked before the probe or anything else starts (exit 2)."""
    if args.baseline and not (Path(args.baseline) / "results.json").is_file():
        return f"--baseline {args.baseline}: not a result set (no results.json)"
    if not args.run_dir:
        problem = _unwritable(Path(args.out))
        if problem:
            return f"--out {args.out}: {problem}"
    return None


def _unwritable(base: Path) -> str | None:
    """Why results could not be written under `base`, found without creating anything: the nearest
    folder that exists must be a writable folder (as root, on a filesystem mounted read-write)."""
    probe = base.resolve()
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        return f"{probe} is not a folder"
    try:   # root passes every permission check: only a real folder made and removed again tells
        os.rmdir(tempfile.mkdtemp(dir=probe, prefix=".write-check-"))
    except OSError as e:
        return f"cannot write in {probe} ({e.strerror or e})"
    return None


def after_a_killed_run(run_dir: Path, backend: str) -> str | None:
    """A result set without a status was SIGKILLed: `clean` first, as its --help says. What names the
    result folder is the killed run's own (its orphaned micro-VM, its cold boot's temporary folder) and
    is removed here, on either backend. Anything else left on this machine is listed (only the user can
    tell it from another run's): natively it would run alongside the resumed runs, so it stops the
    resume; a VM's guest has a network of its own, so there it is only reported."""
    from runners.results.metadata import read_metadata
    from runners.linux.leftovers import clean_after_a_killed_run, find_leftovers

    if read_metadata(run_dir).get("status") is not None:
        return None
    for line in clean_after_a_killed_run(run_dir):
        print(f"resume: removed what the killed run left: {line}", flush=True)
    left = find_leftovers() if os.geteuid() == 0 else []   # what clean finds: it needs root
    listed = "\n".join(f"  - {line}" for line in left)
    if left and backend == "native":
        return ("the killed run (or another) left these behind, and they would run alongside the resumed "
                f"runs:\n{listed}\nremove them with `run-scenario clean --yes`, then resume")
    if left:
        print(f"resume: also left behind on this machine (by another run, or one still going):\n{listed}\n"
              "resume: `run-scenario clean --yes` removes them when no run is going", flush=True)
    return None


def size_of(exp, repeat: int | None) -> str:
    from runners.runset.session import estimate

    runs, seconds = estimate(exp, repeat)
    points = f"{len(exp.points)} point{'s' if len(exp.points) > 1 else ''}"
    return f"{points}, {runs} run{'s' if runs > 1 else ''}, about {max(1, round(seconds / 60))} min"


def user_code(exp) -> list[str]:
    """Every command or code file the scenario would run as root, as the user should read it."""
    from controller.launch import user_app_path

    found: list[str] = []
    base = Path(exp.file).resolve().parent
    for pt in exp.points:
        t = pt.scenario.traffic
        if t.tool == "command":
            c = t.command
            for label, argvs in (("setup_client", c.setup_client), ("setup_server", c.setup_server),
                                 ("server", [c.server] if c.server else []), ("client", [c.client])):
                found += [f"traffic.command.{label}: {' '.join(a)}" for a in argvs]
        ctl = getattr(pt.scenario.topology, "controller", None)
        app = user_app_path(ctl.app, base) if ctl is not None else None
        if app is not None:
            found.append(f"topology.controller.app: the Python file {app.resolve()} (runs as the OpenFlow controller)")
    return list(dict.fromkeys(found))


def needs_consent(exp, args, quiet: bool = False) -> str | None:
    """What the user must first agree to: running its own code as root, or a very long run set. Every
    scenario field that names code or a command follows one rule: shown, run only with a flag, recorded."""
    from runners.runset.session import too_long

    code = user_code(exp)
    if code and not args.allow_commands:
        return ("this scenario runs its own code as root:\n" + "\n".join(f"  - {c}" for c in code)
                + "\nread it, then pass --allow-commands to run it")
    if code and not quiet:
        print("running the scenario's own code as root (--allow-commands):\n"
              + "\n".join(f"  - {c}" for c in code), flush=True)
    return None if args.yes else too_long(exp, args.repeat)


def check_plans(exp) -> None:
    """Lay out every point (pure): a route conflict is bad input, found before anything starts."""
    from scenarios.spec.loader import ScenarioError
    from topologies.kinds import plan
    from topologies.plan import PlanError

    from controller.launch import user_app_path
    from runners.traffic import TOOLS

    problems = []
    base = Path(exp.file).resolve().parent
    for pt in exp.points:
        ctl = getattr(pt.scenario.topology, "controller", None)
        app = user_app_path(ctl.app, base) if ctl is not None else None
        if app is not None and not app.is_file():
            msg = f"topology.controller.app: no such file {app}"
            if msg not in problems:
                problems.append(msg)
        tool = pt.scenario.traffic.tool
        if tool not in TOOLS:
            msg = f"traffic.tool: no tool named {tool!r} (tools: {', '.join(sorted(TOOLS))})"
            if msg not in problems:
                problems.append(msg)
        try:
            plan(pt.scenario)
        except PlanError as e:
            for problem in e.problems:
                msg = problem if len(exp.points) == 1 else f"sweep point {pt.label}: {problem}"
                if msg not in problems:
                    problems.append(msg)
    if problems:
        raise ScenarioError(exp.file, problems)
