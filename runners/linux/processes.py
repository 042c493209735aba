"""Starting and stopping this machine's processes: one way to run a command with a timeout, one way to
stop a process (or its whole group) that may ignore the first signal."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


def run_command(argv: list[str], timeout: float = 20, input: str | None = None) -> subprocess.CompletedProcess:
    """Run to the end with captured text output and no stdin (or `input` as stdin); raises
    subprocess.TimeoutExpired. Recorded in commands.log as run on the host (the root namespace)."""
    from runners.linux.commandlog import Timed

    with Timed("host", argv) as t:
        stdin = {"input": input} if input is not None else {"stdin": subprocess.DEVNULL}
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **stdin)
        t.rc = r.returncode
    return r


def run_quietly(argv: list[str], timeout: float = 20) -> subprocess.CompletedProcess | None:
    """run_command, or None when the program is missing, fails to start or times out."""
    try:
        return run_command(argv, timeout)
    except (OSError, subprocess.SubprocessError):
        return None


# A reaper shell leads the child's process group. Linux sends it SIGTERM when run-scenario dies, even by
# SIGKILL (PR_SET_PDEATHSIG), and it then kills the whole group: vng, virtme-run and qemu. Without it a
# SIGKILLed run left its micro-VM running the set and writing results for 30 s and more.
# stdin is kept on fd 3 for the child: a background job of a non-interactive shell gets /dev/null as stdin
# before its own redirections apply, and `run-scenario shell` hands this terminal to the VM.
REAPER = ('trap \'kill -KILL -$$\' TERM; exec 3<&0; "$@" <&3 3<&- & child=$!; exec 3<&-; wait "$child"; '
          'code=$?; exit "$code"')
# setpriv (util-linux) sets the death signal and execs the reaper; the signal survives that exec. It was
# a preexec_fn once: Python code between fork and exec, which hangs the child, and Popen with it, when
# another thread holds a lock the child needs. The report's warm-up thread imports numpy, and ctypes with
# it, while the first VM starts; the child's `import ctypes` then waits on that thread's module lock for
# ever: a two-kernel set waited 20 min for a VM that never started (CI of 2026-11-26).
DIE_WITH_PARENT = ["setpriv", "--pdeathsig", "TERM"]


def start_reaped(argv: list[str], **popen_kw) -> subprocess.Popen:
    """Start argv in a process group of its own that is killed whole when this process dies, however."""
    return subprocess.Popen([*DIE_WITH_PARENT, "sh", "-c", REAPER, "reaper", *argv], start_new_session=True,
                            **popen_kw)


def _signal(proc: subprocess.Popen, sig: int, group: bool) -> None:
    try:
        if group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
    except ProcessLookupError:
        pass


def stop_processes(procs: list[subprocess.Popen], grace: float = 2.0, group: bool = False) -> None:
    """SIGTERM to all, then SIGKILL to whoever has not exited after `grace` s; reaps them all.

    group: signal each one's process group (started with start_new_session), so its children go too.
    """
    for p in procs:
        if p.poll() is None:
            _signal(p, signal.SIGTERM, group)
    for p in procs:
        try:
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            _signal(p, signal.SIGKILL, group)
            p.wait(timeout=10)
        if group:
            wait_group_gone(p.pid, grace)


def wait_group_gone(pgid: int, grace: float, timeout: float = 10.0) -> bool:
    """Until no process of the group is left: the leader's exit does not mean its children are gone.
    A micro-VM's leader is a shell whose qemu takes seconds to free 2G on a loaded machine; a run that
    returned before then left qemu behind for a moment, and removed the guest's folder while virtme-ng
    still wrote there (CI of 2026-11-25, with the machine's two cores busy). Those past `grace` get a
    SIGKILL; True when the group is empty."""
    started, killed = time.monotonic(), False
    while True:
        if not live_group_members(pgid):
            return True
        now = time.monotonic()
        if not killed and now - started > grace:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                return True
            killed = True
        if now - started > timeout:
            return False
        time.sleep(0.05)


def live_group_members(pgid: int, proc: str = "/proc") -> list[int]:
    """The processes of group `pgid` that are not zombies (a zombie waits only for its parent, or init,
    to reap it). Asks kill(0) first, so an empty group costs no /proc scan."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return []
    members = []
    for pid in filter(str.isdigit, os.listdir(proc)):
        try:
            stat = Path(proc, pid, "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()     # after the command, which may hold spaces
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(pid))
    return members
