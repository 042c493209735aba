"""The run record, rebuilt from a real run's raw counters (TCG VM, kernel 6.1, 2026-11-22), must equal
what that run stored: collect.record.build is pure, so the same inputs give the same record."""
import calendar
import json
import time
from pathlib import Path

import pytest
from scenarios.spec.loader import load_scenario
from topologies.kinds import plan

from runners.collect.pings import parse_ping_after_warmup
from runners.collect.record import Observations, RunIdentity, Setting, build
from runners.collect.subflows import expected_subflows
from runners.linux import procfs, rtnetlink, ss
from runners.traffic import TrafficReport, iperf3

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "record"
REPO = Path(__file__).resolve().parents[2]


def snapshot(raw: Path, label: str) -> dict:
    snap = {"qdiscs": {}}
    for node, qdiscs in json.loads((raw / f"qdiscs-{label}.json").read_text()).items():
        # recorded when tc -s -j gave them (its text per node); rtnetlink's list since 2026-11-25
        counts_by_dev = (rtnetlink.parse_qdisc_stats_by_dev(qdiscs) if isinstance(qdiscs, str)
                         else rtnetlink.root_qdisc_counts(qdiscs))
        for dev, counts in counts_by_dev.items():
            snap["qdiscs"][(node, dev)] = counts
    for side in ("client", "server"):
        snap[f"{side}_nstat"] = procfs.parse_nstat((raw / f"nstat-{side}-{label}.txt").read_text())
        snap[f"{side}_links"] = procfs.parse_net_dev((raw / f"netdev-{side}-{label}.txt").read_text())
    return snap


def subflow_samples(raw: Path) -> list[dict]:
    text = (raw / "ss-subflows.txt").read_text()
    return [{"subflows": ss.parse_ss_subflows("Netid" + part)} for part in text.split("Netid")[1:]]


def recorded(mode: str, samples=None):
    raw = FIX / mode
    topo = plan(load_scenario(REPO / "scenarios" / "two-paths.yaml"))
    pings = {p.name: parse_ping_after_warmup((raw / f"ping-{p.name}.txt").read_text()) for p in topo.paths}
    seen = Observations(before=snapshot(raw, "before"), after=snapshot(raw, "after"), pings=pings,
                        path_samples=[], subflow_samples=subflow_samples(raw) if samples is None else samples,
                        server_receives=True)
    report = TrafficReport.from_iperf3(iperf3.parse_iperf3((raw / "iperf3-client.json").read_text()))
    return build(RunIdentity("r001-mptcp-A", mode, 1, "A", 0.0), report, seen,
                 Setting(paths=topo.paths, byte_counters="iface", fixed_size_bytes=None, n_clients=1))


def test_a_connection_no_ss_sample_saw_has_an_unknown_subflow_count():
    """Under TCG with four tcpdumps, one `ss` took 7.5 s and ended after the transfer: 0 was wrong."""
    assert recorded("mptcp", samples=[{"subflows": []}])["metrics"]["subflows"] is None
    assert recorded("mptcp")["metrics"]["subflows"] == 2
    assert recorded("tcp", samples=[])["metrics"]["subflows"] == 1


@pytest.mark.parametrize("mode", ["mptcp", "tcp"])
def test_the_record_of_a_recorded_run_is_rebuilt_exactly(mode):
    raw = FIX / mode
    expected = json.loads((raw / "expected.json").read_text())
    topo = plan(load_scenario(REPO / "scenarios" / "two-paths.yaml"))
    pings = {p.name: parse_ping_after_warmup((raw / f"ping-{p.name}.txt").read_text()) for p in topo.paths}
    seen = Observations(before=snapshot(raw, "before"), after=snapshot(raw, "after"), pings=pings,
                        path_samples=[], subflow_samples=subflow_samples(raw), server_receives=True)   # upload
    started = calendar.timegm(time.strptime(expected["started_utc"], "%Y-%m-%dT%H:%M:%SZ"))
    who = RunIdentity(expected["id"], mode, expected["repeat"], expected["primary"], started)
    report = TrafficReport.from_iperf3(iperf3.parse_iperf3((raw / "iperf3-client.json").read_text()))
    scenario = load_scenario(REPO / "scenarios" / "two-paths.yaml")
    subflows = expected_subflows(scenario, topo, "A") if mode == "mptcp" else None
    record = build(who, report, seen, Setting(paths=topo.paths, byte_counters="iface", fixed_size_bytes=None,
                                              n_clients=1, subflows=subflows))
    for key in ("point", "point_label", "params", "kernel", "path_series_mbps"):
        expected.pop(key)   # added by the runner; the series comes from samples not kept raw
    # recorded before runs knew what their plan gives: two subflows for MPTCP, one for TCP, and none missing
    assert (record["metrics"].pop("subflows_expected"), record["metrics"].pop("missing_subflows")) == (
        (2, 0) if mode == "mptcp" else (1, 0))
    assert record.pop("path_series_mbps") == []
    # since this run was recorded, a path's throughput is its share of the goodput (the recorded
    # value, wire bytes over iperf3's seconds, was 10.17 on a 10 Mbit/s path), and says so
    goodput = expected["metrics"]["throughput_mbps"]
    for p in expected["paths"].values():
        p["throughput_mbps"] = p["share"] * goodput
    assert record.pop("path_throughput_basis").startswith("share of the connection's goodput")
    assert record.pop("path_series_basis") == "receiver's interface counters: wire bytes"
    assert record.pop("intervals_side") == "receiver's"
    assert json.loads(json.dumps(record)) == expected
    assert record["metrics"]["subflows"] == (2 if mode == "mptcp" else 1)
    assert sum(p["throughput_mbps"] for p in record["paths"].values()) == pytest.approx(goodput)
    assert all(p["throughput_mbps"] <= 10.0 for p in record["paths"].values())   # both paths: 10 Mbit/s


def test_per_path_series_from_cumulative_samples():
    seen = [{"t": 0.0, "A": 0, "B": 0}, {"t": 1.0, "A": 1_250_000, "B": 250_000}, {"t": 1.0, "A": 1, "B": 1}]
    assert build.__globals__["series_from_samples"](seen, ["A", "B"]) == [{"t0": 0.0, "t": 1.0, "A": 10.0, "B": 2.0}]
