"""`run-scenario calibrate`'s search and file (runners.runset.calibration_search, runners.runset.calibration),
and a plan against a calibration (runners.runset.limits), on fixtures: a machine stood in for by a
function that says which probes it reproduces."""
from __future__ import annotations

import itertools
import json
import os
import pwd
from pathlib import Path

import pytest

from scenarios.spec.loader import load_experiment, parse_scenario

from runners.runset import calibration as cal
from runners.runset import calibration_search as search
from runners.runset.limits import aggregate_limit, compare, demand, unmeasured

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "tests" / "fixtures" / "calibration"


def never() -> bool:
    return False


# ------------------------------------------------------------------ the search

@pytest.mark.parametrize("limit", [7.3, 61.0, 222.0, 3800.0])
def test_the_rate_search_brackets_the_limit_within_its_resolution(limit):
    tried = []

    def passes(rate):
        tried.append(rate)
        return rate <= limit

    b = search.bracket(passes, 100.0, search.RATE_FLOOR, search.RATE_CEILING, lambda r: search.two_digits(r * 2),
                       lambda r: search.two_digits(r / 2), search.rate_middle, never)
    assert b.value <= limit < b.failed_at and b.confirmed and tried.count(b.value) == 2
    assert b.failed_at <= b.value * (1 + search.RESOLUTION) or search.rate_middle(b.value, b.failed_at) is None
    assert b.probes == len(tried) <= 11
    assert all(search.two_digits(r) == r for r in tried)   # two significant digits: rates a reader compares


def test_the_search_says_when_nothing_or_everything_passed():
    grow, shrink = (lambda r: search.two_digits(r * 2)), (lambda r: search.two_digits(r / 2))
    none = search.bracket(lambda r: False, 100.0, 1.0, 10000.0, grow, shrink, search.rate_middle, never)
    assert none.value is None and none.failed_at == 1.0
    assert cal.limit_text(none.to_dict()) == "none: not at 1 Mbit/s, the least tried"
    every = search.bracket(lambda r: True, 100.0, 1.0, 800.0, grow, shrink, search.rate_middle, never)
    assert every.value == 800.0 and every.failed_at is None
    assert cal.limit_text(every.to_dict()) == "at least 800 Mbit/s, the most tried"


def test_a_search_out_of_time_keeps_its_bracket_and_runs_no_more_probes():
    calls = []
    left = itertools.chain([False] * 3, itertools.repeat(True))   # three probes, then the budget is spent

    def passes(rate):
        calls.append(rate)
        return rate <= 150

    b = search.bracket(passes, 100.0, 1.0, 10000.0, lambda r: r * 2, lambda r: r / 2, search.rate_middle,
                       lambda: next(left))
    assert calls == [100.0, 200.0, 140.0] and (b.value, b.failed_at, b.probes) == (140.0, 200.0, 3)
    assert not b.confirmed and b.to_dict()["confirmed"] is False
    assert cal.limit_text(b.to_dict()) == "140 Mbit/s (200 was not; reproduced once, not probed again in time)"


def test_a_limit_that_fails_its_second_probe_is_refuted_and_the_search_goes_on_below_it():
    """A machine whose shaper falls behind by chance between 60 and 80 Mbit/s: each rate there passes its
    first probe and fails every later one. The limit found is one that passed twice."""
    tried = []

    def passes(rate):
        tried.append(rate)
        return rate < 60 or (rate <= 80 and tried.count(rate) == 1)

    b = search.bracket(passes, 100.0, 1.0, 10000.0, lambda r: search.two_digits(r * 2),
                       lambda r: search.two_digits(r / 2), search.rate_middle, never)
    assert b.confirmed and b.value < 60 <= b.failed_at and tried.count(b.value) == 2
    assert b.refuted and all(60 <= x <= 80 for x in b.refuted)
    assert b.to_dict()["refuted"] == b.refuted
    assert cal.limit_text(b.to_dict()) == f"{b.value:g} Mbit/s ({b.failed_at:g} was not)"


def test_a_refuted_limit_with_nothing_below_it_that_held_searches_down_again():
    tried = []

    def passes(rate):
        tried.append(rate)
        return rate <= 20 or (rate <= 100 and tried.count(rate) == 1)

    b = search.bracket(passes, 100.0, 1.0, 10000.0, lambda r: search.two_digits(r * 2),
                       lambda r: search.two_digits(r / 2), search.rate_middle, never)
    assert b.confirmed and b.value <= 20 < b.failed_at and 100.0 in b.refuted


def test_each_count_of_paths_starts_where_the_previous_left_the_aggregate():
    """A machine that carries 240 Mbit/s in all, and at most 200 on one path."""
    starts = {}

    def measure(n, rate):
        starts.setdefault(n, rate)
        return rate <= 200 and n * rate <= 240

    found = search.search_paths(measure, [1, 2, 4, 8], never)
    assert starts[1] == 100 and starts[2] == search.two_digits(found["1"]["value"] / 2)
    for n in (1, 2, 4, 8):
        b = found[str(n)]
        assert b["value"] <= min(200, 240 / n) < b["failed_at"] <= b["value"] * (1 + search.RESOLUTION) + 1
    # the guess saves probes: each later count needs at most 5, and one more to confirm its limit
    assert all(found[str(n)]["probes"] <= 6 for n in (2, 4, 8))


def test_the_hosts_search_finds_the_most_clients():
    seen = []
    b = search.search_hosts(lambda n: seen.append(n) or n <= 6, never)
    assert (b["value"], b["failed_at"]) == (6, 7) and seen == [4, 8, 6, 7, 6] and b["confirmed"]
    assert search.search_hosts(lambda n: True, never)["value"] == search.MAX_CLIENTS


def run_doc(status="ok", throughput=9.5, excess=(1.2,), run_status="ok", reasons=(), flows=1):
    """A probe's results.json: `flows` run records (a TCP flow per path, run together), each judging every
    path's idle RTT, as the records of one job do."""
    return {"runs": [{"id": f"r{k}", "status": run_status, "metrics": {"throughput_mbps": throughput / flows},
                      "fidelity": {"status": status, "reasons": list(reasons),
                                   "checks": {"delay": {chr(65 + i): {"excess_ms": x} for i, x in enumerate(excess)}}}}
                     for k in range(flows)]}


def test_a_probe_is_reproduced_when_it_is_ok_and_carried_its_rate():
    assert search.outcome_of("paths", 1, 10, run_doc()).passed
    low = search.outcome_of("paths", 2, 100, run_doc(throughput=150.0, excess=(1.0, 1.4), flows=2))
    assert not low.passed and low.why() == "carried 150 of 200 Mbit/s (< 85%)"
    warn = search.outcome_of("paths", 1, 10, run_doc(status="warn", reasons=["one CPU saturated"]))
    assert not warn.passed and warn.why() == "fidelity warn: one CPU saturated"
    failed = search.outcome_of("paths", 1, 10, None, failure="exit 1: see probe.log")
    assert not failed.passed and failed.status is None and failed.why() == "exit 1: see probe.log"
    assert search.outcome_of("paths", 1, 10, run_doc(run_status="failed")).status is None


def test_flows_run_together_are_one_probe_as_faithful_as_its_worst_and_carrying_their_sum():
    def doc(*runs):
        return {"runs": [run_doc(**r)["runs"][0] for r in runs]}
    both = search.outcome_of("paths", 2, 10, doc({"throughput": 9.5, "excess": (0.9, 1.1)},
                                                 {"throughput": 9.4, "excess": (0.9, 1.1)}))
    assert both.passed and both.carried_mbps == 18.9 and both.delay_excess_ms == [0.9, 1.1]
    one_warns = search.outcome_of("paths", 2, 10, doc({"status": "warn", "reasons": ["A sent at 93 %"]},
                                                      {"reasons": []}))
    assert not one_warns.passed and one_warns.status == "warn" and one_warns.why() == "fidelity warn: A sent at 93 %"
    worst = search.outcome_of("paths", 2, 10, doc({"status": "warn", "reasons": ["CPU"]},
                                                  {"status": "unfaithful", "reasons": ["CPU", "B at 60 %"]}))
    assert worst.status == "unfaithful" and worst.reasons == ["CPU", "B at 60 %"]
    short = search.outcome_of("paths", 2, 10, doc({"throughput": 9.5}, {"throughput": 6.0}))
    assert not short.passed and short.why() == "carried 15.5 of 20 Mbit/s (< 85%)"
    one_failed = search.outcome_of("paths", 2, 10, doc({}, {"run_status": "failed"}))
    assert one_failed.status is None and "run r0 failed" in one_failed.reasons
    # each record judges both paths' idle RTT (the job's pings): one figure per path
    pair = search.outcome_of("paths", 2, 10, run_doc(throughput=19, excess=(0.5, 0.9), flows=2))
    assert pair.passed and pair.delay_excess_ms == [0.5, 0.9]
    # a flow missing, or without its throughput or fidelity, is said, not read as a flow that carried little
    lost = search.outcome_of("paths", 2, 10, run_doc(throughput=19))
    assert lost.status is None and lost.why() == "1 of 2 flows recorded"
    bare = run_doc(throughput=19, flows=2)
    bare["runs"][1]["metrics"] = {}
    del bare["runs"][0]["fidelity"]["status"]
    assert search.outcome_of("paths", 2, 10, bare).why() == ("run r1 has no throughput; "
                                                             "run r0 has no fidelity record")


def test_the_delay_error_comes_from_the_probes_that_passed():
    outs = [search.outcome_of("paths", 2, 10, run_doc(throughput=19, excess=(0.9, 2.0), flows=2)),
            search.outcome_of("paths", 1, 10, run_doc(throughput=9.5, excess=(1.1,))),
            search.outcome_of("paths", 1, 900, run_doc(status="unfaithful", excess=(40.0,)))]
    d = search.delay_figures(outs)
    assert d == {"samples": 3, "min_ms": 0.9, "median_ms": 1.1, "max_ms": 2.0}
    assert cal.rtt_within_10pct(d) == 11.0 and cal.rtt_within_10pct({"samples": 0}) is None
    assert search.delay_figures([]) == {"samples": 0}


def test_the_probes_are_valid_scenarios():
    one = parse_scenario(search.paths_yaml(1, 250), "p.yaml")
    assert one.runs.compare == ["tcp"] and one.topology.paths[0].bw == 250
    eight = parse_scenario(search.paths_yaml(8, 30, seconds=4), "p.yaml")
    assert eight.runs.compare == ["tcp"] and eight.runs.tcp_on == "every-path" and eight.runs.tcp_together
    assert len(eight.topology.paths) == 8 and eight.traffic.duration == 4
    # the flows at once are what a plan's are held to: eight of 30 Mbit/s each
    assert demand(eight).total == 240 and len(demand(eight).flows) == 8
    assert parse_scenario(search.paths_yaml(2, 10, mptcp=True), "p.yaml").runs.compare == ["mptcp"]
    hosts = parse_scenario(search.hosts_yaml(16, 25), "h.yaml")
    assert len(hosts.topology.clients) == 16 and hosts.topology.switches[0].type == "bridge"
    assert hosts.topology.links[0].bw is None and {x.bw for x in hosts.topology.links[1:]} == {25}


# ------------------------------------------------------------------ the file

def test_the_calibration_goes_to_the_users_cache(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert cal.calibration_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "mptcp-testbed" / "calibration"
    assert cal.calibration_dir({"TESTBED_CALIBRATION_DIR": "/x"}) == Path("/x")
    # SUDO_UID counts only for root: a user's own process keeps their cache
    assert cal.calibration_dir({"SUDO_UID": "0", "SUDO_GID": "0", "XDG_CACHE_HOME": "/c"}) == Path("/c/mptcp-testbed/calibration")


def test_under_sudo_the_calibration_is_the_sudo_users_and_belongs_to_them(monkeypatch, tmp_path):
    nobody = pwd.getpwnam("nobody")
    env = {"SUDO_UID": str(nobody.pw_uid), "SUDO_GID": str(nobody.pw_gid), "XDG_CACHE_HOME": "/root/.cache"}
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert cal.calibration_dir(env) == Path(nobody.pw_dir) / ".cache" / "mptcp-testbed" / "calibration"
    owners = []
    monkeypatch.setattr(os, "lchown", lambda p, uid, gid: owners.append((Path(p), uid, gid)))
    target = tmp_path / "a" / "b" / "m-vm-6.1.json"
    cal.write(target, {"version": cal.VERSION, "limits": {}}, env)
    assert {p for p, _, _ in owners} == {tmp_path / "a", tmp_path / "a" / "b", target}
    assert {(u, g) for _, u, g in owners} == {(nobody.pw_uid, nobody.pw_gid)}
    assert sorted(p.name for p in target.parent.iterdir()) == ["m-vm-6.1.json"]   # written whole: no temporary left


def test_one_file_per_machine_backend_and_kernel(tmp_path):
    env = {"TESTBED_CALIBRATION_DIR": str(tmp_path)}
    assert cal.file_for("warm vm", "6.1.0-56-amd64", env, "box-12345678") == tmp_path / "box-12345678-vm-6.1.0-56-amd64.json"
    assert cal.file_for("native", "6.12/x y", env, "m").name == "m-native-6.12_x_y.json"
    assert cal.machine_id() == cal.machine_id() and len(cal.machine_id().rsplit("-", 1)[1]) == 8


def test_a_calibration_that_cannot_be_used_is_named(tmp_path):
    assert cal.read(tmp_path / "none.json") is None
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(cal.CalibrationError, match=f"calibration {bad}: not JSON"):
        cal.read(bad)
    for version in (99, 1):   # 1: its probes of several paths were MPTCP's
        bad.write_text(json.dumps({"version": version, "limits": {}}))
        with pytest.raises(cal.CalibrationError, match="not a version 2 calibration .* run it again"):
            cal.read(bad)


def test_the_table_shows_every_limit():
    text = cal.table(json.loads((FIX / "tcg-vm.json").read_text()))
    for want in ("1 path at once", "220 Mbit/s (240 was not)", "8 paths at once", "240 Mbit/s in all",
                 "clients at 25 Mbit/s each", "6 clients (7 was not)", "+0.8 to +2.1 ms", "RTTs from 13 ms", "rule:"):
        assert want in text, want


# ------------------------------------------------------------------ a plan against the calibration

@pytest.fixture
def tcg():
    return json.loads((FIX / "tcg-vm.json").read_text())


def point(text: str):
    return parse_scenario(text, "s.yaml")


def test_the_default_scenario_is_within_the_calibration(tcg):
    exp = load_experiment(REPO / "scenarios" / "two-paths.yaml")
    assert [f for f in compare("p001", exp.points[0].scenario, tcg) if f.beyond] == []


def test_four_paths_of_300_are_beyond_one_path_and_the_sum_naming_paths_and_limits(tcg):
    sc = point(search.paths_yaml(4, 300, mptcp=True))
    found = compare("p001", sc, tcg)
    assert [f.check for f in found if f.beyond] == ["path", "sum"]
    path, total = found[0].text, found[1].text
    assert "paths A (300 Mbit/s), B (300 Mbit/s), C (300 Mbit/s), D (300 Mbit/s)" in path and "220 Mbit/s one path" in path
    assert "4 flows at once (A, B, C, D) ask 1200 Mbit/s in all: beyond the 240 Mbit/s that 4 paths" in total
    assert "(4 x 60)" in total


def test_paths_below_one_path_limit_can_still_be_beyond_the_sum(tcg):
    found = compare("p002", point(search.paths_yaml(3, 100, mptcp=True)), tcg)   # 300 in all, between 2 x 125 and 4 x 60
    assert [f.check for f in found if f.beyond] == ["sum"]
    assert "beyond the 245 Mbit/s that 3 paths at once" in found[0].text and "between 2 x 125 and 4 x 60" in found[0].text
    assert aggregate_limit(tcg, 12) == (240.0, "8 x 30, the most paths measured")


def test_tcp_baselines_one_at_a_time_ask_one_path(tcg):
    text = search.paths_yaml(4, 200, mptcp=True).replace("compare: [mptcp]", "compare: [tcp]\n  tcp_on: every-path")
    d = demand(point(text))
    assert d.total == 200 and [f for f in compare("p001", point(text), tcg) if f.beyond] == []
    together = text + "  tcp_together: true\n"
    assert demand(point(together)).total == 800


def test_many_clients_at_the_calibrated_rate_are_beyond_the_hosts(tcg):
    found = compare("p001", point(search.hosts_yaml(8, 25)), tcg)
    hosts = [f for f in found if f.check == "hosts"]
    assert hosts and hosts[0].beyond and hosts[0].text == ("8 clients at 25 Mbit/s each: beyond the 6 clients at "
                                                           "25 Mbit/s each this machine carries faithfully")
    # slower clients are held to the sum only
    assert [f.check for f in compare("p001", point(search.hosts_yaml(8, 5)), tcg)] == []


def test_e5_exp3s_four_clients_are_counted_per_link_and_bounded_by_the_servers_links(tcg):
    exp = load_experiment(REPO / "scenarios" / "e5-exp3.yaml")
    d = demand(exp.points[0].scenario)
    # 4 clients x 4 paths; each path's flows together at most the server's 25 Mbit/s link of that path, and
    # a client's two paths on one of its links at most that link: 2 x 25 per client, not 4 x 25
    assert (d.clients, len(d.flows), d.total, d.client_rate) == (4, 16, 100.0, 50.0)
    assert [f.check for f in compare("p001", exp.points[0].scenario, tcg) if f.beyond] == []


def test_short_rtts_get_a_note_not_a_refusal(tcg):
    sc = point(search.paths_yaml(2, 10, mptcp=True).replace("delay: 5ms", "delay: 1ms"))
    notes = [f for f in compare("p001", sc, tcg) if f.check == "delay"]
    assert len(notes) == 1 and not notes[0].beyond
    assert notes[0].text == ("the RTT of A (2 ms), B (2 ms): this machine adds +1.3 ms to an RTT (median; "
                             "+0.8 to +2.1), more than 10 % below 13 ms")


def test_what_the_calibration_did_not_measure_is_not_compared(tcg):
    for k in ("4", "8"):
        tcg["limits"]["paths"][k] = {"value": None, "failed_at": None, "probes": 0}
    tcg["limits"]["hosts"] = {"value": None, "failed_at": None, "probes": 0, "rate_mbit": 25}
    assert unmeasured(tcg) == ["4 paths", "8 paths", "clients"]
    assert aggregate_limit(tcg, 8) == (250.0, "2 x 125, the most paths measured")
    assert [f.check for f in compare("p001", point(search.hosts_yaml(16, 25)), tcg)] == ["sum"]   # not hosts


def test_a_limit_where_nothing_passed_makes_that_rate_and_above_beyond(tcg):
    tcg["limits"]["paths"]["1"] = {"value": None, "failed_at": 100, "probes": 1}
    tcg["limits"]["hosts"] = {"value": None, "failed_at": 4, "probes": 1, "rate_mbit": 10}
    assert [f for f in compare("p001", point(search.paths_yaml(1, 50)), tcg) if f.beyond] == []
    found = [f for f in compare("p001", point(search.paths_yaml(1, 100)), tcg) if f.beyond]
    assert [f.check for f in found] == ["path"] and found[0].text == (
        "path A (100 Mbit/s): beyond one path here: not reproduced at 100 Mbit/s, and no lower rate was")
    assert [f for f in compare("p001", point(search.hosts_yaml(3, 10)), tcg) if f.beyond] == []
    hosts = [f for f in compare("p001", point(search.hosts_yaml(4, 10)), tcg) if f.check == "hosts"]
    assert hosts[0].text.endswith("4 clients at 10 Mbit/s each were not reproduced, and no fewer were tried")
