"""`run-scenario export`: every shipped scenario becomes a script that parses, holds the same commands
a run applies, and picks the point and primary asked for."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest
from scenarios.spec.loader import load_experiment, parse_experiment
from topologies.kinds import plan as make_plan
from topologies.plan import shaping_argvs

from runners.cli.export import export_script

REPO = Path(__file__).resolve().parents[2]


def literals(script: str) -> dict:
    tree = ast.parse(script)
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and node.targets[0].id.isupper():
            out[node.targets[0].id] = ast.literal_eval(node.value)
    return out


@pytest.mark.parametrize("path", sorted((REPO / "scenarios").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_scenario_exports_a_script_with_the_runs_commands(path):
    exp = load_experiment(path)
    point = exp.points[0]
    script = export_script(point, str(path))
    lit = literals(script)
    plan = make_plan(point.scenario)
    assert set(lit["HOSTS"]) >= set(plan.hosts) | set(plan.routers)
    assert len(lit["LINKS"]) == len(plan.links)
    shaped = [i for i in plan.interfaces if i.shaping is not None]
    assert sum(len(v) for v in lit["SHAPING"].values()) == sum(len(shaping_argvs(i.name, i.shaping)) for i in shaped)
    for iface in shaped:
        assert all(argv in lit["SHAPING"][iface.node] for argv in shaping_argvs(iface.name, iface.shaping))
    assert all(["sysctl", "-q", "-w", "net.mptcp.enabled=1"] in lit["MPTCP"][h] for h in plan.hosts)
    assert "CLI(net)" in script and "shlex.join(argv)" in script


def test_the_point_and_primary_asked_for():
    text = (REPO / "scenarios" / "two-paths.yaml").read_text()
    text += "sweep:\n  paths.A.delay: [5ms, 80ms]\n"
    exp = parse_experiment(text, "s.yaml")
    script = export_script(exp.points[1], "s.yaml", primary="A")
    assert "point p002 (paths.A.delay=80ms)" in script
    assert "'delay', '80ms'" in script


def cli(*args):
    return subprocess.run([sys.executable, "-m", "runners.cli", "export", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=60)


def test_cli_refuses_an_unknown_point_or_primary():
    r = cli("scenarios/two-paths.yaml", "--point", "p009")
    assert r.returncode == 2 and "this scenario's points are p001" in r.stderr
    r = cli("scenarios/two-paths.yaml", "--primary", "Z")
    assert r.returncode == 2 and "primary paths are" in r.stderr
    r = cli("scenarios/e4-delay.yaml", "--primary", "B")
    assert r.returncode == 0 and "primary path B" in r.stdout
