"""A run's fidelity (did the emulator keep up?): the machine's counters parsed, the sampler, the judgement on
runs recorded in the TCG micro-VM (tests/fixtures/fidelity), and where the verdict shows: runs.csv, the
summary, report.html, JUnit, and the verdicts that leave unfaithful runs out."""
import copy
import csv
import gzip
import io
import json
import time
from pathlib import Path

import pytest
import xmlschema
from scenarios.spec.expect import parse_check
from scenarios.spec.loader import parse_experiment
from topologies.kinds import plan as make_plan

from runners.analysis.junit import render_junit
from runners.analysis.page import render_html
from runners.analysis.summary import summary
from runners.analysis.verdicts import INCONCLUSIVE, PASS, evaluate
from runners.collect.fidelity_sampler import FidelitySampler, configured
from runners.collect.pings import parse_ping_after_warmup
from runners.linux import procfs
from runners.results import fidelity
from runners.results.fidelity import OK, UNFAITHFUL, WARN, Evidence, judge
from runners.results.table import render_csv

FIX = Path(__file__).resolve().parents[1] / "fixtures"
FID = FIX / "fidelity"
REPO = FIX.parents[1]

PROC_STAT = """cpu  276866 299 82011 294120 2277 0 845 11729 0 0
cpu0 129719 159 39933 157757 344 0 165 5774 0 0
cpu1 147147 139 42077 136362 1932 0 679 5954 0 0
intr 4349075 0 0
ctxt 123
"""


# ---------------------------------------------------------------- the machine's counters

def test_proc_stat_gives_each_cpus_ticks():
    assert procfs.parse_cpu_ticks(PROC_STAT) == [[129719, 159, 39933, 157757, 344, 0, 165, 5774],
                                                 [147147, 139, 42077, 136362, 1932, 0, 679, 5954]]
    with pytest.raises(ValueError, match="no per-CPU"):
        procfs.parse_cpu_ticks("cpu  1 2 3 4 5 6 7 8\n")
    assert len(procfs.cpu_ticks()) >= 1 and all(len(c) == 8 for c in procfs.cpu_ticks())   # this machine's


def test_softnet_stat_sums_the_cpus_drops_and_squeezes():
    text = ("00000012 00000000 00000000 00000000 00000000\n"
            "0000303c 00000002 00000001 00000000 00000000\n")
    assert procfs.parse_softnet(text) == {"processed": 0x12 + 0x303C, "dropped": 2, "time_squeeze": 1}
    with pytest.raises(ValueError):
        procfs.parse_softnet("zz 1 2\n")


def test_a_debug_kernel_is_known_by_its_symbols_as_the_mptcp_selftests_know_it():
    plain = b"ffffffff81000000 T _text\nffffffff81001000 t kmemleak_initialize\nffffffffc0000000 t x_kasan_init [m]\n"
    assert procfs.parse_debug_symbols(plain) == []
    debug = plain + b"ffffffff82000000 T kmemleak_init\nffffffff82000010 t lockdep_init\nffffffff82000020 T prove_locking\n"
    assert procfs.parse_debug_symbols(debug) == ["kmemleak", "lockdep"]
    assert procfs.parse_debug_symbols(b"ffffffffc0000000 t kasan_init\t[kasan_mod]\n") == ["KASAN"]
    assert procfs.kernel_debug_options() == []   # this machine's Debian kernel is no debug kernel


def test_a_debug_kernel_is_known_by_its_configuration_first_and_by_its_symbols_without_one(tmp_path):
    """The symbols took 0.22-0.26 s in a TCG guest, the configuration 0.02-0.03 s; it says the same, when found."""
    plain = "CONFIG_KASAN_SHADOW_OFFSET=0xdffffc0000000000\n# CONFIG_KASAN is not set\nCONFIG_LOCKDEP_SUPPORT=y\n"
    debug = plain + "CONFIG_PROVE_LOCKING=y\nCONFIG_LOCKDEP=y\nCONFIG_DEBUG_KMEMLEAK=y\nCONFIG_KASAN=y\n"
    assert procfs.parse_debug_config(plain) == []
    assert procfs.parse_debug_config(debug) == ["kmemleak", "lockdep", "KASAN"]
    kallsyms = tmp_path / "kallsyms"
    kallsyms.write_bytes(b"ffffffff82000010 t lockdep_init\n")
    (tmp_path / "config.gz").write_bytes(gzip.compress(debug.encode()))
    (tmp_path / "config").write_text(plain)
    (tmp_path / "broken.gz").write_bytes(b"not gzip")
    assert procfs.kernel_debug_options(str(kallsyms), (str(tmp_path / "config.gz"),)) == ["kmemleak", "lockdep", "KASAN"]
    assert procfs.kernel_debug_options(str(kallsyms), (str(tmp_path / "absent.gz"), str(tmp_path / "config"))) == []
    assert procfs.kernel_debug_options(str(kallsyms), (str(tmp_path / "broken.gz"), str(tmp_path / "absent"))) \
        == ["lockdep"]                                      # no configuration to read: the symbols
    assert procfs.kernel_debug_options(configs=()) == []    # this machine's kernel by its symbols, as by its config


# ---------------------------------------------------------------- the sampler

def test_the_sampler_reads_cpus_and_shaped_qdiscs_on_the_runs_clock():
    sent = {"n": 0}

    def read(node, devs):
        sent["n"] += 12500
        return [{"kind": "noqueue", "dev": "lo", "root": True},
                {"kind": "netem", "dev": f"{node}-eth0", "root": True, "bytes": sent["n"], "packets": 1, "drops": 0,
                 "backlog": 3000, "qlen": 2},
                {"kind": "netem", "dev": f"{node}-eth1", "root": True, "bytes": 0}]   # not shaped in this plan

    s = FidelitySampler(read, [("h1", "h1-eth0"), ("h2", "h2-eth0")], interval=0.05)
    s.begin(time.monotonic())
    time.sleep(0.3)
    s.stop()
    out = s.samples()
    assert set(out["qdiscs"]) == {"h1/h1-eth0", "h2/h2-eth0"} and len(out["cpu"]) >= 4
    ts = [row[0] for row in out["cpu"]]
    assert ts == sorted(ts) and 0 <= ts[0] < 0.05 and out["softnet"]["before"] and out["softnet"]["after"]
    assert out["qdiscs"]["h1/h1-eth0"][0][1:] == [12500, 1, 0, 3000, 2]
    assert json.loads(json.dumps(out)) == out
    s.stop()   # twice: nothing happens


def test_switches_in_one_namespace_are_read_once_per_sample_and_kept_per_switch():
    asked = []

    def read(node, devs):
        asked.append((node, tuple(sorted(devs))))
        return [{"kind": "netem", "dev": d, "root": True, "bytes": 1} for d in sorted(devs)]

    s = FidelitySampler(read, [("s1", "s1-eth2"), ("s2", "s2-eth1")], interval=0.05, namespace_of=lambda n: "root")
    s.begin(time.monotonic())
    time.sleep(0.2)
    s.stop()
    assert asked and set(asked) == {("s1", ("s1-eth2", "s2-eth1"))}      # one read a sample, for both
    assert set(s.samples()["qdiscs"]) == {"s1/s1-eth2", "s2/s2-eth1"}


def test_a_sampler_turned_off_or_never_begun_has_no_samples():
    off = FidelitySampler(lambda n, d: [], [], on=False)
    off.begin(time.monotonic())
    off.stop()
    assert off.samples() is None and not off.is_alive()
    never = FidelitySampler(lambda n, d: [], [])
    never.stop()
    assert never.samples() is None


def test_a_failing_read_is_kept_as_an_error_and_sampling_goes_on():
    def read(node, devs):
        raise OSError("gone")

    s = FidelitySampler(read, [("h1", "h1-eth0")], interval=0.05)
    s.begin(time.monotonic())
    time.sleep(0.15)
    s.stop()
    assert s.samples()["errors"] and "gone" in s.samples()["errors"][0] and len(s.samples()["cpu"]) >= 2


def test_the_plans_shaping_gives_directions_and_configured_rtts():
    exp = parse_experiment((REPO / "scenarios" / "two-paths.yaml").read_text())
    directions, paths = configured(make_plan(exp.points[0].scenario))
    assert {d["id"] for d in directions} == {"h1/h1-eth0", "h2/h2-eth0", "h1/h1-eth1", "h2/h2-eth1"}
    a = next(d for d in directions if d["id"] == "h1/h1-eth0")
    assert a["rate_mbit"] == 10 and a["delay_ms"] == 15 and a["paths"] == ["A"] and a["limit_pkts"] > 100
    assert paths["A"]["rtt_ms"] == 30 and paths["A"]["echo_ms"] == pytest.approx(2 * 98 * 8 / 1e4)


# ---------------------------------------------------------------- the judgement, check by check

def two_path_evidence(**kw) -> Evidence:
    exp = parse_experiment((REPO / "scenarios" / "two-paths.yaml").read_text())
    directions, paths = configured(make_plan(exp.points[0].scenario))
    pings = {p: {"rtt_min_ms": 31.4} for p in ("A", "B")}
    return Evidence(directions=directions, paths=paths, pings=kw.pop("pings", pings), **kw)


def test_delay_floor_against_the_configured_rtt():
    assert judge(two_path_evidence())["status"] == OK   # +1.2 ms above 30.2: the TCG guest's usual
    # two shaped hops: warn beyond 3 ms + 1 ms per hop + 2 %, unfaithful beyond 10 ms + 2 ms per hop + 10 %
    assert judge(two_path_evidence(pings={"A": {"rtt_min_ms": 35.5}, "B": {"rtt_min_ms": 31.0}}))["status"] == OK
    warn = judge(two_path_evidence(pings={"A": {"rtt_min_ms": 36.0}, "B": {"rtt_min_ms": 31.0}}))
    assert warn["status"] == WARN and "path A's RTT floor 36 ms" in warn["reasons"][0]
    below = judge(two_path_evidence(pings={"A": {"rtt_min_ms": 20.0}, "B": {"rtt_min_ms": None}}))
    assert below["status"] == UNFAITHFUL and "below it" in below["reasons"][0] and below["levels"] == [UNFAITHFUL]
    assert any("path B's RTT not judged: no echo came back" in n for n in below["notes"])
    far = judge(two_path_evidence(pings={"A": {"rtt_min_ms": 47.5}, "B": {"rtt_min_ms": 31.0}}))
    assert far["status"] == UNFAITHFUL and far["checks"]["delay"]["A"]["excess_ms"] == pytest.approx(47.5 - 30 - 0.157, abs=0.001)
    assert judge(two_path_evidence(pings={"A": {"rtt_min_ms": 47.0}, "B": {"rtt_min_ms": 31.0}}))["status"] == WARN


def test_recorded_pings_of_the_tcg_guest_are_within_the_tolerance():
    """The pings of a failover run recorded in the TCG micro-VM (20 ms one way, 40 ms RTT)."""
    pings = {p: parse_ping_after_warmup((FID / f"ping-{p}.txt").read_text(), warmup=0) for p in "AB"}
    paths = {p: {"rtt_ms": 40.0, "echo_ms": 0.157} for p in "AB"}
    out = judge(Evidence(directions=[], paths=paths, pings=pings))
    assert out["status"] == OK and 0.5 < out["checks"]["delay"]["A"]["excess_ms"] < 3


def counters(sent: int, dropped: int) -> tuple[dict, dict]:
    return {"h1/h1-eth0": {"packets": 100, "drops": 1}}, {"h1/h1-eth0": {"packets": 100 + sent, "drops": 1 + dropped}}


def lossy(loss: float, sent: int, dropped: int, **kw) -> Evidence:
    d = {"id": "h1/h1-eth0", "rate_mbit": 10, "delay_ms": 5, "loss_pct": loss, "limit_pkts": 105, "paths": ["A"]}
    before, after = counters(sent, dropped)
    return Evidence(directions=[d], paths={}, pings={}, qdisc_before=before, qdisc_after=after, **kw)


def test_netem_drops_against_the_configured_loss():
    ok = judge(lossy(5, 9515, 485))                   # 4.85 % for 5 %: one segment per packet
    assert ok["status"] == OK and ok["checks"]["loss"]["h1/h1-eth0"]["netem_pct"] == pytest.approx(4.85)
    few = judge(lossy(5, 9700, 300))                  # 3 %: loss applied to fewer, larger packets
    assert few["status"] == UNFAITHFUL and "netem dropped 3.00% of 10000 packets" in few["reasons"][0]
    assert judge(lossy(5, 100, 20))["checks"]["loss"] == {}   # too few packets to judge


def queue_series(qlen_max: int, n: int = 40) -> dict:
    rows = [[round(0.1 * k, 2), 125000 * k, 85 * k, 0, 1000, min(qlen_max, 2 * k)] for k in range(n)]
    return {"cpu": [], "qdiscs": {"h1/h1-eth0": rows}}


def test_drops_beyond_the_loss_are_the_queues_only_when_it_came_near_its_limit():
    # 2 % dropped, no loss configured: a queue that reached 100 of 105 packets explains them
    assert judge(lossy(0, 9800, 200, samples=queue_series(100)))["status"] == OK
    unexplained = judge(lossy(0, 9800, 200, samples=queue_series(10)))
    assert unexplained["status"] == WARN and "never passed 10 of 105 packets" in unexplained["reasons"][0]
    assert judge(lossy(0, 9800, 200))["status"] == OK   # without samples the queue cannot be ruled out


def test_a_backlogged_direction_must_send_at_its_rate():
    d = {"id": "h1/h1-eth0", "rate_mbit": 10, "delay_ms": 5, "loss_pct": 0, "limit_pkts": 105, "paths": ["A"]}
    floor = 10e6 / 8 * 0.005 + 2 * 1514

    def series(mbit: float, backlog: float) -> dict:
        return {"cpu": [], "qdiscs": {"h1/h1-eth0": [[0.1 * k, int(mbit * 1e6 / 8 * 0.1 * k), k, 0, int(backlog), 50]
                                                      for k in range(30)]}}

    at_rate = judge(Evidence(directions=[d], paths={}, pings={}, samples=series(10.0, floor + 1)))
    assert at_rate["status"] == OK and at_rate["checks"]["shaping"]["h1/h1-eth0"]["rate_ratio"] == pytest.approx(1, 1e-3)
    slow = judge(Evidence(directions=[d], paths={}, pings={}, samples=series(8.0, floor + 1)))
    # each backlogged stretch counts from its delay and one sample on: 0.2 s to 2.9 s
    assert slow["status"] == UNFAITHFUL and "h1/h1-eth0 (path A) sent 8 Mbit/s while backlogged (2.7 s), 80%" \
        in slow["reasons"][0]
    idle = judge(Evidence(directions=[d], paths={}, pings={}, samples=series(8.0, floor - 100)))
    assert idle["status"] == OK and idle["checks"]["shaping"]["h1/h1-eth0"]["backlogged_s"] == 0
    # a run's changes reshape the path: only the samples before the first one are held to its rate
    events = {"changes": [{"event": "x", "applied_s": 1.05, "drift_ms": 5}], "trace_steps": []}
    early = judge(Evidence(directions=[d], paths={}, pings={}, samples=series(8.0, floor + 1), events=events))
    assert early["checks"]["shaping"]["h1/h1-eth0"]["backlogged_s"] == pytest.approx(0.8)
    assert any("before the first change of a rate" in n for n in early["notes"])
    # a path taken down and back keeps its rate: the samples after the change count too (lab 6's backup
    # path B carried the failover at 0.998-1.0005 of its rate, TCG, 2026-11-26, and was never judged)
    downs = {"changes": [{"event": "a-down", "action": "down", "applied_s": 1.05, "drift_ms": 5},
                         {"event": "a-up", "action": "up", "applied_s": 2.05, "drift_ms": 5}], "trace_steps": []}
    whole = judge(Evidence(directions=[d], paths={}, pings={}, samples=series(8.0, floor + 1), events=downs))
    assert whole["status"] == UNFAITHFUL and whole["checks"]["shaping"]["h1/h1-eth0"]["backlogged_s"] == \
        pytest.approx(2.7)
    assert any("over the whole run" in n for n in whole["notes"])
    reshaped = {"changes": downs["changes"] + [{"event": "s", "action": "shape", "applied_s": 1.55,
                                                 "drift_ms": 1}], "trace_steps": []}
    half = judge(Evidence(directions=[d], paths={}, pings={}, samples=series(8.0, floor + 1), events=reshaped))
    assert half["checks"]["shaping"]["h1/h1-eth0"]["backlogged_s"] == pytest.approx(1.3)


def test_a_burst_held_for_a_long_paths_delay_is_not_a_shaper_falling_behind():
    """Lab 4's path B (2 Mbit/s, 80 ms each way) under MPTCP: bursts fill the queue beyond what the delay
    line holds, and nothing leaves until their first packet's delay is over. Counting those samples read
    78 % of the rate; a stretch counts once it has been backlogged for the delay and one sample."""
    d = {"id": "h1/h1-eth1", "rate_mbit": 2, "delay_ms": 80, "loss_pct": 0, "limit_pkts": 114, "paths": ["B"]}
    floor = 2e6 / 8 * 0.08 + 2 * 1514
    rows, sent, t = [], 0, 0.0
    for burst in range(12):   # a burst every 0.4 s: 0.1 s held, then 0.3 s at the rate
        for k, queued in enumerate([floor + 20000, floor + 20000, floor + 5000, 0]):
            rows.append([round(t, 2), sent, 0, 0, int(queued), 40])
            sent += 0 if k == 0 else int(2e6 / 8 * 0.1)
            t += 0.1
    out = judge(Evidence(directions=[d], paths={}, pings={}, samples={"cpu": [], "qdiscs": {d["id"]: rows}}))
    assert out["status"] == OK and out["checks"]["shaping"]["h1/h1-eth1"]["backlogged_s"] == 0


def test_retransmissions_the_shaping_did_not_drop_are_a_warning():
    def ev(retrans: int, packets: int = 100000) -> Evidence:
        d = {"id": "h1/h1-eth0", "rate_mbit": 300, "delay_ms": 5, "loss_pct": 0, "limit_pkts": 225, "paths": ["A"]}
        return Evidence(directions=[d], paths={"A": {"rtt_ms": 10, "hops": ["h1/h1-eth0"]}}, pings={},
                        qdisc_before={"h1/h1-eth0": {"packets": 0, "drops": 0}},
                        qdisc_after={"h1/h1-eth0": {"packets": packets, "drops": 5}}, run_paths=["A"], retrans_segs=retrans)
    assert judge(ev(55))["status"] == OK and judge(ev(55))["checks"]["retransmissions"]["excess"] == 50
    out = judge(ev(67))
    assert out["status"] == WARN and "retransmitted 67 segments where the shaping dropped 5 packets" in out["reasons"][0]
    assert judge(ev(300, packets=2_000_000))["status"] == OK    # 295 of 2 million: 0.015 %


def cpu_series(idle_share: float, n: int = 40, steal: int = 0) -> list:
    rows, ticks = [], [[0] * 8, [0] * 8]
    for k in range(n):
        rows.append([round(0.1 * k, 2), *[list(t) for t in ticks]])
        for t in ticks:
            idle = round(10 * idle_share)
            t[0] += 10 - idle - steal
            t[3] += idle
            t[7] += steal
    return rows


def test_cpus_without_idle_time_during_most_of_the_traffic_make_a_run_unfaithful():
    busy = judge(Evidence(directions=[], paths={}, pings={}, samples={"cpu": cpu_series(0.0)}))
    assert busy["status"] == UNFAITHFUL and "no idle time" in busy["reasons"][0]
    assert busy["checks"]["cpu"]["saturated_pct"] == 100 and busy["checks"]["cpu"]["samples"] == 39
    calm = judge(Evidence(directions=[], paths={}, pings={}, samples={"cpu": cpu_series(0.6)}))
    assert calm["status"] == OK and calm["checks"]["cpu"]["idle_pct"] == 60
    # 10 % steal beside half the CPUs idle took nothing the emulation needed; beside 10 % idle (0.2 of the 2
    # CPUs) it may have, and 30 % is heavy whatever was left
    assert judge(Evidence(directions=[], paths={}, pings={}, samples={"cpu": cpu_series(0.5, steal=1)}))["status"] == OK
    stolen = judge(Evidence(directions=[], paths={}, pings={}, samples={"cpu": cpu_series(0.1, steal=1)}))
    assert stolen["status"] == WARN and stolen["reasons"] == ["the hypervisor took 10% of the CPU time (steal), with 10% left idle"]
    heavy = judge(Evidence(directions=[], paths={}, pings={}, samples={"cpu": cpu_series(0.4, steal=3)}))
    assert heavy["status"] == WARN and "took 30% of the CPU time (steal), with 40% left idle" in heavy["reasons"][0]
    short = judge(Evidence(directions=[], paths={}, pings={}, samples={"cpu": cpu_series(0.0, n=3)}))
    assert short["status"] == OK and "CPU not judged" in short["notes"][0]


def test_the_cpu_is_judged_over_the_traffic_only():
    """Samples outside the window the shaped qdiscs were busy in (the tool's start-up and end) do not count."""
    cpu = cpu_series(0.0, n=10) + [[1.0 + 0.1 * k, [0, 0, 0, 100 + 10 * k, 0, 0, 0, 0], [0, 0, 0, 100 + 10 * k, 0, 0, 0, 0]]
                                   for k in range(1, 40)]
    sent = [[0.1 * k, 0 if k < 12 else 20000 * (k - 11), 0, 0, 0, 0] for k in range(50)]
    out = judge(Evidence(directions=[], paths={}, pings={}, samples={"cpu": cpu, "qdiscs": {"h1/h1-eth0": sent}}))
    assert out["status"] == OK and out["checks"]["cpu"]["window_s"] == [1.1, 4.9] and out["checks"]["cpu"]["idle_pct"] == 100


def test_late_events_a_debug_kernel_and_outside_drops_are_warnings():
    events = json.loads((FID / "failover-events.json").read_text())
    assert judge(Evidence(directions=[], paths={}, pings={}, events=events))["status"] == OK
    late = copy.deepcopy(events)
    late["changes"][0]["drift_ms"] = 140.0
    late["trace_steps"] = [{"applied_s": 1.0, "drift_ms": 120.0}, {"applied_s": 2.0, "drift_ms": 10.0}]
    out = judge(Evidence(directions=[], paths={}, pings={}, events=late, kernel_debug=["kmemleak", "lockdep"],
                         link_drops={"server/h2-eth0": 3},
                         samples={"softnet": {"before": {"dropped": 1, "time_squeeze": 0},
                                              "after": {"dropped": 5, "time_squeeze": 2}}}))
    assert out["status"] == WARN and out["levels"] == [WARN] * 5
    assert "event a-down applied 140 ms after its time (bound 100 ms)" in out["reasons"]
    assert "1 of 2 trace steps applied more than 100 ms late (the latest 120 ms)" in out["reasons"]
    assert "a debug kernel (kmemleak, lockdep): its network stack is several times slower" in out["reasons"]
    assert any("dropped 4 packet(s) at its full input backlog" in r for r in out["reasons"])
    assert "interfaces dropped packets: server/h2-eth0 3" in out["reasons"]
    assert out["checks"]["drops"]["time_squeeze"] == 2


def test_drops_of_the_interfaces_of_a_path_taken_down_are_the_changes_not_a_warning():
    """A link going down discards its queue, which the kernel counts as the interface's drops: on the
    path's own devices that is noted, not judged; drops elsewhere are still a warning."""
    events = json.loads((FID / "failover-events.json").read_text())
    assert any(c["action"] == "down" and c["target"] == "path A" for c in events["changes"])
    directions = [{"id": "h1/h1-eth0", "paths": ["A"]}, {"id": "h2/h2-eth0", "paths": ["A"]},
                  {"id": "h1/h1-eth1", "paths": ["B"]}, {"id": "h2/h2-eth1", "paths": ["B"]}]
    ours = judge(Evidence(directions=directions, paths={}, pings={}, events=events,
                          link_drops={"client/h1-eth0": 2, "server/h2-eth0": 2}))
    assert ours["status"] == OK, ours["reasons"]
    assert ours["checks"]["drops"]["by_changes"] == {"client/h1-eth0": 2, "server/h2-eth0": 2}
    assert any("took down dropped what they held" in n for n in ours["notes"])
    mixed = judge(Evidence(directions=directions, paths={}, pings={}, events=events,
                           link_drops={"client/h1-eth0": 2, "server/h2-eth1": 4}))
    assert mixed["status"] == WARN and mixed["reasons"] == ["interfaces dropped packets: server/h2-eth1 4"]
    unapplied = copy.deepcopy(events)
    for c in unapplied["changes"]:
        c["applied_s"] = None
    assert judge(Evidence(directions=directions, paths={}, pings={}, events=unapplied,
                          link_drops={"client/h1-eth0": 2}))["status"] == WARN


def test_input_backlog_drops_as_a_path_goes_down_are_the_changes_up_to_what_its_devices_dropped():
    """A device going down drops what its peer sends in between at the input backlog, counted there and by
    the sender (1-9 packets in 9 of 20 failovers, TCG, 2026-11-27): noted, not a warning, as long as the
    downed devices counted at least as many; more than that is the CPUs falling behind."""
    events = json.loads((FID / "failover-events.json").read_text())
    directions = [{"id": "h1/h1-eth0", "paths": ["A"]}, {"id": "h2/h2-eth0", "paths": ["A"]}]

    def softnet(dropped):
        return {"softnet": {"before": {"dropped": 10, "time_squeeze": 0},
                            "after": {"dropped": 10 + dropped, "time_squeeze": 3}}}
    downed = {"client/h1-eth0": 8, "server/h2-eth0": 8}
    ours = judge(Evidence(directions=directions, paths={}, pings={}, events=events, link_drops=downed,
                          samples=softnet(6)))
    assert ours["status"] == OK, ours["reasons"]
    assert ours["checks"]["drops"]["dropped_by_changes"] == 6 and ours["checks"]["drops"]["time_squeeze"] == 3
    assert any("as a change took a path down" in n for n in ours["notes"])
    more = judge(Evidence(directions=directions, paths={}, pings={}, events=events, link_drops=downed,
                          samples=softnet(17)))
    assert more["status"] == WARN and any("dropped 17 packet(s) at its full input backlog" in r for r in more["reasons"])
    # with no path taken down, every input-backlog drop is the CPUs'
    none_down = judge(Evidence(directions=directions, paths={}, pings={}, samples=softnet(1)))
    assert none_down["status"] == WARN and "dropped_by_changes" not in none_down["checks"]["drops"]


def test_the_worst_reason_comes_first_and_sampling_off_is_noted():
    out = judge(two_path_evidence(pings={"A": {"rtt_min_ms": 37.0}, "B": {"rtt_min_ms": 20.0}}, sampling="X=0"))
    assert out["levels"] == [UNFAITHFUL, WARN] and "path B" in out["reasons"][0]
    assert "CPU and queues not sampled (X=0)" in out["notes"] and out["tolerances"]["rate_tolerance"] == 0.05


# ---------------------------------------------------------------- where it shows

def run(rid: str, mbps: float, status: str | None, mode: str = "mptcp") -> dict:
    proto = json.loads((FIX / "run-mptcp.json").read_text())
    r = {**proto, "id": rid, "mode": mode, "primary": "A", "point": "p001", "point_label": "base"}
    r["metrics"] = {**proto["metrics"], "throughput_mbps": mbps}
    if status is not None:
        r["fidelity"] = {"status": status, "reasons": ["the CPUs had no idle time"] if status != OK else [],
                         "levels": [status] if status != OK else []}
    return r


def test_verdicts_leave_unfaithful_runs_out_and_say_how_many():
    check = parse_check("mptcp.throughput_mbps > 15")
    runs = [run("r1", 18.5, OK), run("r2", 18.6, OK), run("r3", 18.4, None), run("r4", 3.0, UNFAITHFUL)]
    v = evaluate(check, runs, "p001", "base")
    assert v.outcome == PASS and v.n_left == 3 and v.unfaithful_left_out == 1
    assert "1 unfaithful run(s) left out" in v.detail
    kept = evaluate(check, runs, "p001", "base", keep_unfaithful=True)
    assert kept.n_left == 4 and kept.unfaithful_left_out == 0 and kept.outcome == INCONCLUSIVE
    none_left = evaluate(check, [run("r4", 3.0, UNFAITHFUL)], "p001", "base")
    assert none_left.outcome == INCONCLUSIVE and "no successful runs for one side; 1 unfaithful" in none_left.detail


def test_runs_csv_the_summary_html_and_junit_carry_each_runs_fidelity():
    runs = [run("r001-mptcp-A", 18.5, OK), run("r002-mptcp-A", 3.0, UNFAITHFUL), run("r003-mptcp-A", 18.0, None)]
    rows = list(csv.DictReader(io.StringIO(render_csv(runs))))
    by_run = {r["run_id"]: (r["fidelity"], r["fidelity_reasons"]) for r in rows}
    assert by_run == {"r001-mptcp-A": ("ok", ""), "r002-mptcp-A": ("unfaithful", "the CPUs had no idle time"),
                      "r003-mptcp-A": ("", "")}
    text = summary(runs)
    assert "fidelity unfaithful: run r002-mptcp-A: the CPUs had no idle time" in text
    assert "fidelity: 1 of 3 run(s) unfaithful, left out of the verdicts" in text
    page = render_html(Path("/x/set"), {"metadata": {}, "runs": runs}, "name: t\n", [], [])
    assert '<span class="badge fid-unfaithful" title="the CPUs had no idle time">unfaithful</span>' in page
    assert '<span class="badge fid-ok" title="">ok</span>' in page
    xml = render_junit("t", [], "2026-11-25T00:00:00Z", runs=runs, metadata={})
    xmlschema.XMLSchema(str(FIX / "junit.xsd")).validate(xml)
    assert '<property name="fidelity" value="unfaithful" />' in xml
    assert '<property name="fidelity_reasons" value="the CPUs had no idle time" />' in xml
    assert xml.count('name="fidelity"') == 2   # a run recorded before fidelity was judged has none
    assert fidelity.reasons_text(runs[1]) == "the CPUs had no idle time" and fidelity.status_of(runs[2]) is None


# ---------------------------------------------------------------- runs recorded in the TCG micro-VM

def recorded(case: str) -> tuple[Evidence, dict]:
    """A run recorded in the TCG micro-VM (kernel 6.1, 2026-11-25: `python -m bench.run --backend vm --only
    fidelity`, and labs 3 and 4 as shipped), as its set's files give it: the scenario's plan, the pings,
    the qdiscs before and after, the samples. The set's scenario.yaml is kept as scenario.yml, out of the
    plan snapshot's fixtures (tests/unit/test_plan_snapshot.py)."""
    from runners.linux.rtnetlink import root_qdisc_counts

    d = FID / case
    r = json.loads((d / "run.json").read_text())
    directions, paths = configured(make_plan(parse_experiment((d / "scenario.yml").read_text()).points[0].scenario))

    def qdiscs(label):
        doc = json.loads((d / f"qdiscs-{label}.json").read_text())
        return {f"{n}/{dev}": c for n, qs in doc.items() for dev, c in root_qdisc_counts(qs).items()}

    return Evidence(directions=directions, paths=paths,
                    pings={p: parse_ping_after_warmup((d / f"ping-{p}.txt").read_text(), warmup=0) for p in paths},
                    samples=json.loads((d / "fidelity-samples.json").read_text()),
                    qdisc_before=qdiscs("before"), qdisc_after=qdiscs("after"), run_paths=list(r["paths"]),
                    sender_rtt_ms=r["metrics"]["sender_mean_rtt_ms"], retrans_segs=r["metrics"]["retrans_segs"]), r


def test_the_default_scenario_in_the_tcg_guest_is_faithful():
    ev, r = recorded("default-mptcp")
    out = judge(ev)
    assert out["status"] == OK and out["reasons"] == [] and r["metrics"]["throughput_mbps"] > 18
    c = out["checks"]
    assert c["cpu"]["samples"] >= 95 and c["cpu"]["idle_pct"] > 60 and c["cpu"]["saturated_pct"] == 0
    for path_if in ("h1/h1-eth0", "h1/h1-eth1"):   # the data direction: backlogged all along, at its rate
        assert c["shaping"][path_if]["backlogged_s"] > 9 and abs(c["shaping"][path_if]["rate_ratio"] - 1) < 0.02
    # the sender's mean RTT stays below the most the queues explain (their sawtooth peaks at ~120 ms)
    assert -30 < c["load_rtt"]["excess_ms"] < 0 and c["load_rtt"]["explained_ms"] > 150
    assert c["retransmissions"]["excess"] <= 0
    assert all(0.5 < x["excess_ms"] < 3 for x in c["delay"].values())


def test_four_paths_of_300_mbits_in_the_tcg_guest_are_unfaithful():
    """MPTCP over four 300 Mbit/s paths: the guest's CPUs were not saturated together and no queue
    backlogged, yet the sender's RTT was 2.5 times what the paths' 5 ms delays and their queues explain,
    and 451 segments were retransmitted where the shaping dropped none."""
    ev, r = recorded("overload-mptcp")
    out = judge(ev)
    assert out["status"] == UNFAITHFUL and out["levels"] == [UNFAITHFUL, WARN, WARN]
    assert "the emulation delayed the packets" in out["reasons"][0]
    assert out["checks"]["load_rtt"]["excess_ms"] > 15 and out["checks"]["load_rtt"]["explained_ms"] < 11
    assert out["checks"]["retransmissions"] == {"retransmitted": 451, "shaping_dropped": 0, "packets": 238552,
                                                "excess": 451}
    assert out["checks"]["cpu"]["saturated_pct"] < 5 and r["metrics"]["throughput_mbps"] < 200


def test_tcp_on_one_300_mbits_path_in_the_tcg_guest_is_a_warning():
    """The same set's TCP run on one of the paths: 140 of 300 Mbit/s, half the guest's CPU idle, its queue
    never backlogged, its RTT 21 % beyond the most its queue explains (below the bound): only the
    retransmissions the shaping did not cause (62 beyond its 5 drops) give it away."""
    ev, r = recorded("overload-tcp")
    out = judge(ev)
    assert out["status"] == WARN and len(out["reasons"]) == 1 and "retransmitted 67 segments" in out["reasons"][0]
    assert 0 < out["checks"]["load_rtt"]["excess_ms"] < 3 and out["checks"]["cpu"]["idle_pct"] > 45


@pytest.mark.parametrize("case", ["lab4-mptcp-bursts", "lab3-routed-tcp"])
def test_shipped_labs_in_the_tcg_guest_are_faithful(case):
    """Lab 4's MPTCP run with the capped send buffer (bursts on an 80 ms path: once read as a shaper at
    78 % of its rate) and lab 3's routed TCP run with the highest RTT floor seen (+7.1 ms over six hops)."""
    ev, r = recorded(case)
    out = judge(ev)
    assert out["status"] == OK, out["reasons"]
    if case == "lab3-routed-tcp":
        assert max(x["excess_ms"] for x in out["checks"]["delay"].values()) > 7 and out["checks"]["delay"]["v4"]["hops"] == 6
    else:
        b = out["checks"]["shaping"]["h1/h1-eth1"]
        assert b["qlen_max"] > 40 and b["backlogged_s"] < 1 and r["metrics"]["throughput_mbps"] < 4   # 2.2 s before


def test_a_result_sets_report_leaves_unfaithful_runs_out_unless_kept(tmp_path, capsys):
    from runners.analysis.report import make_report, report_set

    from .test_experiments import fake_result_set

    d = fake_result_set(tmp_path, "set", {"p001"}, reps=(1, 3))
    doc = json.loads((d / "results.json").read_text())
    for r in doc["runs"]:
        r["fidelity"] = {"status": UNFAITHFUL if r["repeat"] == 3 else OK, "reasons": ["x"], "levels": [UNFAITHFUL]}
    (d / "results.json").write_text(json.dumps(doc))
    v = make_report(d, plots=False).verdicts[0]
    assert (v.n_left, v.n_right, v.unfaithful_left_out) == (2, 2, 2) and "2 unfaithful run(s) left out" in v.detail
    kept = make_report(d, plots=False, keep_unfaithful=True).verdicts[0]
    assert (kept.n_left, kept.n_right, kept.unfaithful_left_out) == (3, 3, 0)
    assert json.loads((d / "verdicts.json").read_text())[0]["unfaithful_left_out"] == 0
    report_set(d, None, plots=False)
    out = capsys.readouterr().out
    assert "fidelity: 2 run(s) unfaithful (" in out and "left out of the verdicts" in out and "--keep-unfaithful" in out
    assert "p001-r003-mptcp-A" in out and "p001-r003-mptcp-B" in out
