"""`results/<scenario>/latest`: the newest result set that has runs. A set that ends before its first run and
a `run-scenario shell` session (its own folder, `shell/<stamp>`) leave it where it was, so that a handout's
`results/<scenario>/latest/stats.csv` still finds the runs it means (issue 28, item 2). No root needed."""
import json
import os
import subprocess
import sys
from pathlib import Path

from runners.pipeline.shell import open_session
from runners.results.merge import merge
from runners.results.store import ResultStore, new_run_dir, point_latest

REPO = Path(__file__).resolve().parents[2]
RUN = {"id": "r001-mptcp-A", "mode": "mptcp", "repeat": 1, "primary": "A", "status": "ok",
       "metrics": {"throughput_mbps": 18.5, "subflows": 2}, "paths": {"A": {"bytes_received": 100, "share": 1.0}}}
SCENARIO = "name: s\ntopology: {kind: dual-homed, paths: [{name: A, bw: 10}]}\n"


def latest(base: Path) -> Path | None:
    link = base / "s" / "latest"
    return link.resolve() if os.path.lexists(link) else None


def a_set_with_a_run(base: Path) -> Path:
    store = ResultStore(new_run_dir(base, "s"))
    store.write_scenario(SCENARIO)
    store.add_run(RUN)
    return store.dir


def test_latest_follows_the_newest_set_with_runs(tmp_path):
    first = new_run_dir(tmp_path, "s")
    assert latest(tmp_path) is None                       # made, no run yet
    ResultStore(first).add_run(RUN)
    assert latest(tmp_path) == first.resolve()
    ended_early = new_run_dir(tmp_path, "s")             # e.g. its build failed: no run
    point_latest(ended_early.parent)                     # what the CLI does when a set ends
    assert latest(tmp_path) == first.resolve()
    second = a_set_with_a_run(tmp_path)
    assert latest(tmp_path) == second.resolve()
    ResultStore(ended_early).add_run(RUN)                # resumed later: older than `second`
    assert latest(tmp_path) == second.resolve()


def test_a_shell_session_writes_apart_and_leaves_latest_alone(tmp_path):
    runs = a_set_with_a_run(tmp_path)
    session = open_session(tmp_path, "s")                # natively, and on the host for the VM backend
    session.write_scenario(SCENARIO)
    session.set_metadata(scenario="s", shell=True)
    session.add_run(RUN)                                 # `traffic` in the shell: a real run
    assert session.dir.parent == tmp_path.resolve() / "s" / "shell"
    assert json.loads((session.dir / "results.json").read_text())["runs"][0]["id"] == "r001-mptcp-A"
    assert latest(tmp_path) == runs.resolve()
    assert not os.path.lexists(session.dir.parent / "latest")
    point_latest(tmp_path / "s")                         # the shell/ folder is not a result set
    assert latest(tmp_path) == runs.resolve()
    guest = open_session(tmp_path, "s", run_dir=session.dir)   # the VM's guest: the folder the host made
    assert guest.dir == session.dir and not guest.links_latest


def test_a_shell_set_of_the_old_layout_does_not_take_latest(tmp_path):
    runs = a_set_with_a_run(tmp_path)
    old = ResultStore(new_run_dir(tmp_path, "s"), links_latest=False)   # results/s/<stamp>, from the shell
    old.set_metadata(scenario="s", shell=True)
    old.add_run(RUN)
    point_latest(tmp_path / "s")
    assert latest(tmp_path) == runs.resolve()


def test_a_merged_set_becomes_latest(tmp_path):
    one, two = a_set_with_a_run(tmp_path / "a"), a_set_with_a_run(tmp_path / "b")
    doc = json.loads((two / "results.json").read_text())
    doc["runs"][0]["id"], doc["runs"][0]["repeat"] = "r002-mptcp-A", 2
    (two / "results.json").write_text(json.dumps(doc))
    merged = merge([one, two], tmp_path / "out")
    assert latest(tmp_path / "out") == merged.resolve()


def test_resume_refuses_a_shell_session(tmp_path):
    session = open_session(tmp_path, "s")
    session.write_scenario(SCENARIO)
    session.set_metadata(scenario="s", shell=True)
    r = subprocess.run([sys.executable, "-m", "runners.cli", "--resume", str(session.dir), "--dry-run"], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"--resume {session.dir}: a `run-scenario shell` session's folder" in r.stderr


def test_finding_the_newest_set_asks_nothing_of_the_older_ones(tmp_path, monkeypatch):
    """Each question is a 9p round trip in the VM's guest: a scenario with many sets must not cost more."""
    from runners.results import store as store_module

    older = [a_set_with_a_run(tmp_path) for _ in range(3)]
    newest = a_set_with_a_run(tmp_path)
    asked = []
    real = store_module.has_runs
    monkeypatch.setattr(store_module, "has_runs", lambda d: asked.append(Path(d).name) or real(d))
    assert store_module.newest_set_with_runs(tmp_path / "s") == newest
    assert asked == [newest.name] and newest.name > max(d.name for d in older)
    (newest / "results.json").unlink()                   # its runs gone: the next one down is asked
    asked.clear()
    assert store_module.newest_set_with_runs(tmp_path / "s") == older[-1]
    assert asked == [newest.name, older[-1].name]
