"""--dry-run and `list`: the job table and the time estimate, from the same planner the runner uses and
from the per-phase costs a finished set measured."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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
    """docs/exploring.md: the default scenario took 57.6 s with a VM boot and 31.2-35.6 s with a warm VM
    (TCG, 2 cores, 2026-11-25, the machine shared with other work; 43.4 s and 28.0-28.4 s on a quiet one)."""
    exp = load_experiment(REPO / "scenarios" / "two-paths.yaml")
    _, _, total = job_table(exp, None, DEFAULTS["vm"])
    assert abs(total - 57.6) <= 0.15 * 57.6
    _, _, warm = job_table(exp, None, DEFAULTS["warm vm"])
    assert all(abs(warm - took) <= 0.15 * took for took in (31.2, 35.6))
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


def test_a_long_primary_path_costs_its_round_trips_in_every_run():
    """Lab 2 (2026-11-25): a run with its primary on the 500 ms path took 9.1-9.8 s, on the 30 ms path
    4.6-5.1 s, for the same 2 MiB: iperf3's exchanges before and after the transfer and the transfer's
    start are round trips of the path. The estimate had both at 1.7 s + 1.7 s of traffic (41 s of 68)."""
    from runners.runset.jobs import plan_jobs
    from runners.runset.estimate import path_rtt, round_trip_seconds

    exp = load_experiment(REPO / "labs" / "lab2-primary-path.yaml")
    topo = exp.points[0].scenario.topology
    assert (path_rtt(topo, "A"), path_rtt(topo, "B")) == (0.5, 0.03)
    costs = DEFAULTS["vm"]
    by_primary = {j.primary: round_trip_seconds(j, costs) for j in plan_jobs(exp.points, range(1, 2), 0)}
    assert by_primary["A"] == costs.control_rtts * 0.5 + costs.start_rtts * 0.5
    assert by_primary["A"] - by_primary["B"] > 4        # measured: 4.5 s more per run
    # a timed transfer has no start to wait for, only the tool's exchanges: lab 4's TCP baselines run
    # together wait on the slower path (B, 160 ms)
    lab4 = load_experiment(REPO / "labs" / "lab4-unequal-paths.yaml")
    together = next(j for j in plan_jobs(lab4.points, range(1, 2), 0) if j.together)
    assert round_trip_seconds(together, costs) == costs.control_rtts * 0.16


def test_round_trips_of_routed_and_switched_paths():
    from runners.runset.estimate import path_rtt

    routed = load_experiment(REPO / "labs" / "lab3-noncongruent.yaml").points[0].scenario.topology
    assert round(path_rtt(routed, "v4"), 3) == 0.044 and round(path_rtt(routed, "v6"), 3) == 0.064
    switched = load_experiment(REPO / "labs" / "lab5-steering.yaml").points[0].scenario.topology
    assert path_rtt(switched, "main") == 0.03                  # its slowest link's: 15 ms each way


def test_a_network_under_a_controller_costs_its_start_once_and_its_switches_every_run():
    """Lab 5's switches and os-ken controller: the controller's start under TCG is many seconds, paid once
    per network; every run clears and relearns the flows of each switch and reads their counters."""
    from runners.runset.checks import select_variants

    exp = select_variants(load_experiment(REPO / "labs" / "lab5-steering.yaml"), None)    # steered alone
    base = Costs(start=0, build=0, run_overhead=0, report=0, source="test")
    _, networks, plain = job_table(exp, 1, base)
    switched = Costs(start=0, build=0, run_overhead=0, report=0, source="test", controller=30, switch_run=1.5)
    _, _, total = job_table(exp, 1, switched)
    runs = 2                                                   # one mptcp and one tcp run per round
    assert networks == 1 and total == plain + 30 + runs * 2 * 1.5
    assert "a controller's network 30 s more" in switched.describe()


def test_a_capture_costs_per_run_and_per_megabyte_sent():
    """Lab 1's step 4 (--repeat 1 --capture) took 48 s with a boot (2026-11-27, TCG; 76 s on 2026-11-25,
    when the guest read the captures back: 11.4 s after TCP's 6 MB and 17.6 s after MPTCP's 12 MB)."""
    from runners.runset.jobs import plan_jobs
    from runners.runset.estimate import capture_seconds

    exp = load_experiment(REPO / "labs" / "lab1-two-paths.yaml")
    costs = DEFAULTS["vm"]
    by_mode = {j.mode: capture_seconds(j, costs) for j in plan_jobs(exp.points, range(1, 2), 0)}
    # MPTCP sends on both 10 Mbit/s paths for 5 s, TCP on one
    assert round(by_mode["mptcp"] - by_mode["tcp"], 1) == round(costs.capture_per_mb * 5.98, 1)
    _, _, plain = job_table(exp, 1, costs)
    _, _, captured = job_table(exp, 1, costs, capture=True)
    assert captured - plain == pytest.approx(sum(by_mode.values())) and 41 <= captured <= 55    # 48 s measured
    assert "--capture: 2.5 s per run" in render_table(exp, 1, costs, "vm", capture=True)
