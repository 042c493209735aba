"""The host's side of a VM set's CPU (runners.linux.host_cpu): /proc's text, recorded from this machine's
kind (Debian 12, 2 CPUs), and one live reading."""
import json
import os
import subprocess
import sys
import time

import pytest

from runners.linux import host_cpu

PROC_STAT = """cpu  4705 356 5842 1234567 123 0 890 7 0 0
cpu0 2352 178 2921 617283 61 0 445 3 0 0
cpu1 2353 178 2921 617284 62 0 445 4 0 0
intr 114930548 113199788 31 0 0 0 0 2 0 2 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
"""


def test_host_jiffies_leave_idle_and_iowait_out_of_busy():
    busy, steal, total = host_cpu.host_jiffies(PROC_STAT)
    assert total == 4705 + 356 + 5842 + 1234567 + 123 + 0 + 890 + 7
    assert steal == 7 and busy == total - 1234567 - 123 - 7
    with pytest.raises(ValueError):
        host_cpu.host_jiffies("intr 1 2 3\n")


def test_a_command_with_spaces_and_parentheses_is_read_from_its_last_parenthesis():
    line = "4242 (qemu (x) y) S 4200 4242 4200 0 -1 4194560 500 0 0 0 1500 250 30 4 20 0 3 0 100 0 0"
    assert host_cpu.parse_pid_stat(line) == (4200, 1500 + 250 + 30 + 4)     # its own, and its reaped children's


def test_a_tree_is_its_roots_and_every_descendant_once():
    stats = {1: (0, 5), 10: (1, 100), 11: (10, 40), 12: (11, 2), 20: (1, 999), 30: (10, 1)}
    assert host_cpu.tree_jiffies(stats, {10}) == 100 + 40 + 2 + 1
    assert host_cpu.tree_jiffies(stats, {11, 12}) == 42              # a root under another root counts once
    assert host_cpu.tree_jiffies(stats, {77}) == 0                   # gone


def test_shares_split_the_busy_time_between_the_testbed_and_the_rest():
    before = host_cpu.CpuSnapshot(0.0, busy=1000, steal=0, total=10_000, procs={5: (1, 100)}, cpus=2)
    # 20 s on 2 CPUs at 100 Hz: 4,000 jiffies; 3,000 busy, of them 2,000 the testbed's (a qemu child that
    # started in between counts from 0)
    # and 200 jiffies a hypervisor under the host took: no process's
    after = host_cpu.CpuSnapshot(20.0, busy=4000, steal=200, total=14_000, procs={5: (1, 600), 6: (5, 1500)},
                                 cpus=2)
    got = host_cpu.shares(before, after, {5})
    assert got == {"seconds": 20.0, "cpus": 2, "testbed_cores": 1.0, "others_cores": 0.5, "steal_cores": 0.1,
                   "host_idle_pct": 20.0}
    assert host_cpu.shares(after, after, {5}) is None


def test_a_busy_child_counts_as_the_testbed_read_from_this_machines_proc():
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        before = host_cpu.snapshot()
        time.sleep(0.6)
        after = host_cpu.snapshot()
    finally:
        child.kill()
        child.wait()
    assert before and after
    got = host_cpu.shares(before, after, {os.getpid()})
    # a busy loop is about one CPU's worth (more than 0.3 on any host that gives it a core at all)
    assert got is not None and got["testbed_cores"] > 0.3, got
    # once it has ended and been reaped, its CPU is its parent's (this process): still the testbed's
    reaped = host_cpu.shares(before, host_cpu.snapshot(), {os.getpid()})
    assert reaped["testbed_cores"] >= got["testbed_cores"] * 0.9 * got["seconds"] / reaped["seconds"], (got, reaped)
    assert 0 <= got["host_idle_pct"] <= 100 and got["cpus"] == os.cpu_count()
    assert host_cpu.shares(before, after, {999_999_999})["testbed_cores"] == 0      # no such tree


def _row(t, busy, total, testbed, steal=0, cpus=2, session="a"):
    return {"t": t, "busy": busy, "steal": steal, "total": total, "testbed": testbed, "cpus": cpus,
            "session": session}


def test_a_window_takes_the_rows_around_it_and_splits_the_host_between_the_testbed_and_the_rest():
    # 2 CPUs at 100 Hz, a row every 0.5 s: 100 jiffies per row; from 1.0 on another process takes one CPU
    rows = [_row(0.0, 0, 0, 0), _row(0.5, 60, 100, 60), _row(1.0, 120, 200, 120)]
    for i in range(3, 12):
        rows.append(_row(i * 0.5, rows[-1]["busy"] + 100, i * 100, rows[-1]["testbed"] + 50))
    got = host_cpu.window_shares(rows, 1.2, 4.6)
    assert got["window"] == [1.0, 5.0]                          # wider by at most a row at each end
    assert got["others_cores"] == 1.0 and got["testbed_cores"] == 1.0 and got["host_idle_pct"] == 0.0
    before = host_cpu.window_shares(rows, 0.0, 1.0)
    assert before["others_cores"] == 0.0 and before["testbed_cores"] == 1.2
    assert host_cpu.window_shares(rows, 1.2, 9.0) is None       # no row after the end yet
    # the last row (5.5) came at most `slack` before the end: the window ends there
    assert host_cpu.window_shares(rows, 1.2, 5.8, slack=0.5)["window"] == [1.0, 5.5]
    assert host_cpu.window_shares(rows, 1.2, 6.1, slack=0.5) is None
    assert host_cpu.window_shares(rows, 1.2, 4.6, slack=0.5)["window"] == [1.0, 5.0]   # a row after it first
    assert host_cpu.window_shares(rows, -1.0, 2.0) is None      # nor before the start
    # a second recording's rows are not one window with the first's, whatever their times (a resumed set)
    assert host_cpu.window_shares([_row(0, 0, 0, 500), _row(1, 100, 200, 20)], 0.1, 0.9) is None
    assert host_cpu.window_shares([_row(0, 0, 0, 0), _row(1, 100, 200, 50, session="b")], 0.1, 0.9) is None
    older = [_row(5.0, 0, 0, 0, session="b"), _row(9.0, 400, 800, 100, session="b")]   # a clock stepped back
    assert host_cpu.window_shares(rows + older, 1.2, 4.6)["window"] == [1.0, 5.0]


def test_a_long_files_rows_are_read_from_its_tail_back_to_the_window(tmp_path):
    path = tmp_path / host_cpu.SAMPLES_FILE
    path.write_text("".join(json.dumps(_row(i * 0.5, i, i * 2, 0)) + "\n" for i in range(10_000)))
    tail = host_cpu.read_rows_since(path, 4_900.0, chunk=4096)
    assert tail[0]["t"] <= 4_900.0 and tail[-1]["t"] == 4_999.5 and len(tail) < 1_000   # not the whole file
    assert len(host_cpu.read_rows_since(path, -1.0, chunk=4096)) == 10_000     # back to the first row


def test_rows_are_read_whole_and_a_line_cut_short_is_skipped():
    text = ('{"t": 1.0, "busy": 1, "steal": 0, "total": 2, "testbed": 0, "cpus": 2}\n'
            '["not", "a row"]\n{"t": 1.5, "busy": "x", "steal": 0, "total": 2, "testbed": 0, "cpus": 2}\n'
            '{"t": 2.0, "busy": 3, "st')
    assert [r["t"] for r in host_cpu.parse_rows(text)] == [1.0]


def test_the_recorder_writes_rows_of_this_host_until_stopped(tmp_path):
    # the testbed's own CPU: a busy child of this process (a busy loop here would hold the GIL that the
    # recorder's /proc reads wait for, file by file)
    with host_cpu.recording(tmp_path, {os.getpid()}, interval=0.05) as recorder:
        subprocess.run([sys.executable, "-c", "import time\nwhile time.process_time() < 0.4: pass"], check=True)
        time.sleep(0.1)
    rows = host_cpu.parse_rows((tmp_path / host_cpu.SAMPLES_FILE).read_text())
    assert len(rows) == recorder.rows >= 3
    assert [r["t"] for r in rows] == sorted(r["t"] for r in rows) and rows[-1]["testbed"] > rows[0]["testbed"]
    got = host_cpu.window_shares(rows, rows[0]["t"], rows[-1]["t"])
    assert got["testbed_cores"] > 0.3 and got["cpus"] == os.cpu_count()


def test_a_recorder_whose_file_cannot_be_written_ends_quietly(tmp_path):
    with host_cpu.recording(tmp_path / "gone" / "deeper", {os.getpid()}) as recorder:
        pass
    assert recorder.rows == 0 and not recorder.is_alive()
