"""Raw files are written in a thread of their own (runners.results.BackgroundWriter): in order, all of
them by the time flush returns, and a failed write is raised in the caller's thread, not lost."""
import errno
import json
import subprocess
import sys
import textwrap
import time

import pytest

from runners.paths import REPO
from runners.results import BackgroundWriter, ResultStore


def test_flush_returns_when_every_file_is_written(tmp_path):
    store = ResultStore(tmp_path)
    for k in range(50):
        store.save_raw(f"r{k % 3:03d}-tcp-A", f"f{k}.txt", f"content {k}\n")
    store.flush_raw()
    for k in range(50):
        assert (tmp_path / "raw" / f"r{k % 3:03d}-tcp-A" / f"f{k}.txt").read_text() == f"content {k}\n"
    assert not list(tmp_path.rglob(".f*"))   # no temporary file left behind


def test_a_file_written_twice_keeps_the_later_text(tmp_path):
    w = BackgroundWriter()
    for k in range(20):
        w.put(tmp_path / "same.txt", f"version {k}")
    w.flush()
    assert (tmp_path / "same.txt").read_text() == "version 19"


def test_a_failed_write_is_raised_by_the_next_save_and_later_writes_are_dropped(tmp_path):
    store = ResultStore(tmp_path)
    (tmp_path / "raw").write_text("a file where the raw folder should be")
    store.save_raw("r001-tcp-A", "ping-A.txt", "x")
    with pytest.raises(OSError) as caught:
        store.flush_raw()
    assert caught.value.errno in (errno.ENOTDIR, errno.EEXIST)
    store.flush_raw()   # raised once: the next flush has nothing to say


def test_add_run_raises_an_earlier_failed_write_before_recording(tmp_path):
    store = ResultStore(tmp_path)
    (tmp_path / "raw").write_text("not a folder")
    store.save_raw("r001-tcp-A", "ping-A.txt", "x")
    deadline = time.monotonic() + 10
    while store.raw_writer._thread is not None and time.monotonic() < deadline:   # the write has failed
        time.sleep(0.01)
    with pytest.raises(OSError):
        store.add_run({"id": "r001-tcp-A", "mode": "tcp", "metrics": {}})
    assert not (tmp_path / "results.json").exists()


def test_an_exit_without_flush_still_writes_what_was_handed_over(tmp_path):
    """The writer thread is not a daemon: the interpreter waits for it at exit."""
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO)!r})
        from runners.results import ResultStore
        s = ResultStore({str(tmp_path)!r})
        for k in range(30):
            s.save_raw("r001-tcp-A", f"f{{k}}.json", '{{"k": %d}}' % k)
        sys.exit(3)
    """)
    r = subprocess.run([sys.executable, "-c", code], timeout=60)
    assert r.returncode == 3
    assert [json.loads((tmp_path / "raw" / "r001-tcp-A" / f"f{k}.json").read_text())["k"] for k in range(30)] \
        == list(range(30))
