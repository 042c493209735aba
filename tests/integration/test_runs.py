"""End-to-end runs on a real kernel: Mininet, netem, MPTCP and iperf3, really started.

On a machine without MPTCP/netem these run inside one micro-VM (see conftest).
"""
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .helpers import REPO, leftovers, run_cli, write_scenario

pytestmark = pytest.mark.integration


def results_of(out_dir: Path, name: str) -> dict:
    sets = sorted(p for p in (out_dir / name).iterdir() if p.name != "latest")
    assert len(sets) == 1, sets
    assert (out_dir / name / "latest").resolve() == sets[0].resolve()
    return json.loads((sets[0] / "results.json").read_text())


SLOW = """\
name: slow
topology:
  kind: dual-homed
  paths:
    - {name: A, bw: 5, delay: 10ms}
    - {name: B, bw: 5, delay: 10ms}
traffic: {duration: 60}
runs: {compare: [mptcp, tcp]}
"""


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"])
def test_interrupt_mid_run_cleans_up(tmp_path, sig, code):
    scen = write_scenario(tmp_path / "slow.yaml", SLOW)
    p = subprocess.Popen([sys.executable, "-u", "-m", "runners.cli", str(scen), "--backend", "native",
                          "--out", str(tmp_path / "res")], cwd=REPO, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    seen = []
    deadline = time.monotonic() + 240
    for line in p.stdout:
        seen.append(line)
        if line.startswith("run r001-") and " with primary path " in line:   # the first run, MPTCP or TCP
            break
        assert time.monotonic() < deadline, "".join(seen)
    time.sleep(5)  # iperf3 is running now
    assert [x for x in leftovers() if "Mininet host's network namespace" in x], "nothing was running?"
    p.send_signal(sig)
    out, _ = p.communicate(timeout=120)
    assert p.returncode == code, "".join(seen) + out
    assert "Traceback" not in out
    assert leftovers() == []
    d = next((tmp_path / "res" / "slow").iterdir())
    meta = json.loads((d / "metadata.json").read_text())
    assert meta["status"] in ("interrupted", "terminated")


def test_bad_input_as_root_starts_nothing(tmp_path):
    bad = write_scenario(tmp_path / "bad.yaml", SLOW.replace("bw: 5, delay: 10ms}", "bw: 0, delay: 10}", 1))
    r = run_cli(str(bad), "--backend", "native", "--out", str(tmp_path / "res"))
    assert r.returncode == 2
    assert "bad.yaml" in r.stderr and "topology.paths[0].bw" in r.stderr and "topology.paths[0].delay" in r.stderr
    assert not (tmp_path / "res").exists()
    assert leftovers() == []


def test_backup_paths_stay_idle_including_a_backup_primary(tmp_path):
    """Backup on a secondary path (endpoint flag) and on the primary (MP_PRIO once connected)."""
    base = (REPO / "scenarios" / "two-paths.yaml").read_text().replace("duration: 10", "duration: 6")
    base = base.replace("compare: [mptcp, tcp]", "compare: [mptcp]")
    for backup in ("B", "A"):
        f = write_scenario(tmp_path / f"bk{backup}.yaml", base.replace("backup: []", f"backup: [{backup}]"))
        out = tmp_path / f"o{backup}"
        r = run_cli(str(f), "--backend", "native", "--out", str(out))
        assert r.returncode == 0, r.stdout + r.stderr
        (run,) = results_of(out, "two-paths")["runs"]
        assert run["metrics"]["subflows"] == 2
        if backup == "B":
            assert run["paths"]["B"]["share"] < 0.05, run["paths"]
        else:
            # the primary carries data until the join and MP_PRIO (0.3-1.5 s under TCG, as load allows),
            # then idles: judged on the last sample, while the other path runs full
            last = run["path_series_mbps"][-1]
            assert last["t"] >= 4 and last["A"] < 0.5 and last["B"] > 5, run["path_series_mbps"]
            assert run["paths"]["A"]["share"] < 0.3, run["paths"]
        flags = {s["local"]: s.get("backup") for s in run["subflow_list"]}
        assert flags.get("10.0.1.1" if backup == "A" else "10.0.2.1") is True, run["subflow_list"]
    assert leftovers() == []
