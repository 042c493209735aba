"""docs/ci.md's Slurm recipe on a real one-node Slurm cluster, against one machine's run of the same sweep.

The recipe is read from docs/ci.md and submitted with sbatch as written, with only its two parts to change
swapped: the scenario (a 2-point sweep, one run per point) and the shard count (2). When the array job has
ended, the recipe's merge command runs. The merged set must equal, point for point, the set that the same
run-scenario command without --shard makes on one machine: the same points, runs, columns and verdicts (the
numbers differ: structure is compared). Where the kernel lacks netem each shard boots a micro-VM: the
cluster runs one task at a time (tests/cluster/slurm.py says why).
"""
from __future__ import annotations

import csv
import json
import os
import shlex
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests import ci_recipes
from tests.cluster.slurm import OneNodeSlurm

pytestmark = pytest.mark.slurm
REPO = Path(__file__).resolve().parents[2]
SHARDS = 2
SWEEP = """\
name: slurm-sweep
topology:
  kind: dual-homed
  paths:
    - {name: A, bw: 5, delay: 5ms}
    - {name: B, bw: 5, delay: 5ms}
traffic: {duration: 5}   # 3 s left a freshly booted kernel's first run without an `ss` sample at times
runs: {compare: [mptcp], repeat: 1}
sweep:
  paths.A.delay: [5ms, 20ms]
expect:
  - {name: two-subflows, check: "mptcp.subflows >= 2"}
"""


def one_machine_argv(script: str, out: str) -> list[str]:
    """The recipe's run-scenario command without --shard, writing to `out`: the same sweep on one machine."""
    lines = ci_recipes.run_lines(script)
    assert len(lines) == 1, lines
    argv = shlex.split(lines[0])
    i = argv.index("--shard")
    del argv[i:i + 2]
    argv[argv.index("--out") + 1] = out
    assert not any("$" in a for a in argv), argv
    return argv


def rows(path: Path, keep: list[str]) -> tuple[list[str], list[tuple]]:
    """A CSV's header and its rows cut to the `keep` columns (the ones that name, not measure), sorted."""
    with path.open() as f:
        reader = csv.DictReader(f)
        got = sorted(tuple(r[k] for k in keep) for r in reader)
    return reader.fieldnames, got


def shape(run_set: Path) -> dict:
    """What must be equal between two sets of the same sweep: everything but the measured numbers."""
    doc = json.loads((run_set / "results.json").read_text())
    runs = {r["id"]: {"fields": sorted(r), "metrics": sorted(r["metrics"]), "paths": sorted(r["paths"]),
                      "what": (r["point"], r["point_label"], r["mode"], r["primary"], r["repeat"], r["status"],
                               r["params"], r["kernel"])}
            for r in doc["runs"]}
    verdicts = sorted((v["point"], v["label"], v["name"], v["check"], v["kind"], tuple(sorted(v)))
                      for v in json.loads((run_set / "verdicts.json").read_text()))
    cases = sorted((c.get("classname"), c.get("name")) for c in ET.parse(run_set / "junit.xml").iter("testcase"))
    return {"points": doc["metadata"]["points"], "runs": runs, "verdicts": verdicts, "junit": cases,
            "runs.csv": rows(run_set / "runs.csv", ["run_id", "point", "label", "kernel", "mode", "repeat",
                                                    "primary", "status", "metric", "path", "client", "unit"]),
            "stats.csv": rows(run_set / "stats.csv", ["point", "label", "kernel", "case", "metric", "unit", "n"])}


def outputs(work: Path) -> str:
    return "\n".join(f"--- {f.name}\n{f.read_text(errors='replace')[-3000:]}" for f in sorted(work.glob("slurm-*.out")))


def test_the_slurm_recipe_shards_and_merges_a_sweep_as_one_machine_runs_it(tmp_path):
    script, merge = ci_recipes.slurm()
    script = ci_recipes.swapped(script, "scenarios/slurm-sweep.yaml", SHARDS)
    # the recipe runs from a checkout: this one's venv, its code (PYTHONPATH: whatever checkout the venv's
    # editable install names), and the sweep as scenarios/slurm-sweep.yaml
    work = tmp_path / "checkout"
    (work / "scenarios").mkdir(parents=True)
    (work / ".venv").symlink_to(sys.prefix)
    (work / "scenarios" / "slurm-sweep.yaml").write_text(SWEEP)
    (work / "shards.sh").write_text(script)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    took = {}

    started = time.monotonic()
    with OneNodeSlurm() as cluster:
        took["cluster up"] = time.monotonic() - started
        assert cluster.listening() == ["0100007F", "0100007F"], "slurmctld and slurmd listen on 127.0.0.1 only"
        job = cluster.sbatch(work / "shards.sh", work, env)
        tasks = cluster.wait(job, SHARDS, 15 * 60)
        took["array job"] = time.monotonic() - started - took["cluster up"]
    bad = [t for t in tasks if t["JobState"] != "COMPLETED" or t["ExitCode"] != "0:0"]
    assert not bad, f"{[(t['ArrayTaskId'], t['JobState'], t['ExitCode']) for t in bad]}\n{outputs(work)}"
    # one task at a time: the second started when the first had ended
    assert tasks[1]["StartTime"] >= tasks[0]["EndTime"], [(t["StartTime"], t["EndTime"]) for t in tasks]
    shard_sets = sorted((work / "shards").glob("*/slurm-sweep/latest"))
    assert len(shard_sets) == SHARDS, outputs(work)

    t0 = time.monotonic()
    r = subprocess.run(["bash", "-c", merge], cwd=work, env=env, capture_output=True, text=True, timeout=600)
    took["merge"] = time.monotonic() - t0
    assert r.returncode == 0, r.stdout + r.stderr
    merged = (work / "merged" / "slurm-sweep" / "latest").resolve()

    t0 = time.monotonic()
    one = subprocess.run(one_machine_argv(script, "one-machine"), cwd=work, env=env, capture_output=True, text=True,
                         timeout=900)
    took["one machine"] = time.monotonic() - t0
    assert one.returncode == 0, one.stdout + one.stderr
    print("slurm sweep: " + ", ".join(f"{k} {v:.1f} s" for k, v in took.items()), flush=True)

    alone = (work / "one-machine" / "slurm-sweep" / "latest").resolve()
    want, got = shape(alone), shape(merged)
    assert len(got["runs"]) == 2 and len(got["points"]) == 2
    for part in want:
        assert got[part] == want[part], part
    meta = json.loads((merged / "metadata.json").read_text())
    assert sorted(m["shard"] for m in meta["merged_from"]) == [[1, SHARDS], [2, SHARDS]]
    assert all((merged / "raw" / run).is_dir() for run in got["runs"])
    assert (merged / "report.html").is_file()   # the merge draws the report the shards (--no-plots) did not
