"""Every lab's scenarios, as a student runs them (labs/*.yaml, unchanged): each claim is an `expect`, and
every verdict must be a conclusive pass. Beside the verdicts, the facts each handout builds on.

Four tests are folded in here, since the labs run the same networks with more repetitions: the default
scenario's (lab 1: two-paths.yaml's network; the fresh-machine test still runs two-paths.yaml itself),
E4's delay case (lab 2: the primary on the long path costs a 2 MiB upload time, a conclusive verdict;
the old test's timed throughput and OFO means over 3 runs were no verdict, and 5 runs of each left OFO
inconclusive), E1 non-congruent (lab 3) and E2's steered transfer (lab 5: 12 MiB in at most 0.8x TCP's
time). CI's 90 minutes are shared by every test.
"""
import json

import pytest

from .helpers import REPO, STEERED_SET_SHARE, leftovers, run_cli, steered_apart

pytestmark = pytest.mark.integration
LABS = REPO / "labs"


# As the handouts tell a student whose claim came out inconclusive: add runs to the open cases only. Under
# TCG, on CI's 2 cores, three runs a side sometimes leave a true claim inconclusive (lab 2, 2026-11-23);
# a claim that fails, or stays open after 6 runs a side, still fails the test.
UNTIL_CONCLUSIVE = ("--until-conclusive", "--max-repeat", "6")


SHOWN = ("name", "outcome", "estimate", "ci_low", "ci_high", "n_left", "n_right", "detail")


def run_lab(tmp_path, name: str, *extra: str, plots: bool = False,
            verdicts_pass: bool = True) -> tuple[list[dict], list[dict]]:
    """The lab's set, its exit and leftovers checked; with `verdicts_pass`, every verdict must pass."""
    r = run_cli(str(LABS / f"{name}.yaml"), "--backend", "native", "--out", str(tmp_path), *UNTIL_CONCLUSIVE,
                *extra, plots=plots)
    d = next((tmp_path / name).glob("2*"))
    verdicts = json.loads((d / "verdicts.json").read_text())
    assert verdicts and r.returncode == 0, r.stdout + r.stderr   # an inconclusive claim exits 0, a failed one 1
    not_passed = [{k: v.get(k) for k in SHOWN} for v in verdicts if v["outcome"] != "pass"]
    assert not verdicts_pass or not not_passed, not_passed
    assert leftovers() == []
    return json.loads((d / "results.json").read_text())["runs"], verdicts


def mean(runs, metric, **match) -> float:
    vals = [x["metrics"][metric] for x in runs if all(x[k] == v for k, v in match.items())]
    assert vals, match
    return sum(vals) / len(vals)


def test_lab1_two_paths_aggregate(tmp_path):
    """Also what the default scenario's test checked (the same network, two-paths.yaml, which the
    fresh-machine test runs end to end): the files a user is promised, and per-path bytes."""
    runs, _ = run_lab(tmp_path, "lab1-two-paths", plots=True)
    d = (tmp_path / "lab1-two-paths" / "latest").resolve()
    assert d == next((tmp_path / "lab1-two-paths").glob("2*"))
    for f in ("scenario.yaml", "metadata.json", "results.json", "runs.csv", "stats.csv", "junit.xml", "report.html",
              "plots/box-throughput_mbps.png"):      # figures drawn from real runs
        assert (d / f).exists(), f
    meta = json.loads((d / "metadata.json").read_text())
    assert meta["status"] == "ok" and meta["backend_kernel"] and "iperf3" in meta
    features = meta["probe"]["mptcp_features"]     # what this kernel's MPTCP offers, asked, not assumed
    assert features["mptcp"] and "default" in features["schedulers"] and "enabled" in features["sysctls"]
    assert features["endpoint_flags"]["signal"] and features["endpoint_flags"]["backup"], features
    mp = [x for x in runs if x["mode"] == "mptcp"]
    assert len(mp) == 3 and all(x["status"] == "ok" and x["metrics"]["subflows"] == 2 for x in mp)
    for x in mp:    # equal paths: each carries a real share
        assert all(p["bytes_received"] > 1_000_000 for p in x["paths"].values()), x["paths"]
        assert (d / "raw" / x["id"] / "iperf3-client.json").exists()
    for x in (x for x in runs if x["mode"] == "tcp"):
        assert x["paths"]["B"]["bytes_received"] < 0.01 * x["paths"]["A"]["bytes_received"]
        assert 8.5 < x["metrics"]["throughput_mbps"] <= 10.5      # close to the rate, never above


def test_lab2_primary_on_the_long_path_costs_time(tmp_path):
    runs, verdicts = run_lab(tmp_path, "lab2-primary-path")
    assert [v["name"] for v in verdicts] == ["short-primary-finishes-first"]
    assert all(x["metrics"]["subflows"] == 2 for x in runs)
    # each timed to its receiver's last byte; iperf3 may end a run before its receiver counted every byte
    # (esnet/iperf#382): that happened to one run in CI on 2026-11-23, whose verdict still passed
    assert all(0.9 < x["metrics"]["delivered_fraction"] <= 1.0 for x in runs), [
        x["metrics"]["delivered_fraction"] for x in runs]


@pytest.mark.parametrize("name", ["lab3-congruent", "lab3-noncongruent"])
def test_lab3_two_families(tmp_path, name):
    """One IPv4 and one IPv6 subflow on one interface; non-congruent, both carry a real share (what the
    E1 non-congruent test checked, on the same network, now with three runs of each mode)."""
    runs, _ = run_lab(tmp_path, name)
    for x in runs:
        if x["mode"] == "mptcp":
            assert sorted(s["family"] for s in x["subflow_list"]) == ["ipv4", "ipv6"], x["subflow_list"]
            if name == "lab3-noncongruent":
                assert all(p["bytes_received"] > 500_000 for p in x["paths"].values()), x["paths"]
        else:   # TCP over IPv4 stays on the IPv4 path
            assert x["paths"]["v6"]["bytes_received"] < 0.01 * x["paths"]["v4"]["bytes_received"], x["paths"]


def test_lab4_default_buffer_is_efficient_a_capped_one_is_not(tmp_path):
    runs, verdicts = run_lab(tmp_path, "lab4-unequal-paths")
    assert sorted(v["name"] for v in verdicts) == ["capped-loses-to-fast-path", "efficient"]
    assert {x["point"] for x in runs} == {"p001", "p002"}       # both variants ran: the handout compares them


def test_lab5_steered_subflows_halve_the_transfer(tmp_path):
    runs, _ = run_lab(tmp_path, "lab5-steering")
    assert mean(runs, "seconds", mode="mptcp") <= 0.8 * mean(runs, "seconds", mode="tcp")
    shares = [steered_apart(x) for x in runs if x["mode"] == "mptcp"]     # each run: the subflows on both links
    total = {link: sum(s[link] for s in shares) for link in shares[0]}       # the set: both links about half
    assert min(total.values()) > STEERED_SET_SHARE * sum(total.values()), shares


def test_lab6_mptcp_carries_on_when_its_primary_fails(tmp_path):
    """The lab's claim, and the facts its questions build on: TCP on A has no recovery while A is down, B
    (a backup path) carries the transfer while A is down, MPTCP recovers on B, and a run that does not
    says why.

    On 6.1 some MPTCP runs get no recovery at all (B's subflow held to a 42 kB window: 2 of 6 in a CI
    rehearsal on 2026-11-28, which left the claim inconclusive after 6 runs a side, -1.5 to +3.6 Mbit/s).
    A user reruns such a set, and so does the test, once: the second attempt's verdict must pass."""
    runs, verdicts = run_lab(tmp_path / "first", "lab6-failover", verdicts_pass=False)
    check_lab6_runs(runs)
    not_passed = [{k: v.get(k) for k in SHOWN} for v in verdicts if v["outcome"] != "pass"]
    if not_passed:
        assert all(v["outcome"] == "inconclusive" for v in not_passed), not_passed   # a failed claim is not rerun
        runs, _ = run_lab(tmp_path / "again", "lab6-failover")
        check_lab6_runs(runs)


def check_lab6_runs(runs: list[dict]) -> None:
    mptcp = []
    for x in runs:
        down = next(c for c in x["events"]["changes"] if c["event"] == "a-down")
        assert down["applied_s"] is not None and "error" not in down, down
        if x["mode"] == "tcp":
            assert down["recovery_s"] is None and down["no_recovery"] == "no path is live after the event", down
        else:
            assert down["backup_share"] > 0.9, down
            mptcp.append(down)
    # On 6.1, B's subflow is sometimes offered its first 42 kB window for the whole outage (5 Mbit/s at its
    # RTT: 2 of 6 runs, TCG, 2026-11-27), and goodput never reaches 80 % of B's rate: the record must say
    # so. The others recover (1.7-2.1 s here), and must then hold for a second inside A's 4 s outage: a
    # dip of the emulated CPU may deny one run that, which must then say its goodput stayed below the mark.
    assert len(mptcp) >= 3, mptcp
    unexplained = [d for d in mptcp if d["recovery_s"] is None and not d.get("window_limited")]
    assert all(d["no_recovery"].startswith("goodput stayed below") for d in mptcp if d["recovery_s"] is None), \
        [json.dumps(d) for d in mptcp]
    assert all("the receiver's window held the sender" in d["no_recovery"] for d in mptcp if d.get("window_limited"))
    assert len(unexplained) <= 1, [json.dumps(d) for d in unexplained]
