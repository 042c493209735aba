"""results.json and runs.csv as the store writes them after every run: byte for byte what serialising the
whole set gives, while each run is serialised again only when its record or derived metrics changed."""
import copy
import json
from pathlib import Path

from runners.results import set_text
from runners.results.derived import with_derived
from runners.results.store import ResultStore
from runners.results.table import render_csv

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "fidelity"


def recorded(name: str, run_id: str, mode: str, primary: str = "A", point: str = "p001", **extra) -> dict:
    run = json.loads((FIXTURES / name / "run.json").read_text())
    run.update(id=run_id, mode=mode, primary=primary, point=point, point_label=point, repeat=1, status="ok", **extra)
    return run


def whole_set_text(store: ResultStore) -> tuple[str, str]:
    """What the store wrote before set_text: every run copied, derived within its point, and serialised."""
    by_point: dict[str, list[dict]] = {}
    for r in store.runs:
        by_point.setdefault(r.get("point", "p001"), []).append(r)
    derived = {id(o): n for group in by_point.values() for o, n in zip(group, with_derived(group))}
    runs = [derived[id(r)] for r in store.runs]
    doc = {"format": 1, "metadata": store.metadata, **store.extra, "runs": runs}
    return json.dumps(doc, indent=2, default=str) + "\n", render_csv(runs)


def a_sweep(points: int) -> list[dict]:
    """Per point: an MPTCP run first (its efficiency comes with the TCP baselines after it), two TCP runs;
    swept values as params, a new swept key from the second point on."""
    runs = []
    for p in range(points):
        pid = f"p{p + 1:03d}"
        params = {"paths.A.bw": 10 + p, **({"paths.B.delay": f"{p}ms"} if p else {})}
        runs += [recorded("overload-mptcp", f"{pid}-m", "mptcp", point=pid, params=params,
                          efficiency_paths=["A", "B"]),
                 recorded("overload-tcp", f"{pid}-ta", "tcp", "A", point=pid, params=params),
                 recorded("lab3-routed-tcp", f"{pid}-tb", "tcp", "B", point=pid, params=params)]
    return runs


def test_every_write_is_what_serialising_the_whole_set_gives(tmp_path):
    store = ResultStore(tmp_path / "set", links_latest=False)
    store.metadata = {"scenario": "s", "started": "2026-11-28T02:00:00Z"}
    for run in a_sweep(3):
        store.add_run(run)
        assert ((tmp_path / "set" / "results.json").read_text(), (tmp_path / "set" / "runs.csv").read_text()) \
            == whole_set_text(store), run["id"]
    doc = json.loads((tmp_path / "set" / "results.json").read_text())
    assert [r["metrics"].get("efficiency") is not None for r in doc["runs"]] == [True, False, False] * 3
    assert "efficiency" not in store.runs[0]["metrics"]   # the record stays as measured


def test_a_run_added_again_a_resumed_set_and_extra_keys_are_written_anew(tmp_path):
    store = ResultStore(tmp_path / "set", links_latest=False)
    runs = a_sweep(2)
    for run in runs:
        store.add_run(run)
    again = copy.deepcopy(runs[1])                  # the same id, rerun: its new record replaces the old
    again["metrics"]["throughput_mbps"] = 1.25
    store.add_run(again)
    store.set_extra("calibration", {"kernel": "6.1"})
    assert (tmp_path / "set" / "results.json").read_text() == whole_set_text(store)[0]
    assert (tmp_path / "set" / "runs.csv").read_text() == whole_set_text(store)[1]
    resumed = ResultStore(tmp_path / "set", links_latest=False)   # as a resumed set reads its runs back
    resumed.runs = json.loads((tmp_path / "set" / "results.json").read_text())["runs"]
    for r in resumed.runs:
        r["metrics"].pop("efficiency", None)
    resumed.add_run(recorded("overload-tcp", "p003-ta", "tcp", point="p003"))
    assert (tmp_path / "set" / "results.json").read_text() == whole_set_text(resumed)[0]
    assert (tmp_path / "set" / "runs.csv").read_text() == whole_set_text(resumed)[1]


def test_an_empty_set_has_an_empty_list_of_runs():
    text = set_text.SetText().results_json({"format": 1, "metadata": {}}, [], {})
    assert text == json.dumps({"format": 1, "metadata": {}, "runs": []}, indent=2) + "\n"


def test_a_long_set_serialises_each_run_about_once(tmp_path, monkeypatch):
    """The cost that grew with the square of the set's length: every run serialised after every run."""
    made = []

    class CountingJson:
        @staticmethod
        def dumps(obj, *a, **kw):
            if isinstance(obj, dict) and "id" in obj:
                made.append(obj["id"])
            return json.dumps(obj, *a, **kw)

    monkeypatch.setattr(set_text, "json", CountingJson)   # set_text's serialising only, not run.json's
    store = ResultStore(tmp_path / "set", links_latest=False)
    runs = a_sweep(20)
    for run in runs:
        store.add_run(run)
    # each run once when added, and an MPTCP run again when its point's second baseline gives its efficiency
    assert len(made) == len(runs) + 20, len(made)
    assert (tmp_path / "set" / "results.json").read_text() == whole_set_text(store)[0]
