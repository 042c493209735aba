"""runs.tcp_together: the TCP baselines of link-disjoint paths as one job, one record per path (no root)."""
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from runners.collect.pings import parse_ping_after_warmup
from runners.traffic import iperf3
from runners.collect.record import NAMESPACE_METRICS, Observations, RunIdentity, Setting, build
from runners.results.store import run_key
from runners.runset.jobs import plan_jobs, runs_in
from runners.runset.estimate import job_table, Costs
from runners.results.store import ResultStore
from runners.runset.session import estimate, job_seconds, open_run_set
from runners.traffic import TrafficReport, TrafficRun
from runners.traffic.iperf3 import Iperf3Tool
from scenarios.spec.loader import ScenarioError, load_scenario, parse_experiment
from topologies.kinds import plan

from .test_record import FIX, snapshot, subflow_samples

REPO = Path(__file__).resolve().parents[2]
ROUTED = """\
name: t
topology:
  kind: routed
  routers: [r1]
  links:
    - {name: a1, between: [h1, r1], bw: 1}
    - {name: a2, between: [r1, h2], bw: 100}
    - {name: b1, between: [h1, r1], bw: 2}
    - {name: b2, between: [r1, h2], bw: 100}
  paths:
    - {name: A, via: [a1, a2]}
    - {name: B, via: [b1, b2]}
traffic: {bytes: 1MiB}
runs: {compare: [mptcp, tcp], tcp_on: every-path, tcp_together: true, repeat: 2}
"""


def experiment(text: str = ROUTED):
    return parse_experiment(text)


# ---------------------------------------------------------------- the scenario field

@pytest.mark.parametrize("change, message", [
    (("b2", "a2"), "paths A and B share link(s) a2"),
    (("tcp_on: every-path", "tcp_on: [A]"), "at least two TCP baseline paths"),
    (("compare: [mptcp, tcp], tcp_on: every-path, ", "compare: [mptcp], "), "needs tcp in runs.compare"),
    (("traffic: {bytes: 1MiB}", "traffic: {tool: command, command: {client: [\"true\"]}}"),
     "only with traffic.tool: iperf3"),
])
def test_tcp_together_is_refused_where_the_baselines_could_meet(change, message):
    text = ROUTED.replace(*change)
    if change[0] == "b2":    # path B through a2 as well: the shared link
        text = ROUTED.replace("{name: B, via: [b1, b2]}", "{name: B, via: [b1, a2]}")
    with pytest.raises(ScenarioError, match=r"runs.tcp_together \(line \d+\): .*" + re.escape(message)):
        experiment(text)


def test_tcp_together_is_refused_on_switches_where_the_links_are_unknown():
    text = (REPO / "scenarios" / "e5-exp1.yaml").read_text().replace("compare: [mptcp, tcp]",
                                                                     "compare: [mptcp, tcp]\n  tcp_together: true"
                                                                     "\n  tcp_on: every-path", 1)
    with pytest.raises(ScenarioError, match=r"runs.tcp_together \(line \d+\): not in a switched topology"):
        experiment(text)


def test_the_shipped_e3_scenarios_run_their_baselines_together():
    for fam in ("ipv4", "ipv6", "mixed"):
        sc = load_scenario(REPO / "scenarios" / f"e3-{fam}.yaml")
        assert sc.runs.tcp_together and sc.tcp_paths == ["A", "B", "C", "D"]


# ---------------------------------------------------------------- planning and resuming

def test_one_tcp_job_per_point_and_round_writes_a_record_per_path():
    exp = experiment()
    jobs = plan_jobs(exp.points, range(1, 3), seed=4)
    tcp = [j for j in jobs if j.mode == "tcp"]
    assert len(jobs) == 4 and len(tcp) == 2 and runs_in(jobs) == 6
    assert all(j.together == ("A", "B") and j.paths == ("A", "B") for j in tcp)
    assert tcp[0].keys == [("p001", tcp[0].rep, "A", "tcp"), ("p001", tcp[0].rep, "B", "tcp")]
    assert [tcp[0].alone(p).run_id for p in tcp[0].paths] == [f"r00{tcp[0].rep}-tcp-A", f"r00{tcp[0].rep}-tcp-B"]
    assert tcp[0].alone("B").together == ()


def test_a_job_run_together_with_a_record_missing_is_run_again_and_replaces_the_old(tmp_path):
    exp = experiment()
    (tmp_path / "set").mkdir()
    store = ResultStore(tmp_path / "set")
    for rep, path, mode in [(1, "A", "tcp"), (1, "B", "tcp"), (1, "A", "mptcp"), (2, "A", "tcp")]:
        store.add_run({"id": f"r00{rep}-{mode}-{path}", "repeat": rep, "primary": path, "mode": mode,
                       "status": "ok", "metrics": {"throughput_mbps": 1.0}})
    run_set = open_run_set(exp, tmp_path / "set", None, None)
    kept, todo = run_set.pending_jobs()
    assert kept == 4
    # round 2: mptcp never ran, and the TCP job lacks B's record: the whole job runs again
    assert sorted((j.rep, j.mode, j.paths) for j in todo) == [(2, "mptcp", ("A",)), (2, "tcp", ("A", "B"))]
    store.add_run({"id": "r002-tcp-A", "repeat": 2, "primary": "A", "mode": "tcp", "status": "ok",
                   "metrics": {"throughput_mbps": 2.0}})
    runs = json.loads((tmp_path / "set" / "results.json").read_text())["runs"]
    assert [r["metrics"]["throughput_mbps"] for r in runs if r["id"] == "r002-tcp-A"] == [2.0]
    assert len({run_key(r) for r in runs}) == len(runs) == 4


def test_the_estimate_counts_a_record_per_path_and_the_slowest_path_once():
    exp = experiment()
    runs, seconds = estimate(exp, 1)
    jobs = plan_jobs(exp.points, range(1, 2), 0)
    tcp = next(j for j in jobs if j.mode == "tcp")
    mptcp = next(j for j in jobs if j.mode == "mptcp")
    one_mib_at = {rate: 1024 * 1024 * 8 / (rate * 1e6) for rate in (1, 2)}
    assert runs == 3
    # together: as long as the 1 Mbit/s path's transfer; MPTCP: at most the 2 Mbit/s path's
    assert job_seconds(tcp) - job_seconds(mptcp) == pytest.approx(one_mib_at[1] - one_mib_at[2])
    assert seconds == pytest.approx(job_seconds(tcp) + job_seconds(mptcp))
    rows, _, _ = job_table(exp, 1, Costs(start=0, build=0, run_overhead=0, report=0, source="test"))
    assert rows[0].runs == 3 and rows[0].primaries == "A, B"


# ---------------------------------------------------------------- the records

def test_a_record_run_alongside_keeps_its_own_path_and_no_namespace_counters():
    raw = FIX / "tcp"
    topo = plan(load_scenario(REPO / "scenarios" / "two-paths.yaml"))
    pings = {p.name: parse_ping_after_warmup((raw / f"ping-{p.name}.txt").read_text()) for p in topo.paths}
    seen = Observations(before=snapshot(raw, "before"), after=snapshot(raw, "after"), pings=pings,
                        path_samples=[{"t": 0.0, "A": 0, "B": 0}, {"t": 1.0, "A": 125000, "B": 250000}],
                        subflow_samples=subflow_samples(raw), server_receives=True)
    report = TrafficReport.from_iperf3(iperf3.parse_iperf3((raw / "iperf3-client.json").read_text()))
    alone = build(RunIdentity("r001-tcp-A", "tcp", 1, "A", 0.0), report, seen,
                  Setting(paths=topo.paths, byte_counters="iface", fixed_size_bytes=None, n_clients=1))
    together = build(RunIdentity("r001-tcp-A", "tcp", 1, "A", 0.0), report, seen,
                     Setting(paths=(topo.path("A"),), byte_counters="iface", fixed_size_bytes=None, n_clients=1,
                             alongside=("B",)))
    assert list(together["paths"]) == ["A"] and together["paths"]["A"]["share"] == 1.0
    assert together["paths"]["A"]["throughput_mbps"] == together["metrics"]["throughput_mbps"]
    assert together["path_series_mbps"] == [{"t0": 0.0, "t": 1.0, "A": 1.0}]
    assert all(together["metrics"][k] is None for k in NAMESPACE_METRICS)
    assert alone["metrics"]["retrans_segs"] is not None and together["counters"] is None
    assert together["alongside"] == ["B"] and "nstat" in together["counters_note"]
    assert together["metrics"]["iperf_retransmits"] == alone["metrics"]["iperf_retransmits"]
    assert together["metrics"]["throughput_mbps"] == alone["metrics"]["throughput_mbps"]


# ---------------------------------------------------------------- the tool's flows

class FakeStore:
    def __init__(self):
        self.saved: dict[tuple[str, str], str] = {}

    def save_raw(self, run_id, name, text):
        self.saved[(run_id, name)] = text


def fake_host(clients=("h1",)):
    nodes = [SimpleNamespace(name=n) for n in clients]
    return SimpleNamespace(client=nodes[0], clients=nodes, store=FakeStore(), probe=SimpleNamespace(facts={}))


def test_a_flow_per_path_from_the_one_client_each_with_its_own_port_and_folder():
    host = fake_host()
    tool = Iperf3Tool(host)
    req = TrafficRun("r001-tcp-A", "A", False, None, True, {"A": "r001-tcp-A", "B": "r001-tcp-B"})
    flows = tool.flows(req)
    assert [(f.node.name, f.port, f.path, f.tag, f.where) for f in flows] == [
        ("h1", 5201, "A", "A", "path A"), ("h1", 5202, "B", "B", "path B")]
    tool._save(req, "B", b"{client B}", b"", b"{server B}", b"")
    assert host.store.saved == {("r001-tcp-B", "iperf3-client.json"): "{client B}",
                                ("r001-tcp-B", "iperf3-server.json"): "{server B}"}


def test_several_clients_keep_one_flow_each_over_the_primary_and_suffixed_files():
    host = fake_host(("h2", "h3"))
    tool = Iperf3Tool(host)
    req = TrafficRun("r001-mptcp-A", "A", True, None, True)
    assert [(f.node.name, f.port, f.path, f.tag) for f in tool.flows(req)] == [
        ("h2", 5201, "A", "h2"), ("h3", 5202, "A", "h3")]
    tool._save(req, "h3", b"c", b"", b"s", b"oops")
    assert set(host.store.saved) == {("r001-mptcp-A", "iperf3-client-h3.json"),
                                     ("r001-mptcp-A", "iperf3-server-h3.json"),
                                     ("r001-mptcp-A", "iperf3-stderr-h3.txt")}
    assert [f.tag for f in Iperf3Tool(fake_host()).flows(req)] == [""]


def test_tables_and_progress_lines_show_a_count_not_counted_as_a_dash():
    from runners.results.derived import counts_text
    from runners.console.progress import describe_result

    m = {"throughput_mbps": 1.91, "subflows": 1, **dict.fromkeys(NAMESPACE_METRICS)}
    assert counts_text(m) == ("-/-", "-")
    assert describe_result({"metrics": m}) == "1.91 Mbit/s, subflows 1, OFO tcp/mptcp -/-, retrans -"
    assert counts_text({"ofo_tcp": 0, "ofo_mptcp": 12, "retrans_segs": 3}) == ("0/12", "3")
