"""Sweeps, shards, statistics, verdicts, JUnit, resume bookkeeping, merge, report and plots (no root)."""
import json
import math
from pathlib import Path

import pytest
import xmlschema
from scenarios.spec.expect import parse_check
from scenarios.spec.loader import ScenarioError, parse_experiment
from scenarios.spec.sweep import shard_points

from runners.analysis import stats
from runners.analysis.junit import render_junit
from runners.analysis.report import make_report
from runners.analysis.verdicts import FAIL, INCONCLUSIVE, PASS, decide, evaluate, regressions
from runners.pipeline.job import topology_signature
from runners.results.merge import MergeError, merge
from runners.results.store import ResultStore, run_key
from runners.runset.jobs import plan_jobs

FIX = Path(__file__).resolve().parents[1] / "fixtures"
BASE = "name: t\ntopology: {kind: dual-homed, paths: [{name: A, bw: 10, delay: 15ms}, {name: B, bw: 10}]}\n"


# ---------------------------------------------------------------- grid and variants

def test_grid_expansion_in_key_order():
    exp = parse_experiment(BASE + "sweep: {paths.A.delay: [15ms, 250ms], mptcp.primary: [A, B]}\n")
    assert [p.params for p in exp.points] == [
        {"paths.A.delay": "15ms", "mptcp.primary": "A"}, {"paths.A.delay": "15ms", "mptcp.primary": "B"},
        {"paths.A.delay": "250ms", "mptcp.primary": "A"}, {"paths.A.delay": "250ms", "mptcp.primary": "B"}]
    assert [p.id for p in exp.points] == ["p001", "p002", "p003", "p004"]
    assert exp.points[2].scenario.topology.paths[0].delay == 250.0 and exp.points[3].scenario.primary == "B"
    assert exp.points[0].label == "paths.A.delay=15ms, mptcp.primary=A"


def test_variants_merge_with_the_grid_and_their_own_sweep():
    exp = parse_experiment(BASE + """\
sweep: {traffic.duration: [5, 10]}
variants:
  - {name: slow, set: {paths.B.bw: 1}}
  - {name: lossy, set: {paths.A.loss: 1}, sweep: {paths.B.delay: [5ms, 50ms]}}
""")
    assert len(exp.points) == 2 + 4
    slow = [p for p in exp.points if p.params["variant"] == "slow"]
    assert all(p.scenario.topology.paths[1].bw == 1 for p in slow)
    lossy = [p for p in exp.points if p.params["variant"] == "lossy"]
    assert {p.params["paths.B.delay"] for p in lossy} == {"5ms", "50ms"}
    assert all(p.scenario.topology.paths[0].loss == 1 for p in lossy)


def test_a_range_of_whole_numbers_gives_integers():
    """{from: 1, step: 1, count: N} on queue (issue 28: refused, "must be a whole number (got 1.0)") and bytes."""
    exp = parse_experiment(BASE + "sweep:\n  paths.A.queue: {from: 1, step: 1, count: 3}\n"
                                  "  traffic.bytes: {from: 1000000, step: 1000000, count: 2}\n")
    assert [p.params["paths.A.queue"] for p in exp.points[::2]] == [1, 2, 3]
    assert [p.scenario.topology.paths[0].queue for p in exp.points[::2]] == [1, 2, 3]
    assert [p.scenario.traffic.bytes for p in exp.points[:2]] == [10**6, 2 * 10**6]
    # a whole range with a unit is written in full ('1e+06KiB' was no size), a fractional one as before
    assert [p.params["traffic.bytes"] for p in parse_experiment(
        BASE + "sweep: {traffic.bytes: {from: 1000000, step: 1, count: 2, unit: B}}\n").points] == [
        "1000000B", "1000001B"]
    assert [p.params["paths.A.loss"] for p in parse_experiment(
        BASE + "sweep: {paths.A.loss: {from: 0, step: 0.5, count: 3}}\n").points] == [0, 0.5, 1.0]


@pytest.mark.parametrize("extra,msg", [
    ("sweep:\n  paths.A.queue: {from: 1, step: 0.5, count: 3}\n",
     "s.yaml: sweep.paths.A.queue (line 4): topology.paths[0].queue takes whole numbers, but this range goes "
     "from 1 in steps of 0.5; give `from` and `step` as whole numbers"),
    # the field is found by where the key goes: the loss range has the same values and is not at fault
    ("sweep:\n  paths.B.loss: {from: 1.5, step: 1, count: 2}\n  traffic.bytes: {from: 1.5, step: 1, count: 2}\n",
     "s.yaml: sweep.traffic.bytes (line 5): traffic.bytes takes whole numbers, but this range goes from 1.5"),
    ("variants:\n  - name: v\n    sweep:\n      paths.A.queue: {from: 10, step: 2.5, count: 2}\n",
     "s.yaml: variants[0].sweep.paths.A.queue (line 6): topology.paths[0].queue takes whole numbers"),
])
def test_a_fractional_range_on_a_whole_number_field_names_the_range_and_the_field(extra, msg):
    with pytest.raises(ScenarioError) as e:
        parse_experiment(BASE + extra, "s.yaml")
    assert e.value.render().startswith(msg), e.value.render()


def test_no_sweep_is_one_point():
    exp = parse_experiment(BASE)
    assert len(exp.points) == 1 and exp.points[0].label == "base"


@pytest.mark.parametrize("extra,msg", [
    ("sweep: {paths.Q.delay: [1ms]}\n", "sweep: 'paths.Q.delay': no path named 'Q'"),
    ("sweep: {paths.A.delay: [15ms, 7]}\n", "sweep point paths.A.delay=7: topology.paths[0].delay: needs a unit"),
    ("sweep: {paths.A.delay: []}\n", "sweep.paths.A.delay"),
    ("sweep: {mptcp.colour: [red]}\n", "mptcp.colour: unknown key"),
    ("variants: [{name: x, set: {paths.A.bw: 1}}, {name: x, set: {paths.A.bw: 2}}]\n", "variant name 'x' is used twice"),
    ("expect: [{check: 'mptcp.speed > 1'}]\n", "unknown metric 'speed'"),
    ("expect: [{check: 'mptcp.throughput_mbps >> tcp'}]\n", "is not an expectation like"),
    ("expect: [{check: 'mptcp@Z.throughput_mbps > 1'}]\n", "expect[0].check (line 3): no path named 'Z'"),
    ("runs: {compare: [mptcp]}\nexpect: [{check: 'mptcp.throughput_mbps > tcp.throughput_mbps'}]\n",
     "mode 'tcp' is not in runs.compare"),
])
def test_bad_sweeps_and_expectations(extra, msg):
    with pytest.raises(ScenarioError) as e:
        parse_experiment(BASE + extra, "s.yaml")
    assert msg in e.value.render(), e.value.render()


def test_shards_partition_the_points():
    exp = parse_experiment(BASE + "sweep: {paths.A.bw: [1, 2, 3, 4, 5, 6, 7]}\n")
    for n in (1, 2, 3, 7, 9):
        shards = [shard_points(exp.points, (k, n)) for k in range(1, n + 1)]
        ids = [p.id for s in shards for p in s]
        assert sorted(ids) == [p.id for p in exp.points]          # every point exactly once


def test_topology_signature_ignores_shaping():
    exp = parse_experiment(BASE + "sweep: {paths.A.delay: [1ms, 2ms]}\n")
    assert topology_signature(exp.points[0]) == topology_signature(exp.points[1])


def test_jobs_of_many_points_are_interleaved_and_keyed():
    exp = parse_experiment(BASE + "sweep: {paths.A.delay: [1ms, 2ms, 3ms]}\nruns: {repeat: 2}\n")
    jobs = plan_jobs(exp.points, range(1, 3), seed=1)
    assert len(jobs) == 3 * 2 * 2 and len({j.key for j in jobs}) == len(jobs)
    assert jobs[0].run_id.startswith(jobs[0].point.id + "-r001-")
    first_round = [j.point.id for j in jobs[:6]]
    assert first_round != sorted(first_round) or plan_jobs(exp.points, range(1, 2), seed=2)[0] != jobs[0]


# ---------------------------------------------------------------- statistics

def test_describe_known_values():
    s = stats.describe([2, 4, 4, 4, 5, 5, 7, 9])
    assert s.mean == 5 and s.median == 4.5 and s.min == 2 and s.max == 9
    assert s.stdev == pytest.approx(2.138, abs=1e-3)
    half = 2.365 * s.stdev / math.sqrt(8)                     # t(0.975, 7)
    assert (s.ci_low, s.ci_high) == pytest.approx((5 - half, 5 + half))
    assert (s.q1, s.q3) == (4.0, 5.5)


def test_single_value_has_no_interval():
    s = stats.describe([3.0])
    assert s.ci_low is None and s.stdev is None and s.q1 == s.q3 == 3.0


def test_t_table_and_interpolation():
    assert stats.t975(1) == 12.706 and stats.t975(30) == 2.042
    for df, table in ((40, 2.021), (60, 2.000), (120, 1.980), (1000, 1.9623)):   # beyond 120 it is not 1.96
        assert abs(stats.t975(df) - table) < 0.001, df
    assert stats.Z975 < stats.t975(10**6) < stats.t975(1000) < stats.t975(121)
    assert 2.021 < stats.t975(35) < 2.042
    assert stats.t975(9.7) == stats.t975(9)


def test_an_interval_below_what_a_count_can_be_is_cut_at_zero_and_says_so():
    s = stats.describe([0, 0, 9], floor=0.0)
    assert s.ci_low == 0.0 and s.ci_clipped and s.ci_high > 9
    assert not stats.describe([10, 11, 12], floor=0.0).ci_clipped


def test_welch_interval_known_values():
    est, lo, hi = stats.diff_ci([10, 11, 12], [5, 6, 7])
    # equal variances 1, n 3: se = sqrt(2/3), df = 4, t = 2.776
    half = 2.776 * math.sqrt(2 / 3)
    assert est == 5 and (lo, hi) == pytest.approx((5 - half, 5 + half))
    est, lo, hi = stats.diff_ci([2, 2], [1, 1], factor=2.0)
    assert (est, lo, hi) == (0.0, 0.0, 0.0)


# ---------------------------------------------------------------- verdicts

def runs(mode, primary, metric, values):
    return [{"mode": mode, "primary": primary, "status": "ok", "metrics": {metric: v}} for v in values]


@pytest.mark.parametrize("op,low,high,out", [
    (">", 0.1, 2, PASS), (">", -1, 2, INCONCLUSIVE), (">", -2, -0.1, FAIL), (">", -1, 0, FAIL),
    (">=", 0, 1, PASS), ("<", -2, -1, PASS), ("<", 1, 2, FAIL), ("<=", -1, 0, PASS), ("<", None, None, INCONCLUSIVE),
])
def test_decide(op, low, high, out):
    assert decide(op, low, high) == out


def test_verdict_pass_fail_and_inconclusive():
    check = parse_check("mptcp.throughput_mbps >= 1.8 * tcp.throughput_mbps")
    good = runs("mptcp", "A", "throughput_mbps", [19, 18.8, 19.2]) + runs("tcp", "A", "throughput_mbps", [9.5, 9.4, 9.6])
    assert evaluate(check, good).outcome == PASS
    bad = runs("mptcp", "A", "throughput_mbps", [10, 10.2, 9.9]) + runs("tcp", "A", "throughput_mbps", [9.5, 9.4, 9.6])
    assert evaluate(check, bad).outcome == FAIL
    noisy = runs("mptcp", "A", "throughput_mbps", [12, 25, 17]) + runs("tcp", "A", "throughput_mbps", [9.5, 9.4, 9.6])
    v = evaluate(check, noisy)
    assert v.outcome == INCONCLUSIVE and "needs more repetitions" in v.detail
    one = runs("mptcp", "A", "throughput_mbps", [30]) + runs("tcp", "A", "throughput_mbps", [9])
    assert evaluate(check, one).outcome == INCONCLUSIVE


def test_verdict_between_primaries_and_against_a_constant():
    r = runs("mptcp", "A", "ofo_mptcp", [7700, 7200, 7100]) + runs("mptcp", "B", "ofo_mptcp", [6500, 6200, 6190])
    assert evaluate(parse_check("mptcp@A.ofo_mptcp > mptcp@B.ofo_mptcp"), r).outcome == PASS
    assert evaluate(parse_check("mptcp@B.ofo_mptcp > mptcp@A.ofo_mptcp"), r).outcome == FAIL
    assert evaluate(parse_check("mptcp@B.ofo_mptcp < 7000"), r).outcome == PASS


def test_failed_runs_are_not_counted():
    r = runs("mptcp", "A", "throughput_mbps", [19, 19.1]) + [
        {"mode": "mptcp", "primary": "A", "status": "mptcp-fallback", "metrics": {"throughput_mbps": 1}}]
    assert evaluate(parse_check("mptcp.throughput_mbps > 18"), r).n_left == 2


def test_baseline_regression_is_flagged_only_when_significant():
    now = {"p001": ("base", runs("mptcp", "A", "throughput_mbps", [15, 15.2, 14.9]))}
    then = {"p001": ("base", runs("mptcp", "A", "throughput_mbps", [19, 19.1, 18.9]))}
    same = {"p001": ("base", runs("mptcp", "A", "throughput_mbps", [15.1, 15.0, 14.8]))}
    assert [v.outcome for v in regressions(now, then)] == [FAIL]
    assert [v.outcome for v in regressions(now, same)] == [PASS]
    assert regressions(now, {"p009": ("other", [])}) == []


def test_baseline_covers_completion_time_ofo_and_retransmissions():
    def point(seconds, retrans, fixed=True):
        rs = []
        for i, (s, r) in enumerate(zip(seconds, retrans)):
            m = {"throughput_mbps": 10.0, "seconds": s, "retrans_segs": r, "ofo_tcp": 0, "ofo_mptcp": 5}
            if fixed:
                m["delivered_fraction"] = 1.0
            rs.append({"id": f"r{i}", "mode": "mptcp", "primary": "A", "status": "ok", "metrics": m})
        return {"p001": ("base", rs)}
    verdicts = {v.name: v for v in regressions(point([4.0, 4.1, 4.05], [900, 950, 920]),
                                               point([2.0, 2.1, 2.05], [10, 12, 11]))}
    assert verdicts["baseline mptcp@A.seconds"].outcome == FAIL
    assert verdicts["baseline mptcp@A.retrans_segs"].outcome == FAIL
    assert verdicts["baseline mptcp@A.throughput_mbps"].outcome == PASS
    timed = {v.name for v in regressions(point([10.2], [1], fixed=False), point([10.1], [1], fixed=False))}
    assert "baseline mptcp@A.seconds" not in timed          # a timed run's seconds is its duration
    single = next(v for v in regressions(point([4.0], [9]), point([2.0], [9])) if v.name.endswith("seconds"))
    assert single.outcome == INCONCLUSIVE and "now - baseline +2" in single.detail and "2 runs" in single.detail


# ---------------------------------------------------------------- JUnit

def test_junit_validates_against_schema():
    check = parse_check("mptcp.throughput_mbps > tcp.throughput_mbps")
    vs = [evaluate(check, runs("mptcp", "A", "throughput_mbps", [19, 19.2]) + runs("tcp", "A", "throughput_mbps", [9, 9.1]), "p001", "base"),
          evaluate(check, runs("mptcp", "A", "throughput_mbps", [5, 5.2]) + runs("tcp", "A", "throughput_mbps", [9, 9.1]), "p002", "x=1"),
          evaluate(check, runs("mptcp", "A", "throughput_mbps", [19]) + runs("tcp", "A", "throughput_mbps", [9]), "p003", "x=2")]
    xml = render_junit("t", vs, "2026-11-21T00:00:00Z")
    xmlschema.XMLSchema(str(FIX / "junit.xsd")).validate(xml)
    assert 'failures="1"' in xml and 'skipped="1"' in xml and 'tests="3"' in xml
    assert "inconclusive" in xml


def test_junit_has_a_case_per_run_with_its_time_and_an_error_for_a_fallback():
    proto = json.loads((FIX / "run-mptcp.json").read_text())
    ok = {**proto, "id": "r001-mptcp-A", "point": "p001", "point_label": "base"}
    fell_back = {**ok, "id": "r002-mptcp-A", "status": "mptcp-fallback"}
    meta = {"status": "failed", "phases": {"runs": [{"id": "r001-mptcp-A", "wall": 14.25}]}}
    xml = render_junit("t", [], "2026-11-22T00:00:00Z", runs=[ok, fell_back], metadata=meta)
    xmlschema.XMLSchema(str(FIX / "junit.xsd")).validate(xml)
    assert 'tests="3"' in xml and 'errors="2"' in xml and 'time="14.250"' in xml
    assert 'type="mptcp-fallback"' in xml and "the run set ended failed" in xml


def test_new_result_sets_are_linked_as_latest_once_they_have_runs(tmp_path):
    from runners.results.store import new_run_dir
    first = new_run_dir(tmp_path, "s")
    second = new_run_dir(tmp_path, "s")
    latest = tmp_path / "s" / "latest"
    assert first != second and not latest.exists()   # the rest: test_latest.py
    ResultStore(second).add_run({"id": "r001-tcp-A", "mode": "tcp", "repeat": 1, "primary": "A", "status": "ok",
                                 "metrics": {"throughput_mbps": 9.5}})
    assert latest.is_symlink() and latest.resolve() == second.resolve()


# ---------------------------------------------------------------- result sets: resume, merge, report, plots

SWEEP = BASE + """\
sweep: {paths.A.delay: [15ms, 250ms]}
runs: {primaries: [A, B], compare: [mptcp], repeat: 2}
expect:
  - {name: b-beats-a, check: mptcp@B.throughput_mbps > mptcp@A.throughput_mbps}
"""


def fake_result_set(tmp_path: Path, name: str, points, reps=(1, 2), status: str | None = None) -> Path:
    """A result set as the runner writes it, from the recorded MPTCP run (tests/fixtures); ended with
    `status` when given."""
    exp = parse_experiment(SWEEP)
    proto = json.loads((FIX / "run-mptcp.json").read_text())
    d = tmp_path / name
    store = ResultStore(d)
    store.write_scenario(SWEEP)
    store.set_metadata(scenario="t", seed=3)
    for job in plan_jobs([p for p in exp.points if p.id in points], range(reps[0], reps[-1] + 1), 3, True):
        r = json.loads(json.dumps(proto))
        slow = 250.0 in [x.delay for x in job.point.scenario.topology.paths]
        r.update(id=job.run_id, repeat=job.rep, primary=job.primary, mode="mptcp", point=job.point.id,
                 point_label=job.point.label, params=job.point.params)
        r["metrics"]["throughput_mbps"] = (13 if slow and job.primary == "A" else 15) + 0.1 * job.rep
        r["metrics"]["ofo_mptcp"] = 7000 + 100 * job.rep if job.primary == "A" else 6000 + 50 * job.rep
        store.add_run(r)
    if status:
        store.finish_metadata(status=status)
    return d


def test_resume_bookkeeping_skips_finished_runs(tmp_path):
    d = fake_result_set(tmp_path, "set", {"p001"}, reps=(1, 1))
    done = {run_key(r) for r in json.loads((d / "results.json").read_text())["runs"]}
    exp = parse_experiment(SWEEP)
    todo = [j for j in plan_jobs(exp.points, range(1, 3), 3, True) if j.key not in done]
    assert len(done) == 2 and len(todo) == 2 * 2 * 2 - 2
    assert not any(j.point.id == "p001" and j.rep == 1 for j in todo)


def test_merge_of_shards_and_overlap_refused(tmp_path):
    a = fake_result_set(tmp_path, "a", {"p001"})
    b = fake_result_set(tmp_path, "b", {"p002"})
    merged = merge([a, b], tmp_path / "out")
    doc = json.loads((merged / "results.json").read_text())
    assert {r["point"] for r in doc["runs"]} == {"p001", "p002"} and len(doc["runs"]) == 8
    assert (merged / "raw" / doc["runs"][0]["id"] / "run.json").exists()
    with pytest.raises(MergeError, match="overlapping"):
        merge([a, a], tmp_path / "out")


def test_merged_shards_that_ended_ok_are_a_whole_set_in_the_junit(tmp_path):
    # the Slurm test found every merged set's JUnit with an error case "the run set ended merged"
    a = fake_result_set(tmp_path, "a", {"p001"}, status="ok")
    b = fake_result_set(tmp_path, "b", {"p002"}, status="ok")
    doc = json.loads((merge([a, b], tmp_path / "out") / "results.json").read_text())
    assert doc["metadata"]["status"] == "merged"
    assert [m["status"] for m in doc["metadata"]["merged_from"]] == ["ok", "ok"]
    junit = render_junit("t", [], runs=doc["runs"], metadata=doc["metadata"])
    assert 'errors="0"' in junit and "run set" not in junit

    c = fake_result_set(tmp_path, "c", {"p002"}, status="interrupted")
    doc = json.loads((merge([a, c], tmp_path / "out") / "results.json").read_text())
    assert doc["metadata"]["status"] == "interrupted"
    junit = render_junit("t", [], runs=doc["runs"], metadata=doc["metadata"])
    assert 'errors="1"' in junit and "the run set ended interrupted" in junit


def test_report_writes_stats_verdicts_junit_and_plots(tmp_path):
    d = fake_result_set(tmp_path, "set", {"p001", "p002"})
    rep = make_report(d)
    outcomes = {v.point: v.outcome for v in rep.verdicts}
    assert outcomes == {"p001": INCONCLUSIVE, "p002": PASS} or outcomes["p002"] == PASS
    for f in ("stats.json", "stats.csv", "verdicts.json", "junit.xml"):
        assert (d / f).exists(), f
    xmlschema.XMLSchema(str(FIX / "junit.xsd")).validate(str(d / "junit.xml"))
    plots = {p.name for p in (d / "plots").iterdir()}
    for stem in ("box-throughput_mbps", "box-ofo_mptcp", "throughput_mbps-vs-paths.A.delay",
                 "ofo_mptcp-vs-paths.A.delay"):
        assert f"{stem}.png" in plots and f"{stem}.svg" not in plots, plots   # SVG only on request
    assert any(p.startswith("timeseries-") for p in plots)
    make_report(d, svg=True)
    plots = {p.name for p in (d / "plots").iterdir()}
    assert "box-throughput_mbps.svg" in plots
    row = next(r for r in rep.stats if r["point"] == "p002" and r["case"] == "mptcp@A" and r["metric"] == "throughput_mbps")
    assert row["n"] == 2 and row["mean"] == pytest.approx(13.15)


def test_expectations_apply_only_where_told():
    exp = parse_experiment(BASE + """\
variants:
  - {name: slow, set: {paths.A.delay: 250ms}}
  - {name: same}
sweep: {traffic.duration: [5, 10]}
runs: {primaries: [A, B], compare: [mptcp]}
expect:
  - {check: "mptcp@B.throughput_mbps > mptcp@A.throughput_mbps", when: {variant: [slow], traffic.duration: [10]}}
""")
    e = exp.scenario.expect[0]
    assert [p.params for p in exp.points if e.applies(p.params)] == [{"variant": "slow", "traffic.duration": 10}]
    with pytest.raises(ScenarioError, match=r"expect\[0\].when.colour \(line 3\): not a sweep key"):
        parse_experiment(BASE + "expect: [{check: 'mptcp.subflows >= 2', when: {colour: [red]}}]\n")


def test_e4_full_scenario_covers_the_papers_figures():
    from scenarios.spec.loader import load_experiment
    exp = load_experiment(Path(__file__).resolve().parents[2] / "scenarios" / "e4-primary-path.yaml")
    variants = {p.params["variant"] for p in exp.points}
    assert variants == {"exp1-delay", "exp2-bandwidth", "exp3-loss", "fig5-delay", "fig5-bandwidth", "fig5-loss"}
    exp1 = [p for p in exp.points if p.params["variant"] == "exp1-delay"]
    assert {p.scenario.topology.path("A").delay for p in exp1} == {250.0}
    assert sorted(p.scenario.traffic.duration for p in exp1) == [5, 10, 20, 40]        # Figure 4
    assert all(p.scenario.topology.path("B") == exp1[0].scenario.topology.path("B") for p in exp.points)
    assert all(p.scenario.primaries == ["A", "B"] for p in exp.points)
    claimed = {p.id for p in exp.points for e in exp.scenario.expect if e.applies(p.params)}
    assert not any(p.id in claimed and p.params.get("paths.A.delay") == "15ms" for p in exp.points)


def test_report_on_a_hand_edited_scenario_names_the_field_without_a_traceback(tmp_path, capsys):
    from runners.cli import main
    d = fake_result_set(tmp_path, "set", {"p001"})
    (d / "scenario.yaml").write_text((d / "scenario.yaml").read_text().replace("name: t\n", "name: 'bad name!'\n"))
    assert main(["report", str(d)]) == 2
    err = capsys.readouterr().err
    assert "scenario.yaml: name (line 1)" in err and "Traceback" not in err
