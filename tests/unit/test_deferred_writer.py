"""Raw files wait in memory until the run's traffic is over (runners.results.store.DeferredWriter): all of them
are on disk once flush returns, the later text of a file wins, a failed write is raised, and an exit
without a flush still writes them."""
import errno
import json
import subprocess
import sys
import textwrap
import threading

import pytest

from runners.paths import REPO
from runners.results.store import DeferredWriter, ResultStore

RUN = {"id": "r001-tcp-A", "mode": "tcp", "repeat": 1, "primary": "A", "status": "ok",
       "metrics": {"throughput_mbps": 9.5}, "paths": {}}


def test_nothing_is_written_before_the_flush_and_everything_after_it(tmp_path):
    store = ResultStore(tmp_path)
    for k in range(50):
        store.save_raw(f"r{k % 3:03d}-tcp-A", f"f{k}.txt", f"content {k}\n")
    assert not (tmp_path / "raw").exists()   # nothing touches the disk while a run measures
    store.flush_raw()
    for k in range(50):
        assert (tmp_path / "raw" / f"r{k % 3:03d}-tcp-A" / f"f{k}.txt").read_text() == f"content {k}\n"
    assert not [p for p in tmp_path.rglob(".*") if p.is_file()]   # no temporary file left behind


def test_a_file_handed_over_twice_keeps_the_later_text(tmp_path):
    w = DeferredWriter()
    for k in range(20):
        w.put(tmp_path / "same.txt", f"version {k}")
    w.flush()
    assert (tmp_path / "same.txt").read_text() == "version 19"


def test_a_failed_write_is_raised_by_the_flush_once(tmp_path):
    store = ResultStore(tmp_path)
    (tmp_path / "raw").write_text("a file where the raw folder should be")
    store.save_raw("r001-tcp-A", "ping-A.txt", "x")
    with pytest.raises(OSError) as caught:
        store.flush_raw()
    assert caught.value.errno in (errno.ENOTDIR, errno.EEXIST)
    store.flush_raw()   # handed over once: the next flush has nothing to write


def test_add_run_writes_the_runs_raw_files_before_recording_it(tmp_path):
    store = ResultStore(tmp_path)
    store.save_raw("r001-tcp-A", "ping-A.txt", "64 bytes from 10.0.1.2")
    store.add_run(RUN)
    assert (tmp_path / "raw" / "r001-tcp-A" / "ping-A.txt").exists()
    assert json.loads((tmp_path / "results.json").read_text())["runs"][0]["id"] == "r001-tcp-A"


def test_a_run_whose_raw_files_cannot_be_written_is_not_recorded(tmp_path):
    store = ResultStore(tmp_path)
    (tmp_path / "raw").write_text("not a folder")
    store.save_raw("r001-tcp-A", "ping-A.txt", "x")
    with pytest.raises(OSError):
        store.add_run(RUN)
    assert not (tmp_path / "results.json").exists()


def test_an_exit_without_flush_still_writes_what_was_handed_over(tmp_path):
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO)!r})
        from runners.results.store import ResultStore
        s = ResultStore({str(tmp_path)!r})
        for k in range(30):
            s.save_raw("r001-tcp-A", f"f{{k}}.json", '{{"k": %d}}' % k)
        sys.exit(3)
    """)
    r = subprocess.run([sys.executable, "-c", code], timeout=60)
    assert r.returncode == 3
    assert [json.loads((tmp_path / "raw" / "r001-tcp-A" / f"f{k}.json").read_text())["k"] for k in range(30)] \
        == list(range(30))


# ------------------------------------------------ runs written in the background (add_runs(background=True))

def test_runs_handed_over_in_the_background_are_on_disk_once_settled_raw_files_first(tmp_path, monkeypatch):
    import runners.results.store as store_mod

    order, gate, real = [], threading.Event(), store_mod.atomic_write

    def slow_write(path, data, make_parent=True):
        gate.wait(10)   # the caller goes on while the write waits (a 9p round trip in a VM)
        order.append(path.relative_to(tmp_path).as_posix())
        real(path, data, make_parent)

    monkeypatch.setattr(store_mod, "atomic_write", slow_write)
    store = ResultStore(tmp_path)
    store.save_raw("r001-tcp-A", "ping-A.txt", "64 bytes from 10.0.1.2")
    store.save_raw("r001-tcp-A", "iperf3-client.json", "{}")
    store.add_runs([RUN, {**RUN, "id": "r001-tcp-B", "primary": "B"}], background=True)
    assert not (tmp_path / "results.json").exists()   # handed over; the caller was not kept waiting
    gate.set()
    store.settle()
    doc = json.loads((tmp_path / "results.json").read_text())
    assert [r["id"] for r in doc["runs"]] == ["r001-tcp-A", "r001-tcp-B"]
    assert order.index("results.json") > max(order.index("raw/r001-tcp-A/ping-A.txt"),
                                             order.index("raw/r001-tcp-A/iperf3-client.json"))
    assert order.count("results.json") == 1   # two runs of one job: one write of the set's files
    store.flush_raw()
    assert json.loads((tmp_path / "raw" / "r001-tcp-B" / "run.json").read_text())["primary"] == "B"


def test_a_background_write_that_failed_is_raised_by_the_next_settle_once(tmp_path):
    store = ResultStore(tmp_path)
    (tmp_path / "raw").write_text("not a folder")
    store.save_raw("r001-tcp-A", "ping-A.txt", "x")
    store.add_runs([RUN], background=True)
    with pytest.raises(OSError):
        store.settle()
    store.settle()   # raised once
    assert not (tmp_path / "results.json").exists()   # its raw files were not written: not recorded


@pytest.mark.parametrize("change, writes", [("set_metadata", "metadata.json"), ("set_extra", "results.json"),
                                            ("add_run", "results.json"), ("write_scenario", "scenario.yaml"),
                                            ("flush_raw", None)])
def test_every_other_change_of_the_set_waits_for_the_runs_being_written(tmp_path, monkeypatch, change, writes):
    import runners.results.store as store_mod

    gate, real, order = threading.Event(), store_mod.atomic_write, []

    def slow_write(path, data, make_parent=True):
        if threading.current_thread().name == "store-runs":
            gate.wait(10)
        order.append(path.name)
        real(path, data, make_parent)

    monkeypatch.setattr(store_mod, "atomic_write", slow_write)
    store = ResultStore(tmp_path)
    store.add_runs([RUN], background=True)
    threading.Timer(0.2, gate.set).start()
    args = {"set_metadata": {"status": "ok"}, "set_extra": {"key": "k", "value": 1}, "flush_raw": {},
            "add_run": {"run": {**RUN, "id": "r002-tcp-A", "repeat": 2}}, "write_scenario": {"text": "name: x\n"}}
    getattr(store, change)(**args[change])
    assert store._writing is None and "r001-tcp-A" in (tmp_path / "results.json").read_text()
    # the background's results.json first: the change wrote nothing before the runs were on disk
    assert order[0] == "results.json"
    if writes is not None:
        assert writes in order[1:]


def test_a_write_that_gets_no_thread_is_done_at_once_and_said_after_it(tmp_path, monkeypatch):
    said = []
    monkeypatch.setattr(threading.Thread, "start", lambda self: (_ for _ in ()).throw(RuntimeError("can't start new thread")))
    store = ResultStore(tmp_path)
    store.add_runs([RUN], background=True, then=lambda: said.append((tmp_path / "results.json").exists()))
    assert said == [True]
    store.settle()
    assert said == [True]


def test_the_writer_thread_leaves_ctrl_c_and_sigterm_to_the_main_thread(tmp_path, monkeypatch):
    import signal

    import runners.results.store as store_mod

    masks, real = [], store_mod.atomic_write

    def seeing_mask(path, data, make_parent=True):
        masks.append(signal.pthread_sigmask(signal.SIG_BLOCK, set()))
        real(path, data, make_parent)

    monkeypatch.setattr(store_mod, "atomic_write", seeing_mask)
    store = ResultStore(tmp_path)
    store.add_runs([RUN], background=True)
    store.settle()
    assert masks and all({signal.SIGINT, signal.SIGTERM, signal.SIGHUP} <= m for m in masks)


def test_what_follows_a_background_write_is_done_by_settle_in_its_callers_thread_and_not_after_a_failure(tmp_path):
    said = []
    store = ResultStore(tmp_path)
    store.add_runs([RUN], background=True,
                   then=lambda: said.append(((tmp_path / "results.json").exists(), threading.current_thread())))
    store.settle()
    assert said == [(True, threading.main_thread())]   # the run's line: printed once it is on disk
    store.settle()
    assert len(said) == 1

    lost = ResultStore(tmp_path / "lost")
    (tmp_path / "lost" / "raw").write_text("not a folder")
    lost.save_raw("r001-tcp-A", "ping-A.txt", "x")
    lost.add_runs([RUN], background=True, then=lambda: said.append("lost"))
    with pytest.raises(OSError):
        lost.settle()
    lost.settle()
    assert "lost" not in said   # never said finished: it was not kept


def test_a_disk_that_failed_the_last_runs_records_is_what_stopped_the_set_whatever_the_next_run_met(tmp_path,
                                                                                                      monkeypatch):
    """Run 1's records fail (a full disk) while run 2 sets up, and run 2's set-up then fails too: the set ends
    on the disk, with the status that says --resume completes it, not on run 2's error."""
    import runners.results.store as store_mod
    from runners.errors import EXIT_FAIL, RunFailure
    from runners.runset.session import RESULTS_UNWRITABLE, RunSet, run_to_the_end

    def full(path, data, make_parent=True):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    class Runner:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def run_jobs(self, jobs):
            store.add_runs([RUN], background=True)   # run 1 ends
            raise RunFailure("the iperf3 server on h2 did not start")   # run 2's set-up

    store = ResultStore(tmp_path)
    monkeypatch.setattr(store_mod, "atomic_write", full)
    said = []
    run_set = RunSet(exp=None, store=store, resumed=False, seed=1, shard=None, points=[], repeat=1)
    progress = type("P", (), {"close": lambda self: None})()
    code, status, why = run_to_the_end(Runner(), run_set, [], None, progress, said.append)
    assert (code, status) == (EXIT_FAIL, RESULTS_UNWRITABLE)
    assert "No space left on device" in why and said == [why + "; the set stopped there"]
