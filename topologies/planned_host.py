"""A Mininet host whose namespaces are held by a small process, and whose bash starts only when a command
is sent to it (this part touches the kernel).

Mininet keeps each host's network and mount namespaces alive with an interactive bash, started under
`mnexec -cdn` on a pseudo-terminal, and waits for its prompt and one command (`stty -echo; set +m`)
before the next step. In a TCG guest that is 0.19-0.21 s a host, one after another (2026-11-29, kernel
6.1.0-56, 2-core machine without KVM), against 0.04-0.06 s for `mnexec -cdn sleep infinity`. The
runner never sends a host a shell command: it starts every program through its spawners
(runners.linux.nsspawn) and configures the namespaces itself. So the namespaces are held by `cat`,
and bash is started (`mnexec -cda HOLDER`: into the holder's namespaces) the first time something sends
the host a command: `run-scenario shell`'s Mininet CLI, or Mininet's own fallback when a link could not
be deleted at once.

The holder reads a pipe that only this process can write to, and never does: when this process ends,
whatever ends it (SIGKILL included), the holder reads end-of-file and exits, and the namespaces go with
it, as Mininet's bash exits when its terminal closes. It carries HOLDER_MARK in its environment, naming
its host, so that `run-scenario clean` finds it, and the namespace it holds, should it outlive the run
(a forked child that kept the pipe open).
"""
from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import time

HOLDER_MARK = "TESTBED_NAMESPACES_OF"   # in a holder's environment: the name of the host it holds
HOLDER_START_S = 10.0   # how long a holder may take to enter its new namespaces

_host_class = None


def planned_host_class():
    """PlannedHost, made once Mininet is imported."""
    global _host_class
    if _host_class is None:
        _host_class = _make_class()
    return _host_class


HOLDER_PROGRAM = "cat"


def holder_argv() -> list[str]:
    return ["mnexec", "-cdn", HOLDER_PROGRAM]


def start_holder(name: str) -> tuple[subprocess.Popen, int]:
    """A holder of new namespaces for host `name`, and the write end of its lifeline (close it to end the
    holder). Not yet waited for: wait_in_own_namespaces."""
    read_end, write_end = os.pipe()   # both close on exec: the holder gets the read end as its stdin only
    try:
        proc = subprocess.Popen(holder_argv(), stdin=read_end, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env={**os.environ, HOLDER_MARK: name})
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    return proc, write_end


def wait_in_own_namespaces(proc: subprocess.Popen, name: str, timeout: float = HOLDER_START_S) -> None:
    """Return once the holder runs its program: mnexec made its namespaces (and mounted /sys there)
    before it. RuntimeError if it exited, or did not get there in time (it is killed then)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(f"/proc/{proc.pid}/comm") as f:
                if f.read().strip() == HOLDER_PROGRAM:
                    return
        except OSError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"host {name}: could not make its namespaces (`{' '.join(holder_argv())}` "
                               f"exited {proc.returncode})")
        if time.monotonic() > deadline:
            kill_session(proc, signal.SIGKILL)
            raise RuntimeError(f"host {name}: its namespaces were not made within {timeout:g}s")
        time.sleep(0.002)


def kill_session(proc: subprocess.Popen, sig: int) -> None:
    """`sig` to the process's session, and so to what it started (mnexec -d made it lead one, as
    Mininet's hangup assumes), never this process's own group (killpg(0)) nor init's; to the process
    alone if it leads none yet (mnexec had not called setsid)."""
    if proc.pid <= 1:
        return
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            proc.send_signal(sig)
        except OSError:
            pass


def _start_holder(node) -> None:
    """What Mininet's startShell sets up, with the holder for the shell: the node's terminal, which its
    bash gets if one is started, and the poll Mininet reads it with."""
    node.shell, node.lifeline = start_holder(node.name)
    node.pid = node.shell.pid
    try:
        node.master, node.slave = pty.openpty()
    except OSError:
        kill_session(node.shell, signal.SIGKILL)
        node.close_lifeline()
        raise
    node.stdin = os.fdopen(node.master, "r")
    node.stdout = node.stdin
    node.pollOut = select.poll()
    node.pollOut.register(node.stdout)
    node.outToNode[node.stdout.fileno()] = node
    node.inToNode[node.stdin.fileno()] = node
    node.execed, node.lastCmd, node.lastPid, node.readbuf, node.waiting = False, None, None, "", False


def _start_bash(node) -> None:
    """Mininet's shell, started in the holder's namespaces on the node's terminal as Mininet starts it
    (its prompt a sentinel), and awaited. RuntimeError, and no shell, if the host is gone or its shell
    gives no prompt."""
    if node.shell is None or node.shell.poll() is not None:
        raise RuntimeError(f"host {node.name}: it has ended, a command cannot be sent to it")
    bash = subprocess.Popen(
        ["mnexec", "-cda", str(node.pid), "bash", "--norc", "--noediting", "-is", "mininet:" + node.name],
        stdin=node.slave, stdout=node.slave, stderr=node.slave, close_fds=False, env={**os.environ, "PS1": chr(127)})
    deadline = time.monotonic() + HOLDER_START_S
    while True:   # a read only once there is output: the terminal stays open on this side
        if node.pollOut.poll(100) and node.read(1024).endswith(chr(127)):
            break
        if bash.poll() is not None or time.monotonic() > deadline:
            why = f"exited {bash.returncode}" if bash.poll() is not None else f"gave no prompt within {HOLDER_START_S:g}s"
            kill_session(bash, signal.SIGKILL)
            bash.wait()
            raise RuntimeError(f"host {node.name}: its shell {why}")
    node.bash, node.waiting = bash, False


def _make_class():
    from subprocess import PIPE

    from mininet.node import Host

    class PlannedHost(Host):
        """Mininet's config would bring `lo` up through the host's shell (`ifconfig lo up`), one host after
        another: the runner's setup batch of the namespace does it (runners.pipeline.network). Its stop
        would wait for each shell to exit before it ends the next: stop_network waits for them all at once.
        `shell` is the namespaces' holder, `bash` the shell of Mininet's commands once one was sent."""

        # the runner's spawners (runners.linux.nsspawn.Spawners), set by build_network: a command starts
        # in the host's namespaces without Mininet's `mnexec -da` before it (40 ms a command in a TCG guest)
        spawners = None
        # Mininet's class setup asks `which mnexec` and `which ifconfig` (two processes, 0.12 s of each
        # build in a TCG guest). mnexec is checked with the testbed's other programs before anything
        # starts (runners.backends.programs), and the testbed never runs ifconfig.
        isSetup = True

        def __init__(self, name, wait_later=False, **params):
            """`wait_later`: the caller waits for its namespaces (wait_in_own_namespaces), as the build
            does for every host at once."""
            self.bash, self.lifeline, self._wait_later = None, None, wait_later
            super().__init__(name, waitExited=False, **params)

        def config(self, **_params):
            return {}

        def startShell(self, mnopts=None):
            """The holder, and the terminal Mininet reads its shell on, without the shell."""
            if not self.shell:
                _start_holder(self)
                if not self._wait_later:
                    wait_in_own_namespaces(self.shell, self.name)

        def _bash_up(self):
            if self.bash is None:
                _start_bash(self)
                self.cmd("unset HISTFILE; stty -echo; set +m")   # as Mininet's startShell ends

        def sendCmd(self, *args, **kwargs):
            self._bash_up()
            return super().sendCmd(*args, **kwargs)

        def write(self, data):
            self._bash_up()
            return super().write(data)

        def sendInt(self, intr=chr(3)):
            if self.bash is not None:
                super().sendInt(intr)

        def terminate(self):
            """The shell hung up, as Mininet ends it; the holder, which runs nothing, killed."""
            self.unmountPrivateDirs()
            if self.bash is not None and self.bash.poll() is None:
                kill_session(self.bash, signal.SIGHUP)
            if self.shell is not None and self.shell.poll() is None:
                kill_session(self.shell, signal.SIGKILL)
            self.close_lifeline()
            self.cleanup()

        def close_lifeline(self):
            """The holder's pipe closed: it ends once it reads end-of-file, if it had not ended yet."""
            if self.lifeline is not None:
                os.close(self.lifeline)
                self.lifeline = None

        def popen(self, *args, **kwargs):
            """Mininet's popen for an argument list, started by the spawners when they can."""
            if self.spawners is not None and len(args) == 1 and isinstance(args[0], list) \
                    and not {"mncmd", "shell"} & kwargs.keys():
                proc = self.spawners.popen(self, args[0], **{"stdout": PIPE, "stderr": PIPE, **kwargs})
                if proc is not None:
                    return proc
            return super().popen(*args, **kwargs)

    return PlannedHost
