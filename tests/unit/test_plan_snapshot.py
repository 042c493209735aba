"""Every scenario point gives the plan and commands recorded in tests/fixtures/plans-snapshot.json.

The snapshot covers every point of every scenario in scenarios/ and labs/ (optional variants
included) and every fixture scenario under tests/fixtures that loads: the validated scenario, its
topology plan (or the plan's refusal), and what the runner derives from it purely (sysctls, netem,
MPTCP endpoints, expected subflows, nft counters). A refactoring must leave it identical.

A change that means to alter a plan regenerates it, from the repository's top folder:

    python -m tests.unit.test_plan_snapshot --regen

and the diff of the JSON file shows what changed.
"""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SNAPSHOT = REPO / "tests" / "fixtures" / "plans-snapshot.json"


def scenario_files() -> list[Path]:
    shipped = [*sorted((REPO / "scenarios").glob("*.yaml")), *sorted((REPO / "labs").glob("*.yaml"))]
    return shipped + sorted((REPO / "tests" / "fixtures").rglob("*.yaml"))


def plain(value):
    """Dataclasses, named tuples and tuples as JSON's dicts and lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    return value


def derived_commands(scenario, plan) -> dict:
    """What the runner builds from the plan without touching the kernel."""
    from runners.collect.counters import nft_counter_argvs
    from runners.collect.subflows import expected_subflows, mptcp_limits
    from runners.pipeline.mptcp_config import mptcp_argvs, sysctls
    from topologies.plan import shaping_argvs

    shaped = [i for i in plan.interfaces if i.shaping is not None]
    per_primary = {}
    for primary in scenario.primaries:
        per_primary[primary] = {
            "mptcp": {client: plain(mptcp_argvs(scenario, plan.for_client(client), primary))
                      for client in plan.all_clients},
            "expected_subflows": plain(expected_subflows(scenario, plan, primary)),
            "mptcp_limits": list(mptcp_limits(scenario, len(plan.paths))),
        }
    return {
        "sysctls": {str(avail): [list(kv) for kv in sysctls(scenario, avail)] for avail in (False, True)},
        "netem": {i.name: shaping_argvs(i.name, i.shaping)[-1] for i in shaped},
        **({"tbf": {i.name: shaping_argvs(i.name, i.shaping)[0] for i in shaped if i.shaping.rate_at_dequeue}}
           if any(i.shaping.rate_at_dequeue for i in shaped) else {}),
        "nft": ({node: nft_counter_argvs(plan.for_client(node) if node in plan.all_clients else plan, node)
                 for node in plan.hosts} if plan.byte_counters == "nft" else {}),
        "per_primary": per_primary,
        "link_ports": plain(plan.link_ports()),
    }


def point_entry(point) -> dict:
    from topologies.kinds import plan as make_plan
    from topologies.plan import PlanError

    entry = {"label": point.label, "params": plain(point.params),
             "scenario": point.scenario.model_dump(mode="json")}
    try:
        plan = make_plan(point.scenario)
    except PlanError as e:
        entry["plan_error"] = list(e.problems)
        return entry
    entry["plan"] = plain(plan)
    entry["commands"] = derived_commands(point.scenario, plan)
    return entry


FIXTURE_POINTS = 2   # a fixture's first and last point: million-runs.yaml's 1000 differ only in one delay


def snapshot() -> dict:
    """{file: {point id: entry}}; a fixture that does not load is left out (the bad-scenario tests own it)."""
    from scenarios.spec.loader import ScenarioError, load_experiment

    out = {}
    for path in scenario_files():
        rel = path.relative_to(REPO).as_posix()
        try:
            exp = load_experiment(path)
        except ScenarioError:
            if rel.startswith("tests/"):
                continue
            raise
        points = exp.points
        if rel.startswith("tests/") and len(points) > FIXTURE_POINTS:
            points = [points[0], points[-1]]
        out[rel] = {pt.id: point_entry(pt) for pt in points}
    return json.loads(json.dumps(out, sort_keys=True))


def first_difference(want, got, where: str = "") -> str | None:
    """Where two JSON values first differ, as a path such as scenarios/x.yaml/p003/plan/paths/0/table."""
    if isinstance(want, dict) and isinstance(got, dict):
        for key in sorted(set(want) | set(got)):
            if key not in got:
                return f"{where}/{key}: missing now (was {json.dumps(want[key])[:200]})"
            if key not in want:
                return f"{where}/{key}: new (now {json.dumps(got[key])[:200]})"
            found = first_difference(want[key], got[key], f"{where}/{key}")
            if found:
                return found
        return None
    if isinstance(want, list) and isinstance(got, list):
        for i, (a, b) in enumerate(zip(want, got)):
            found = first_difference(a, b, f"{where}/{i}")
            if found:
                return found
        if len(want) != len(got):
            return f"{where}: {len(want)} items recorded, {len(got)} now"
        return None
    if want != got or type(want) is not type(got):
        return f"{where}: recorded {json.dumps(want)[:200]}, now {json.dumps(got)[:200]}"
    return None


def render(snap: dict) -> str:
    """The snapshot as JSON with one point per line: small in git, and a diff names the points."""
    lines = ["{"]
    for i, (file, points) in enumerate(sorted(snap.items())):
        lines.append(f" {json.dumps(file)}: {{")
        for j, (point_id, entry) in enumerate(sorted(points.items())):
            comma = "," if j < len(points) - 1 else ""
            lines.append(f"  {json.dumps(point_id)}: {json.dumps(entry, sort_keys=True, separators=(',', ':'))}{comma}")
        lines.append(" }" + ("," if i < len(snap) - 1 else ""))
    return "\n".join(lines + ["}"]) + "\n"


def test_every_point_gives_the_recorded_plan():
    recorded = json.loads(SNAPSHOT.read_text())
    now = snapshot()
    shipped = sum(len(points) for file, points in now.items() if not file.startswith("tests/"))
    assert shipped >= 250
    difference = first_difference(recorded, now)
    assert difference is None, (f"{difference}\n(a change meant to alter plans: "
                                "python -m tests.unit.test_plan_snapshot --regen)")


def test_a_changed_field_is_named():
    want = {"a.yaml": {"p001": {"plan": {"paths": [{"table": 100}]}}}}
    got = {"a.yaml": {"p001": {"plan": {"paths": [{"table": 101}]}}}}
    assert first_difference(want, got) == "/a.yaml/p001/plan/paths/0/table: recorded 100, now 101"
    assert first_difference(want, want) is None


if __name__ == "__main__":
    if sys.argv[1:] != ["--regen"]:
        sys.exit("usage: python -m tests.unit.test_plan_snapshot --regen")
    SNAPSHOT.write_text(render(snapshot()))
    print(f"wrote {SNAPSHOT.relative_to(REPO)}")
