"""Raw files wait in memory until the run's traffic is over (runners.results.store.DeferredWriter): all of them
are on disk once flush returns, the later text of a file wins, a failed write is raised, and an exit
without a flush still writes them."""
import errno
import json
import subprocess
import sys
import textwrap

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
