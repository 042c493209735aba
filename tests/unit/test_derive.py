"""Derived metrics are computed on copies: the runs loaded from results.json stay as they were."""
import copy

from runners.results.derived import efficiency_by_run, group_runs


def _run(rid, mode, primary, mbps, point="p001", **extra):
    return {"id": rid, "mode": mode, "primary": primary, "status": "ok", "point": point, "repeat": 1,
            "metrics": {"throughput_mbps": mbps}, **extra}


def test_efficiency_is_mptcp_over_the_sum_of_the_named_tcp_means():
    runs = [_run("t1", "tcp", "A", 9.0), _run("t2", "tcp", "A", 11.0), _run("t3", "tcp", "B", 10.0),
            _run("m1", "mptcp", "A", 19.0, efficiency_paths=["A", "B"]),
            _run("m2", "mptcp", "A", 19.0, efficiency_paths=["A", "C"])]   # no TCP run on C: none
    assert efficiency_by_run(runs) == {"m1": 19.0 / 20.0}


def test_grouping_adds_derived_metrics_without_changing_the_input():
    doc = {"runs": [_run("t1", "tcp", "A", 10.0, point="p002"), _run("m1", "mptcp", "A", 15.0, point="p002",
                                                                     efficiency_paths=["A"]),
                    _run("t2", "tcp", "A", 10.0)]}
    before = copy.deepcopy(doc)
    groups = group_runs(doc)
    assert doc == before
    assert list(groups) == ["p001", "p002"]
    assert groups["p002"][1][1]["metrics"]["efficiency"] == 1.5


def test_the_store_writes_efficiency_into_results_and_runs_csv_whatever_the_run_order(tmp_path):
    """The MPTCP run may finish before its TCP baselines (randomised order): every write recomputes."""
    import csv
    import json

    from runners.results.store import ResultStore

    store = ResultStore(tmp_path)
    store.add_run(_run("m1", "mptcp", "A", 15.0, efficiency_paths=["A", "B"], paths={}))
    assert "efficiency" not in json.loads((tmp_path / "results.json").read_text())["runs"][0]["metrics"]
    store.add_run(_run("t1", "tcp", "A", 10.0, paths={}))
    store.add_run(_run("t2", "tcp", "B", 5.0, paths={}))
    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert runs[0]["metrics"]["efficiency"] == 1.0
    assert "efficiency" not in store.runs[0]["metrics"]      # the store's own runs stay as measured
    rows = [r for r in csv.DictReader((tmp_path / "runs.csv").open()) if r["metric"] == "efficiency"]
    assert [(r["run_id"], float(r["value"]), r["unit"]) for r in rows] == [("m1", 1.0, "fraction")]
