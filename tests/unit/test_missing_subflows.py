"""A run with fewer subflows than its plan gives is flagged: the expected count from the plan (endpoints,
signal ports, limits, families), the shortfall in the record, progress line, summary, runs.csv and
`expect`. The record side is rebuilt from a real run's raw files (tests/fixtures/record, TCG VM, 6.1)."""
import csv
import io
from pathlib import Path

import pytest

from runners.collect.pings import parse_ping_after_warmup
from runners.linux import ss
from runners.traffic import iperf3
from runners.analysis.summary import summary
from runners.analysis.verdicts import FAIL, INCONCLUSIVE, PASS, evaluate
from runners.collect.record import Observations, RunIdentity, Setting, build
from runners.collect.subflows import expected_subflows
from runners.console.progress import describe_result
from runners.results.table import render_csv
from runners.traffic import TrafficReport
from scenarios.spec.expect import parse_check
from scenarios.spec.loader import ScenarioError, load_scenario, parse_scenario
from topologies.kinds import plan

from .test_record import FIX, snapshot

REPO = Path(__file__).resolve().parents[2]
TWO_PATHS = (REPO / "scenarios" / "two-paths.yaml").read_text()


def expected(text_or_file, primary: str):
    sc = load_scenario(text_or_file) if isinstance(text_or_file, Path) else parse_scenario(text_or_file)
    return expected_subflows(sc, plan(sc), primary)


def two_paths(extra: str = "", paths: int = 2) -> str:
    lines = "".join(f"    - {{name: {chr(65 + i)}, bw: 10}}\n" for i in range(paths))
    return f"name: t\ntopology:\n  kind: dual-homed\n  paths:\n{lines}{extra}"


# ---------------------------------------------------------------- what the plan should get

@pytest.mark.parametrize("extra,paths,count,hows", [
    ("", 2, 2, ["signal"]),                                                     # the default: B announced
    ("mptcp: {endpoints: subflow}\n", 2, 2, ["subflow"]),                       # B opened by the client
    ("mptcp: {endpoints: none}\n", 2, 1, []),                                   # the initial subflow only
    ("mptcp: {limits: {subflows: 0}}\n", 2, 1, ["signal"]),                     # planned, but the limit forbids it
    ("mptcp: {limits: {add_addr_accepted: 0}}\n", 2, 1, ["signal"]),            # announced, never accepted
    ("mptcp: {endpoints: subflow, limits: {add_addr_accepted: 0}}\n", 2, 2, ["subflow"]),   # no ADD_ADDR needed
    ("", 3, 3, ["signal", "signal"]),
    ("mptcp: {limits: {subflows: 1}}\n", 3, 2, ["signal", "signal"]),
    ("mptcp: {backup: [B]}\n", 2, 2, ["signal"]),                               # a backup subflow is a subflow
    ("mptcp: {signal_ports: [5300]}\n", 2, 3, ["port", "signal"]),
    ("mptcp: {endpoints: none, signal_ports: [5300]}\n", 2, 2, ["port"]),       # ports are announced even so
])
def test_the_expected_count_follows_endpoints_ports_and_limits(extra, paths, count, hows):
    e = expected(two_paths(extra, paths), "A")
    assert (e.count, [j.how for j in e.joins], e.unknown) == (count, hows, None)


def test_the_expected_count_of_shipped_scenarios():
    assert expected(REPO / "scenarios" / "two-paths.yaml", "B").count == 2
    # switched, one address pair: the second subflow is the announced port (lab 5, E2)
    lab5 = expected(REPO / "labs" / "lab5-steering.yaml", "main")
    assert lab5.count == 2 and lab5.joins[0].describe() == "port 5300 of path main's server address 10.0.1.1"
    assert expected(REPO / "scenarios" / "e3-ipv4.yaml", "A").count == 4
    # an IPv4 handshake on a v4-mapped socket, then four IPv6 joins: five (docs/experiments.md measured five)
    assert expected(REPO / "scenarios" / "e3-mixed.yaml", "app").count == 5
    assert expected(REPO / "scenarios" / "e5-exp2.yaml", "A").count == 2     # per client, four clients


def test_routed_paths_sharing_an_address_join_by_the_address_that_differs():
    """Two client interfaces to one server interface: the client opens the second subflow, in either mode."""
    text = """\
name: t
topology:
  kind: routed
  routers: [r1]
  links:
    - {name: c1, between: [h1, r1], bw: 10}
    - {name: c2, between: [h1, r1], bw: 10}
    - {name: s1, between: [r1, h2], bw: 10}
  paths:
    - {name: A, via: [c1, s1]}
    - {name: B, via: [c2, s1]}
"""
    e = expected(text, "A")
    assert (e.count, [j.how for j in e.joins]) == (2, ["subflow"])
    assert e.joins[0].describe() == "path B's client address 10.1.2.1"


DUAL_STACK = """\
name: t
topology:
  kind: routed
  family: dual
  routers: [r1]
  links:
    - {name: c1, between: [h1, r1], bw: 10}
    - {name: s1, between: [r1, h2], bw: 10}
  paths:
    - {name: v4, via: [c1, s1], family: ipv4}
    - {name: v6, via: [c1, s1], family: ipv6}
"""
COMMAND_MIXED = DUAL_STACK + """\
traffic:
  tool: command
  command:
    server: [srv, "{port}"]
    client: [cli, "{server_ip}"]
    ready_port: 5201
"""


def test_a_commands_socket_family_makes_joins_of_the_other_family_unknown():
    """iperf3's client takes a v4-mapped IPv6 socket so that IPv6 subflows may join; a command's socket is
    its own, and an IPv4 one never adds an IPv6 subflow: the count is not guessed."""
    assert expected(DUAL_STACK, "v4").count == 2 and expected(DUAL_STACK, "v6").count == 2
    e = expected(COMMAND_MIXED, "v4")
    assert e.count is None
    assert e.unknown == ("path v6 is not ipv4 like the primary path v4: whether it can join depends on the "
                         "address family of command's socket")
    assert expected(COMMAND_MIXED, "v6").unknown.startswith("path v4 is not ipv6 like the primary path v6")


# ---------------------------------------------------------------- the run's record

def recorded_run(mode="mptcp", drop_path_b=False, tool="iperf3", scenario_text=TWO_PATHS):
    """The recorded run of two-paths.yaml (2 subflows); `drop_path_b`: as if no join had reached B, the
    way a command server bound to {server_ip} lost every join (the client's `ss` then lists A's only)."""
    raw = FIX / mode
    sc = parse_scenario(scenario_text)
    topo = plan(sc)
    text = (raw / "ss-subflows.txt").read_text()
    if drop_path_b:
        text = "\n".join(line for line in text.splitlines() if "10.0.2." not in line)
    samples = [{"subflows": ss.parse_ss_subflows("Netid" + part)} for part in text.split("Netid")[1:]]
    pings = {p.name: parse_ping_after_warmup((raw / f"ping-{p.name}.txt").read_text()) for p in topo.paths}
    seen = Observations(before=snapshot(raw, "before"), after=snapshot(raw, "after"), pings=pings,
                        path_samples=[], subflow_samples=samples, server_receives=True)
    report = TrafficReport.from_iperf3(iperf3.parse_iperf3((raw / "iperf3-client.json").read_text()))
    setting = Setting(paths=topo.paths, byte_counters="iface", fixed_size_bytes=None, n_clients=1,
                      subflows=expected_subflows(sc, topo, "A") if mode == "mptcp" else None, tool=tool)
    return build(RunIdentity(f"r001-{mode}-A", mode, 1, "A", 0.0), report, seen, setting)


def test_a_run_with_every_subflow_has_none_missing():
    r = recorded_run()
    assert (r["metrics"]["subflows"], r["metrics"]["subflows_expected"], r["metrics"]["missing_subflows"]) == (2, 2, 0)
    assert "subflow_shortfall" not in r
    t = recorded_run("tcp")
    assert (t["metrics"]["subflows_expected"], t["metrics"]["missing_subflows"]) == (1, 0)


def test_a_run_that_lost_its_join_says_which_and_what_nstat_saw():
    r = recorded_run(drop_path_b=True)
    assert (r["metrics"]["subflows"], r["metrics"]["subflows_expected"], r["metrics"]["missing_subflows"]) == (1, 2, 1)
    # this recorded run's nstat: two ADD_ADDRs (iperf3's control and data connections), two join SYNs
    assert r["subflow_shortfall"] == ("no join reached path B's server address 10.0.2.2 (ADD_ADDRs the client "
                                      "received: 2, join SYNs the server received: 2, for every MPTCP connection "
                                      "of the run)")
    warning = "expected 2 subflows, got 1 on r001-mptcp-A: no join reached path B's server address 10.0.2.2 ("
    assert describe_result(r).startswith("18.58 Mbit/s, subflows 1 of 2 expected (missing 1), OFO")
    text = summary([r, recorded_run("tcp")])
    assert f"warning: {warning}" in text and text.count("warning:") == 1
    assert " 1 of 2 " in text   # the table's subflows column


def test_a_command_tool_that_lost_a_join_is_told_to_listen_on_the_wildcard_address():
    r = recorded_run(drop_path_b=True, tool="command")
    assert r["subflow_shortfall"].endswith("; traffic.tool command: the server must listen on every path's "
                                           "address (the wildcard address, 0.0.0.0 or ::), not on {server_ip} alone")


def test_an_unknown_expected_count_is_null_and_says_why():
    r = recorded_run(scenario_text=two_paths("mptcp: {endpoints: none}\n"))
    assert (r["metrics"]["subflows_expected"], r["metrics"]["missing_subflows"]) == (1, 0)   # 2 seen: not missing
    sc = parse_scenario(COMMAND_MIXED)
    raw = FIX / "mptcp"   # the counters of the recorded run; the paths' own are not what this is about
    r = build(RunIdentity("r001-mptcp-v4", "mptcp", 1, "v4", 0.0), TrafficReport(seconds=1.0),
              Observations(before=snapshot(raw, "before"), after=snapshot(raw, "after"), pings={}, path_samples=[],
                           subflow_samples=[], server_receives=True),
              Setting(paths=(), byte_counters="nft", fixed_size_bytes=None, n_clients=1, tool="command",
                      subflows=expected_subflows(sc, plan(sc), "v4")))
    assert (r["metrics"]["subflows_expected"], r["metrics"]["missing_subflows"]) == (None, None)
    assert r["subflows_expected_unknown"].startswith("path v6 is not ipv4")


# ---------------------------------------------------------------- runs.csv and expect

def test_runs_csv_has_the_expected_count_and_the_shortfall():
    rows = list(csv.DictReader(io.StringIO(render_csv([recorded_run(drop_path_b=True), recorded_run("tcp")]))))
    got = {(r["run_id"], r["metric"]): r["value"] for r in rows if r["metric"] in ("subflows_expected",
                                                                                  "missing_subflows")}
    assert got == {("r001-mptcp-A", "subflows_expected"): "2", ("r001-mptcp-A", "missing_subflows"): "1",
                   ("r001-tcp-A", "subflows_expected"): "1", ("r001-tcp-A", "missing_subflows"): "0"}


def missing(values):
    return [{"mode": "mptcp", "primary": "A", "status": "ok", "metrics": {"missing_subflows": v}} for v in values]


@pytest.mark.parametrize("check", ["mptcp.missing_subflows == 0", "mptcp.missing_subflows <= 0"])
def test_an_expectation_on_missing_subflows(check):
    c = parse_check(check)
    assert evaluate(c, missing([0, 0, 0, 0])).outcome == PASS
    assert evaluate(c, missing([1, 1, 1, 1])).outcome == FAIL
    assert evaluate(c, missing([0, 1, 0, 0, 0, 0])).outcome == INCONCLUSIVE   # lab 5's one run in six
    assert evaluate(c, missing([0])).outcome == INCONCLUSIVE                  # one run: no interval
    assert evaluate(c, missing([None, None])).outcome == INCONCLUSIVE         # not known: not counted


def test_a_scenario_may_expect_no_missing_subflows_and_a_typo_is_refused():
    s = parse_scenario(TWO_PATHS + "expect:\n  - {name: all-joined, check: \"mptcp.missing_subflows == 0\"}\n")
    assert str(parse_check(s.expect[0].check)) == "mptcp.missing_subflows == 0"
    with pytest.raises(ScenarioError, match="unknown metric 'missing_subflow'"):
        parse_scenario(TWO_PATHS + "expect:\n  - check: \"mptcp.missing_subflow == 0\"\n")
    with pytest.raises(ScenarioError, match="is not an expectation"):
        parse_scenario(TWO_PATHS + "expect:\n  - check: \"mptcp.missing_subflows = 0\"\n")


def test_the_runner_hands_each_run_what_its_plan_should_get():
    """The native runner's record setting: the expected subflows for an MPTCP run (none for TCP), the tool."""
    from runners.pipeline.one_run import record_setting
    from runners.runset.jobs import plan_jobs
    from scenarios.spec.loader import load_experiment

    exp = load_experiment(REPO / "labs" / "lab5-steering.yaml")
    sc = exp.points[0].scenario
    jobs = {j.mode: j for j in plan_jobs(exp.points[:1], range(1, 2), seed=1)}
    mptcp = record_setting(sc, plan(sc), jobs["mptcp"], 1, ())
    assert (mptcp.subflows.count, mptcp.tool) == (2, "iperf3")
    assert record_setting(sc, plan(sc), jobs["tcp"], 1, ()).subflows is None


def test_the_scenario_format_lists_every_metric_expect_knows():
    from scenarios.spec.expect import METRICS

    text = (REPO / "docs" / "scenario-format.md").read_text()
    section = text[text.index("### Expectations (`expect`)"):]
    assert [m for m in METRICS if f"`{m}`" not in section] == []
