"""Switches and the controller on a real kernel: learning (in E5 Exp 2's test: four clients through the
learning app), bridges, a user's app that dies. Steering (E2) on the userspace datapath is checked in
test_events.py's switched test, whose two WAN links the steering app splits; on the kernel datapath in
lab 5's test."""
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .helpers import REPO, ForkedCli, leftovers, run_cli, write_scenario

pytestmark = pytest.mark.integration


def result_set(out: Path) -> tuple[Path, dict]:
    d = next(next(out.iterdir()).iterdir())
    return d, json.loads((d / "results.json").read_text())


LEARNING = """\
name: learning
topology:
  kind: switched
  switches:
    - {name: s1, type: ovs, controller: true}
  controller: {app: learning}
  links:
    - {name: h1a, between: [h1, s1], bw: 10, delay: 2ms}
    - {name: h1b, between: [h1, s1], bw: 10, delay: 2ms}
    - {name: h2a, between: [h2, s1], bw: 10, delay: 2ms}
    - {name: h2b, between: [h2, s1], bw: 10, delay: 2ms}
  paths:
    - {name: A, client_if: 0, server_if: 0}
    - {name: B, client_if: 1, server_if: 1}
traffic: {duration: 4}
runs: {compare: [mptcp, tcp], pause: 0.2s}
"""


LINK_MBPS = 10


def run_e5_exp2(tmp_path: Path, out: str) -> tuple[Path, dict]:
    # at 10 Mbit/s a link, not the scenario's 25: on a slower machine of the CI kind (2026-11-28) the 25 Mbit/s
    # MPTCP run (8 subflows, 50 Mbit/s in all, through OVS and the controller) left the guest's CPUs no idle
    # time in 67-96 % of its samples, in three runs of three, and was judged unfaithful
    text = (REPO / "scenarios" / "e5-exp2.yaml").read_text().replace("duration: 10", "duration: 4")
    text = text.replace("bw: 25,", f"bw: {LINK_MBPS},")
    f = write_scenario(tmp_path / "e5.yaml", text)
    r = run_cli(str(f), "--backend", "native", "--variant", "all-interfaces", "--repeat", "1",
                "--out", str(tmp_path / out))
    assert r.returncode in (0, 1), r.stdout + r.stderr      # 1: a verdict may be inconclusive-free fail
    # Mininet's check of a controller made before it listened (the build overlaps its import): a false alarm
    assert "Unable to contact the remote controller" not in r.stdout + r.stderr
    d, doc = result_set(tmp_path / out)
    return d, {x["mode"]: x for x in doc["runs"]}


def test_e5_exp2_gives_a_row_per_client(tmp_path):
    d, runs = run_e5_exp2(tmp_path, "o")
    # Four clients with two subflows each through OVS and the controller can outrun TCG's two CPUs: in CI on
    # 2026-11-28, at 25 Mbit/s a link, the MPTCP run had no idle CPU in 96 % of its samples, its shapers sent
    # 82 % of their rate, and it was judged unfaithful, rightly; MPTCP then read 1.22x TCP. A user reruns
    # such a run, and so does the test, once; the comparison below needs both runs of one attempt not
    # `unfaithful`.
    unfaithful = [x for x in runs.values() if x["fidelity"]["status"] == "unfaithful"]
    if unfaithful:
        assert all(any("CPU" in why for why in x["fidelity"]["reasons"]) for x in unfaithful), \
            {m: x["fidelity"] for m, x in runs.items()}
        d, runs = run_e5_exp2(tmp_path, "again")
        assert all(x["fidelity"]["status"] != "unfaithful" for x in runs.values()), \
            (f"runs {[x['id'] for x in unfaithful]} were unfaithful, and so was a run of the second attempt",
             {m: x["fidelity"] for m, x in runs.items()})
    for mode in ("mptcp", "tcp"):
        clients = runs[mode]["clients"]
        assert sorted(clients) == ["h2", "h3", "h4", "h5"]
        assert all(c["throughput_mbps"] > 0.5 for c in clients.values()), clients
        m = runs[mode]["metrics"]
        assert abs(m["throughput_per_client_mbps"] * 4 - sum(c["throughput_mbps"] for c in clients.values())) < 0.01
        # the aggregate counts every client's bytes over the span from the first start to the last end
        starts = sorted(c["started_after_s"] for c in clients.values())
        assert starts[0] == 0 and m["clients_start_spread_s"] == starts[-1] < 2.5, clients
        assert m["seconds"] >= max(c["seconds"] for c in clients.values())
        assert abs(m["throughput_mbps"] - m["bytes_received"] * 8 / m["seconds"] / 1e6) < 0.01
    rows = (d / "runs.csv").read_text().splitlines()
    per_client = [x for x in rows if ",throughput_mbps,," in x and any(f",h{i}," in x for i in range(2, 6))]
    assert len(per_client) == 8, rows[:5]
    assert leftovers() == []
    # The aggregate was the sum of each client's own average. Started one after another under TCG their
    # windows differed and TCP's sum read 25.5-31.4 Mbit/s (1.07-1.31x the goodput a 25 Mbit/s link
    # allows) in 4 s runs; released together by a barrier, 25.47 (1.065x), 2026-11-23; and 30.6 in CI on
    # 2026-11-27, when one client's SYN was lost in the queue the others had filled and its 4 s began
    # 1 s late. It is now all bytes over the span the clients covered.
    tcp_cap = LINK_MBPS * 1448 / 1514
    assert runs["tcp"]["metrics"]["throughput_mbps"] <= 1.10 * tcp_cap, runs["tcp"]["metrics"]
    assert runs["mptcp"]["metrics"]["throughput_mbps"] <= 1.10 * 2 * tcp_cap, runs["mptcp"]["metrics"]
    # MPTCP's clients share both server links, TCP's only one. One 4 s run of each is a functional check,
    # not a measurement: 1.91x on 2026-11-23 in a test run, 1.49x in CI the same day (the join of a
    # second subflow, through OVS and the controller under TCG, takes part of 4 s). The full scenario's
    # verdicts, with repetitions, are the measurement (docs/experiments.md).
    assert runs["mptcp"]["metrics"]["throughput_mbps"] > 1.25 * runs["tcp"]["metrics"]["throughput_mbps"]
    # The learning app (os-ken), as the learning switch's own test checked before it was folded in here:
    # the one switch reached it; it installs flows rather than passing packets up (TCP's four clients
    # near the server link's rate: 25.5 of 23.9 Mbit/s of goodput on 2026-11-23, the old test asked 0.7
    # of its link); the client whose connection `ss` watches has two subflows; and each server link
    # carries over a quarter of MPTCP's bytes.
    events = [json.loads(x) for x in (d / "controller" / "report.jsonl").read_text().splitlines()]
    assert [e["switch"] for e in events if e["event"] == "switch-connected"] == ["s1"]
    assert "LearningSwitch" in (d / "controller" / "controller.log").read_text()
    assert runs["tcp"]["metrics"]["throughput_mbps"] > 0.7 * tcp_cap, runs["tcp"]["metrics"]
    assert runs["mptcp"]["metrics"]["subflows"] == 2, runs["mptcp"]["metrics"]
    shares = {n: p["share"] for n, p in runs["mptcp"]["paths"].items()}
    assert sorted(shares) == ["A", "B"] and min(shares.values()) > 0.25, runs["mptcp"]["paths"]


def test_bridge_switches_pass_traffic(tmp_path):
    text = LEARNING.replace("{name: s1, type: ovs, controller: true}", "{name: s1, type: bridge}")
    text = text.replace("  controller: {app: learning}\n", "").replace("compare: [mptcp, tcp]", "compare: [tcp]")
    f = write_scenario(tmp_path / "b.yaml", text)
    r = run_cli(str(f), "--backend", "native", "--out", str(tmp_path / "o"))
    assert r.returncode == 0, r.stdout + r.stderr
    _, doc = result_set(tmp_path / "o")
    assert doc["runs"][0]["metrics"]["throughput_mbps"] > 8.5
    assert leftovers() == []


def test_user_app_killed_mid_run_fails_clearly_and_cleans_up(tmp_path):
    """A user's app file (the README's hub) gets our lifecycle: started, checked, and watched."""
    app = REPO / "tests" / "fixtures" / "hub_app.py"
    # long enough that the kill, 3 s after the traffic started, lands mid-run with margin under TCG
    text = LEARNING.replace("duration: 4", "duration: 12").replace("compare: [mptcp, tcp]", "compare: [tcp]")
    text = text.replace("controller: {app: learning}", f"controller: {{app: {app}}}")
    f = write_scenario(tmp_path / "k.yaml", text)
    p = ForkedCli(str(f), "--backend", "native", "--allow-commands", "--out", str(tmp_path / "o"))
    try:
        deadline = time.monotonic() + 240
        victim = None
        while time.monotonic() < deadline and victim is None:
            # a run's raw files are written after its traffic: the client's process says it started
            client = subprocess.run(["pgrep", "-f", "iperf3 -c"], capture_output=True, text=True).stdout
            if client.split():
                time.sleep(3)   # iperf3 is running now
                out = subprocess.run(["pgrep", "-f", "controller.launch"], capture_output=True, text=True).stdout
                victim = int(out.split()[0]) if out.split() else None
            time.sleep(0.5)
        assert victim is not None, "the run never reached its traffic phase"
        os.kill(victim, signal.SIGKILL)
        out, _ = p.communicate(timeout=180)
    finally:
        p.kill()
    err = out    # one stream: stdout and stderr together
    assert p.returncode == 1, out + err
    assert f"the controller ({app}) exited" in err and "controller.log" in err, err
    d = next(next((tmp_path / "o").iterdir()).iterdir())
    assert "Hub" in (d / "controller" / "controller.log").read_text()
    assert f"topology.controller.app: the Python file {app}" in out           # shown before it ran
    assert any(str(app) in c for c in json.loads((d / "metadata.json").read_text())["user_code"])
    assert "Traceback" not in err
    assert leftovers() == []
