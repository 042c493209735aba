"""Stopping processes: a SIGTERM first, a SIGKILL for one that ignores it, the whole group when asked."""
import os
import signal
import subprocess
import time
from pathlib import Path

from runners.linux.processes import run_quietly, stop_processes


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace_time():
    stubborn = subprocess.Popen(["sh", "-c", "trap '' TERM; sleep 30"])
    polite = subprocess.Popen(["sleep", "30"])
    time.sleep(0.2)
    t0 = time.monotonic()
    stop_processes([stubborn, polite], grace=0.5)
    assert stubborn.returncode == -9 and polite.returncode == -15
    assert time.monotonic() - t0 < 5


def test_a_group_goes_with_its_leader(tmp_path):
    pidfile = tmp_path / "child"
    leader = subprocess.Popen(["sh", "-c", f"sleep 30 & echo $! > {pidfile}; wait"], start_new_session=True)
    for _ in range(50):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        time.sleep(0.05)
    child = int(pidfile.read_text())
    stop_processes([leader], grace=1, group=True)
    time.sleep(0.1)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_a_missing_program_is_none_not_an_exception():
    assert run_quietly(["/nonexistent/program"]) is None
    assert run_quietly(["true"]).returncode == 0


def test_a_reaped_group_dies_with_its_parent_even_by_sigkill(tmp_path):
    """The micro-VM's processes must not outlive a SIGKILLed run-scenario."""
    import signal
    import sys
    pidfile = tmp_path / "grandchild"
    parent = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time; sys.path.insert(0, %r)\n"
        "from runners.linux.processes import start_reaped\n"
        "start_reaped(['sh', '-c', 'sleep 60 & echo $! > %s; wait'])\n"
        "time.sleep(60)\n") % (str(Path(__file__).resolve().parents[2]), pidfile)])
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        time.sleep(0.05)
    grandchild = int(pidfile.read_text())
    assert _alive(grandchild)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    for _ in range(100):
        if not _alive(grandchild):
            break
        time.sleep(0.05)
    assert not _alive(grandchild)


def test_a_reaped_command_keeps_its_exit_code():
    from runners.linux.processes import start_reaped
    p = start_reaped(["sh", "-c", "exit 7"])
    assert p.wait(timeout=10) == 7


def test_a_group_is_stopped_only_once_none_of_it_is_left(tmp_path):
    """The leader goes at once, a child that ignores SIGTERM does not: stop_processes returns only when
    the whole group is gone (a micro-VM's qemu outlived its shell, and the run returned with qemu still
    there and its folder half removed, CI of 2026-11-25)."""
    from runners.linux.processes import live_group_members

    pidfile = tmp_path / "child"
    leader = subprocess.Popen(["sh", "-c", f"(trap '' TERM; exec sleep 30) & echo $! > {pidfile}; wait"],
                              start_new_session=True)
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        time.sleep(0.05)
    child = int(pidfile.read_text())
    time.sleep(0.2)
    assert child in live_group_members(leader.pid)
    stop_processes([leader], grace=0.5, group=True)
    assert not _alive(child) and live_group_members(leader.pid) == []


def test_a_reaped_start_does_not_hang_while_another_thread_holds_an_import_lock():
    """No Python runs between fork and exec: a child that imported a module there waited for ever on the
    module lock another thread held at the fork, and Popen waited with it (CI of 2026-11-26: the report's
    warm-up thread was importing numpy, and ctypes with it, as the first VM started)."""
    import sys
    script = (
        "import sys, threading, time; sys.path.insert(0, %r)\n"
        "assert 'ctypes' not in sys.modules\n"
        "from importlib import _bootstrap\n"
        "held = threading.Event()\n"
        "def hold():\n"
        "    lock = _bootstrap._get_module_lock('ctypes')\n"   # kept: the registry holds it weakly
        "    lock.acquire(); held.set(); time.sleep(60)\n"
        "threading.Thread(target=hold, daemon=True).start()\n"
        "held.wait()\n"
        "from runners.linux.processes import start_reaped\n"
        "print('exit', start_reaped(['sh', '-c', 'exit 3']).wait(timeout=10))\n") % str(Path(__file__).resolve().parents[2])
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, errs = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        # the hung child is a fork in a session of its own: kill it too, not only the interpreter
        for pid in [*_descendants(proc.pid), proc.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.communicate()
        raise
    assert out.strip() == "exit 3", errs


def _descendants(pid: int) -> list[int]:
    from runners.linux.host_cpu import snapshot

    parents = {child: ppid for child, (ppid, _) in snapshot().procs.items()}
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        kids = [c for c, p in parents.items() if p == parent]
        found += kids
        todo += kids
    return found
