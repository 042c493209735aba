"""--dry-run and `list`: the job table and the time estimate, from the same planner the runner uses and
from the per-phase costs a finished set measured."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

from scenarios.spec.loader import load_experiment, parse_experiment

from runners.runset.estimate import Costs, DEFAULTS, job_table, measured_costs, render_table

REPO = Path(__file__).resolve().parents[2]
SWEEP = """\
name: prev
topology:
  kind: dual-homed
  paths:
    - {name: A, bw: 10, delay: 5ms}
    - {name: B, bw: 10, delay: 5ms}
traffic: {duration: 10}
runs: {compare: [mptcp, tcp], primaries: [A, B], repeat: 3, pause: 1s}
sweep:
  paths.A.delay: [5ms, 50ms]
"""
FLAT = Costs(start=10, build=5, run_overhead=2, report=1, source="test")


def test_the_table_has_every_point_mode_primary_and_repetition():
    exp = parse_experiment(SWEEP, "prev.yaml")
    rows, networks, total = job_table(exp, None, FLAT)
    assert [r.point for r in rows] == ["p001", "p002"]
    # mptcp and tcp (on each run's primary) with A and B as primary: 4 cases, 3 rounds
    assert all(r.runs == 12 and r.repeats == 3 and r.modes == "mptcp, tcp" and r.primaries == "A, B" for r in rows)
    assert networks == 1                                       # a delay is re-shaped, not rebuilt
    per_run = 10 + 1 + 2
    assert total == 10 + networks * 5 + 2 * 12 * per_run + 1


def test_repeat_on_the_command_line_overrides():
    exp = parse_experiment(SWEEP, "prev.yaml")
    rows, _, _ = job_table(exp, 5, FLAT)
    assert all(r.runs == 20 and r.repeats == 5 for r in rows)


def test_costs_come_from_a_finished_sets_phases():
    meta = {"backend": "vm", "finished_utc": "2026-11-22T10:00:00Z", "status": "ok",
            "phases": {"python_start": 1.5, "prepare": 6.0, "vm_boot_and_exit": 9.5, "build": 3.5, "shaping": 1.5,
                       "teardown": 1.0, "report": 0.6,
                       "runs": [{"wall": 14.5, "traffic": 10.2}, {"wall": 14.0, "traffic": 10.1},
                                {"wall": 20.0, "traffic": 10.0}]}}
    c = measured_costs(meta, "results/x/latest")
    assert c.start == 17.0 and c.build == 6.0 and c.report == 0.6
    assert round(c.run_overhead, 2) == 4.3                    # the median: one slow run does not skew it
    assert "vm, 2026-11-22" in c.source
    assert measured_costs({"phases": {}}, "x") is None


def test_the_default_scenario_estimate_matches_what_was_measured():
    """README: 43.4 s for the default scenario with a VM boot, 28.0-28.4 s with a warm VM (TCG, 2026-11-25)."""
    exp = load_experiment(REPO / "scenarios" / "two-paths.yaml")
    _, _, total = job_table(exp, None, DEFAULTS["vm"])
    assert 39 <= total <= 48
    _, _, warm = job_table(exp, None, DEFAULTS["warm vm"])
    assert 25 <= warm <= 31
    text = render_table(exp, None, DEFAULTS["vm"], "vm")
    assert "2 runs on 1 network(s)" in text and "on the vm backend" in text


def run(*args):
    return subprocess.run([sys.executable, "-m", "runners.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=60)


def test_dry_run_prints_the_table_and_starts_nothing(tmp_path):
    f = tmp_path / "prev.yaml"
    f.write_text(SWEEP)
    r = run(str(f), "--dry-run", "--backend", "vm", "--out", str(tmp_path / "o"))
    assert r.returncode == 0, r.stderr
    assert "dry run: nothing is started" in r.stdout and "24 runs on 1 network(s)" in r.stdout
    assert "p002" in r.stdout and "paths.A.delay=50ms" in r.stdout
    assert not (tmp_path / "o").exists()


def test_dry_run_of_a_shard_shows_only_its_points(tmp_path):
    """--shard 2/2 runs every 2nd point from the 2nd: the table and the estimate are for those alone."""
    f = tmp_path / "prev.yaml"
    f.write_text(SWEEP.replace("[5ms, 50ms]", "[5ms, 50ms, 100ms]"))
    r = run(str(f), "--dry-run", "--shard", "2/2", "--backend", "vm", "--out", str(tmp_path / "o"))
    assert r.returncode == 0, r.stderr
    assert "shard 2/2: 1 point(s)" in r.stdout and "12 runs on 1 network(s)" in r.stdout
    assert "paths.A.delay=50ms" in r.stdout and "p001" not in r.stdout and "p003" not in r.stdout


def test_list_gives_a_line_per_scenario_and_flags_invalid_ones(tmp_path):
    shutil.copy(REPO / "scenarios" / "two-paths.yaml", tmp_path)
    (tmp_path / "broken.yaml").write_text("name: b\ntopology: {kind: dual-homed, paths: []}\n")
    r = run("list", str(tmp_path), "--backend", "vm")
    assert r.returncode == 2
    lines = r.stdout.splitlines()
    assert lines[0].split()[:3] == ["file", "runs", "time"]
    two = next(ln for ln in lines if ln.startswith("two-paths.yaml"))
    assert two.split()[1] == "2" and "Two disjoint" in two
    assert any(ln.startswith("broken.yaml") and "invalid" in ln for ln in lines)
    ok = run("list", "--backend", "vm")
    assert ok.returncode == 0 and len(ok.stdout.splitlines()) == len(list((REPO / "scenarios").glob("*.yaml"))) + 2
