"""Routed and dual-stack networks on a real kernel: E1 and E3 effects, IPv6-only MPTCP."""
import json
from pathlib import Path

import pytest

from .helpers import REPO, leftovers, run_cli, write_scenario

pytestmark = pytest.mark.integration


def run_set(tmp_path: Path, scenario: Path) -> dict:
    # 8 s instead of the scenario's 15: the claims below held with a wide margin (1.93x against 1.6x,
    # 0.97x against 1.25x) and CI's time is shared by every test
    text = scenario.read_text()
    assert "duration: 15" in text
    scenario = write_scenario(tmp_path.parent / scenario.name, text.replace("duration: 15", "duration: 8"))
    r = run_cli(str(scenario), "--backend", "native", "--out", str(tmp_path))
    assert r.returncode in (0, 1), r.stdout + r.stderr          # 1: a verdict failed; checked below
    d = next(next(tmp_path.iterdir()).iterdir())
    doc = json.loads((d / "results.json").read_text())
    assert len(doc["runs"]) == 3, r.stdout + r.stderr
    return {(x["mode"], x["primary"]): x for x in doc["runs"]}


def test_e1_shared_bottleneck_gives_no_more_than_tcp(tmp_path):
    runs = run_set(tmp_path, REPO / "scenarios" / "e1-shared-bottleneck.yaml")
    mp, v4 = runs[("mptcp", "v4")], runs[("tcp", "v4")]
    assert mp["metrics"]["throughput_mbps"] <= 1.25 * v4["metrics"]["throughput_mbps"]
    assert mp["metrics"]["subflows"] == 2
    assert leftovers() == []


def e3_case7(fam: str) -> str:
    text = (REPO / "scenarios" / f"e3-{fam}.yaml").read_text()
    text = text[:text.index("\nvariants:\n")] + "\n"
    for i, rate in enumerate([2, 2, 1, 1]):
        text = text.replace(f"{{name: w{i + 1}, between: [r1, r2], bw: 2,", f"{{name: w{i + 1}, between: [r1, r2], bw: {rate},")
    return text.replace("bytes: 10MiB", "bytes: 6MB")   # smaller than the paper's 10 MiB, to keep CI short


def test_e3_case7_ipv4_efficiency(tmp_path):
    f = write_scenario(tmp_path / "case7.yaml", e3_case7("ipv4"))
    # no figures: a case none of whose runs counts a metric (the baselines' OFO), which once broke them, is
    # drawn in tests/unit/test_plots.py from a recorded set (under TCG they cost this test 10 s)
    r = run_cli(str(f), "--backend", "native", "--out", str(tmp_path / "o"))
    assert r.returncode == 0, r.stdout + r.stderr
    d = next((tmp_path / "o" / "e3-ipv4").iterdir())
    runs = json.loads((d / "results.json").read_text())["runs"]
    assert len(runs) == 5
    stats = {(s["case"], s["metric"]): s for s in json.loads((d / "stats.json").read_text())}
    eff = stats[("mptcp@A", "efficiency")]["mean"]
    # The issue asks >= 0.90 (the paper's MPT tunnel: > 0.96); the scenario's 1 MiB send buffer is what
    # gets MPTCP there on 6.1 (README, E3); above 1.05 would be a measurement error
    assert 0.90 <= eff <= 1.05, eff
    mp = next(x for x in runs if x["mode"] == "mptcp")
    assert mp["metrics"]["subflows"] == 4
    # every transfer is timed to its receiver's last byte (iperf3 writes an extra beyond the 6 MB)
    assert all(0.7 < x["metrics"]["delivered_fraction"] <= 1.0 for x in runs), [
        x["metrics"]["delivered_fraction"] for x in runs]
    assert all(p["bytes_received"] > 200_000 for p in mp["paths"].values()), mp["paths"]
    # the four TCP baselines ran at the same time (runs.tcp_together), each at its own path's rate
    tcp = {x["primary"]: x for x in runs if x["mode"] == "tcp"}
    for path, rate in zip("ABCD", [2, 2, 1, 1]):
        assert tcp[path]["alongside"] == [p for p in "ABCD" if p != path]
        assert list(tcp[path]["paths"]) == [path] and tcp[path]["metrics"]["retrans_segs"] is None
        assert 0.9 * rate <= tcp[path]["metrics"]["throughput_mbps"] <= rate, tcp[path]["metrics"]
        assert (d / tcp[path]["id"].join(["raw/", "/iperf3-client.json"])).is_file()
        assert (d / tcp[path]["shared_raw"] / f"ping-{path}.txt").is_file()   # pinged once, for all four
    assert leftovers() == []


IPV6_TWO_PATHS = """\
name: ipv6-two-paths
topology:
  kind: routed
  family: ipv6
  routers: [r1]
  links:
    - {name: a1, between: [h1, r1], bw: 5, delay: 5ms}
    - {name: a2, between: [h1, r1], bw: 5, delay: 5ms}
    - {name: b1, between: [r1, h2], bw: 50, delay: 1ms}
    - {name: b2, between: [r1, h2], bw: 50, delay: 1ms}
  paths:
    - {name: A, via: [a1, b1]}
    - {name: B, via: [a2, b2]}
traffic: {duration: 6}
runs: {compare: [mptcp, tcp]}
"""


def test_ipv6_only_two_paths(tmp_path):
    f = write_scenario(tmp_path / "v6.yaml", IPV6_TWO_PATHS)
    r = run_cli(str(f), "--backend", "native", "--out", str(tmp_path / "o"))
    assert r.returncode == 0, r.stdout + r.stderr
    runs = {x["mode"]: x for x in json.loads(next((tmp_path / "o" / "ipv6-two-paths").iterdir()).joinpath(
        "results.json").read_text())["runs"]}
    mp, tcp = runs["mptcp"], runs["tcp"]
    assert mp["metrics"]["subflows"] == 2 and all(s["family"] == "ipv6" for s in mp["subflow_list"])
    assert mp["metrics"]["throughput_mbps"] >= 1.6 * tcp["metrics"]["throughput_mbps"]
    assert all(p["bytes_received"] > 500_000 for p in mp["paths"].values())
    assert leftovers() == []
