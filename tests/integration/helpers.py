"""What a run may leave behind, seen from the root namespace: used to prove cleanup."""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from runners.backends.vm.warm_guest import main_in_this_child
from runners.linux.leftovers import find_leftovers

REPO = Path(__file__).resolve().parents[2]
# OVS daemons that ran before the tests are the machine's; the runner must stop only those it started
_OVS_BEFORE = subprocess.run(["pgrep", "-x", "ovs-vswitchd"], capture_output=True).returncode == 0


def leftovers() -> list[str]:
    """Namespaces, Mininet links, and processes in other network namespaces or named like ours."""
    return find_leftovers(ovs_was_running=_OVS_BEFORE)


def run_cli(*args: str, timeout: float = 900, plots: bool = False) -> subprocess.CompletedProcess:
    """run-scenario's main() in a fork of this process, which imported the testbed once.

    The same code as `python -m runners.cli`, less a new interpreter's start-up and
    imports (about 12 s each in a TCG guest, for some 25 runs); the warm VM runs its
    jobs the same way. Tests of signals (Ctrl-C, SIGTERM) and of a SIGKILLed run start
    a real `python -m runners.cli` process instead.
    With `--no-plots` unless `plots`: drawing a set's figures costs seconds under TCG,
    and the figures are checked where they are the point (lab 1, the fresh-machine run,
    and the unit tests on recorded sets, sweeps' among them).
    """
    if not plots and args and args[0] not in ("shell", "export", "report", "merge", "compare", "vm", "clean",
                                              "list") and "--check" not in args and "--dry-run" not in args:
        args = (*args, "--no-plots")
    _import_before_fork()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(out_r)
        os.close(err_r)
        os.chdir(REPO)
        main_in_this_child(list(args), out_w, err_w)
    os.close(out_w)
    os.close(err_w)
    outs: dict[int, bytes] = {}
    readers = [threading.Thread(target=lambda fd: outs.__setitem__(fd, _read_all(fd)), args=(fd,))
               for fd in (out_r, err_r)]
    for t in readers:
        t.start()
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise subprocess.TimeoutExpired(["run-scenario", *args], timeout)
        time.sleep(0.05)
    for t in readers:
        t.join()
    code = os.waitstatus_to_exitcode(status)
    return subprocess.CompletedProcess(["run-scenario", *args], code if code >= 0 else 128 - code,
                                       outs[out_r].decode(errors="replace"), outs[err_r].decode(errors="replace"))


def _import_before_fork() -> None:
    """What every run-scenario child would import and ask: done once, in this process."""
    import runners.backends.native  # noqa: F401
    import runners.cli.run  # noqa: F401  (imported before the fork: every child inherits it)
    import runners.pipeline.runner  # noqa: F401
    import runners.analysis.plots  # noqa: F401  (matplotlib: seconds to import under TCG)
    import runners.analysis.report  # noqa: F401
    import rich.console, rich.table  # noqa: E401,F401  (the summary's: 1.8 s to import under TCG)
    from runners.backends import kernel_features
    from runners.backends.probe import iperf3_facts, netem_works
    from runners.results.metadata import userland_metadata
    if os.geteuid() == 0:
        netem_works()   # memoised: the children inherit the answers
        kernel_features.endpoint_answers()
        iperf3_facts()
    userland_metadata()   # memoised: the checkout's revision and tool versions, 4.5 s a run under TCG


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        data = os.read(fd, 65536)
        if not data:
            break
        chunks.append(data)
    os.close(fd)
    return b"".join(chunks)


def write_scenario(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


class ForkedCli:
    """run-scenario's main() in a fork of this process, as run_cli, with its output (stdout and stderr
    together) read line by line as it comes: the part of subprocess.Popen the fault tests use."""

    def __init__(self, *args: str, plots: bool = False):
        if not plots:
            args = (*args, "--no-plots")
        _import_before_fork()
        read, write = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(read)
            os.chdir(REPO)
            main_in_this_child(list(args), write, write)
        os.close(write)
        self.stdout = os.fdopen(read, "r", errors="replace")
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                code = os.waitstatus_to_exitcode(status)
                self.returncode = code if code >= 0 else 128 - code
        return self.returncode

    def communicate(self, timeout: float) -> tuple[str, str]:
        """The rest of the output and an empty stderr, once the child has exited (TimeoutExpired if not)."""
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(["run-scenario"], timeout)
            time.sleep(0.05)
        rest = []
        reader = threading.Thread(target=lambda: rest.append(self.stdout.read()), daemon=True)
        reader.start()   # processes the run left behind may hold the pipe: read what is there, not forever
        reader.join(max(1.0, deadline - time.monotonic()))
        return (rest[0] if rest else ""), ""

    def kill(self) -> None:
        if self.poll() is None:
            os.kill(self.pid, signal.SIGKILL)


# The least share of a steered transfer each WAN link must carry in one run. Steering that fails puts both
# subflows on one link, and the other carries ~0 (the iperf3 control connection's few kB). A working run can
# still leave one link a small share: in lab 5 (12 MiB over two 20 Mbit/s links, its rate until 2026-11-26;
# TCG VM, kernel 6.1) 37 of 38
# runs gave each link 44-50 %, and one in 30 on 2026-11-26 (one in CI the day before) 18-19 %: its first
# subflow carried almost nothing after 1.3 s, with 7 lost retransmissions and no timeout on the server
# (TCP's loss recovery, nothing the testbed did). So one run asks for a share, a set of runs for a balance.
STEERED_RUN_SHARE = 0.10
STEERED_SET_SHARE = 0.35


def steered_apart(run: dict, switch: str = "s2", port: str = "sport") -> dict[str, float]:
    """Asserts that `switch` sent the run's two data subflows (server ports 5201 and 5300, its flows'
    `port`: sport where the server sends, dport where the client does) up different WAN links, each with
    at least STEERED_RUN_SHARE of the bytes; returns each uplink's bytes."""
    flows = run["steering"]["switches"][switch]["flows"]
    data = {}
    for fl in flows:        # per server port, its busiest flow: the data subflow (the others: iperf3's control)
        if fl[port] in (5201, 5300) and fl["bytes"] > data.get(fl[port], {"bytes": -1})["bytes"]:
            data[fl[port]] = fl
    assert sorted(data) == [5201, 5300] and data[5201]["uplink"] != data[5300]["uplink"], flows
    up = {name: u["bytes"] for name, u in run["steering"]["switches"][switch]["uplinks"].items()}
    assert min(up.values()) > STEERED_RUN_SHARE * sum(up.values()), up
    return up
