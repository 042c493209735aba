"""Start a process inside a Mininet host's namespaces without `mnexec -a`.

Mininet starts every command in a host as `mnexec -da PID argv`: one program more to load before the
command itself, which in a TCG guest costs about 40 ms a command (`true` 75 ms against 34 ms, `ip -br
link` 95 ms against 60 ms; 2026-11-29, kernel 6.1.0-56, 2-core machine without KVM). A run starts a few
dozen such commands, most of them one after another.

Here a thread enters the host's network and mount namespaces once (setns changes only the calling
thread, and with a filesystem context of its own, unshare(CLONE_FS), it may enter a mount namespace
too), and starts each of the host's processes from there: a child inherits its parent thread's
namespaces. What `mnexec -da` does besides is done by Popen: its own session (start_new_session, as
`-d`), the caller's working directory (setns into a mount namespace moves the thread to its root), and no
inherited descriptors (close_fds, Popen's default). No Python runs between fork and exec.

The thread holds the namespace while it lives, so every spawner is closed before the network is taken
down (Network.stop), and one whose host's shell is gone ends by itself.
"""
from __future__ import annotations

import ctypes
import os
import queue
import signal
import subprocess
import threading
import weakref

CLONE_FS, CLONE_NEWNS, CLONE_NEWNET = 0x00000200, 0x00020000, 0x40000000
_POLL_S = 1.0   # how often an idle spawner looks whether its host's shell still runs

_libc = None


def _libc_call(name: str, *args, what: str | None = None) -> None:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if getattr(_libc, name)(*args) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what or name}: {os.strerror(err)}")


def setns_to(pid: int, kind: str) -> None:
    """Move the calling thread (only it) into process `pid`'s namespace of `kind`: "net", or "mnt" once
    the thread has a filesystem context of its own (unshare(CLONE_FS))."""
    path = f"/proc/{pid}/ns/{kind}"
    fd = os.open(path, os.O_RDONLY)
    try:
        _libc_call("setns", fd, {"net": CLONE_NEWNET, "mnt": CLONE_NEWNS}[kind], what=f"setns({path})")
    finally:
        os.close(fd)


def enter_namespaces_of(pid: int) -> None:
    """Move the calling thread into the network and mount namespaces of process `pid`, for good. A host
    has namespaces of its own: a `pid` in this process's network namespace (a pid reused by another
    process) is refused, so that nothing meant for a host starts here."""
    if os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat("/proc/self/ns/net").st_ino:
        raise OSError(f"process {pid} is in this network namespace, not a host's")
    _libc_call("unshare", CLONE_FS)
    setns_to(pid, "net")
    setns_to(pid, "mnt")


class SpawnerGone(RuntimeError):
    """The spawner could not enter the namespaces, or was closed: start the process another way."""


class NamespaceSpawner:
    """A thread in the namespaces of one host (its shell's `pid`) that starts processes there."""

    def __init__(self, pid: int, alive=lambda: True):
        self.pid, self._alive = pid, alive
        self._requests: queue.Queue = queue.Queue()
        self._entered = threading.Event()
        self._error: BaseException | None = None
        self._closed = False
        # a request is queued, and the spawner closed, under this lock: none can come in after the thread
        # has answered the last ones and left, and wait for ever
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, name=f"spawner-{pid}", daemon=True)
        _every_spawner.add(self)
        self._thread.start()
        self._entered.wait()
        if self._error is not None:
            raise SpawnerGone(f"cannot enter the namespaces of process {pid}: {self._error}")

    def popen(self, argv: list[str], **kwargs) -> subprocess.Popen:
        return self.call(lambda: subprocess.Popen(argv, **kwargs))

    def call(self, fn):
        """fn() run by this thread, inside the host's namespaces; its result, or its exception raised here."""
        done, box = threading.Event(), {}
        with self._lock:
            if self._closed:
                raise SpawnerGone(f"the spawner of process {self.pid} is closed")
            self._requests.put((fn, box, done))
        try:
            done.wait()
        except BaseException:
            # interrupted (Ctrl-C) while the thread ran fn: a process it started would reach no caller
            # and no registry, so it is ended here rather than left running in the host
            if done.wait(timeout=5) and isinstance(box.get("result"), subprocess.Popen):
                _kill_session(box["result"])
            raise
        if "error" in box:
            raise box["error"]
        return box["result"]

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """No request after this one; those queued before it are served first."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._requests.put(None)
        self._thread.join(timeout=10)

    def _serve(self) -> None:
        # a thread inherits its creator's signal mask, and a process its parent thread's: one made during
        # the runner's cleanup (SIGINT, SIGTERM and SIGHUP blocked there) would hand the block on to every
        # process it starts, which the runner's SIGTERM then could not stop
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        try:
            enter_namespaces_of(self.pid)
        except BaseException as e:   # handed to the caller's thread
            self._error = e
            self._closed = True
            return
        finally:
            self._entered.set()
        while True:
            try:
                request = self._requests.get(timeout=_POLL_S)
            except queue.Empty:
                if self._alive():
                    continue
                request = None   # the host's shell is gone: its namespaces may go too
            if request is None:
                with self._lock:
                    self._closed = True
                    self._fail_pending()
                return
            fn, box, done = request
            try:
                box["result"] = fn()
            except BaseException as e:   # a missing program, say: the caller's error, as mnexec's exit 1 was
                box["error"] = e
            done.set()

    def _fail_pending(self) -> None:
        """Requests queued before the spawner left by itself (none after a close): their callers start the
        process another way."""
        while True:
            try:
                request = self._requests.get_nowait()
            except queue.Empty:
                return
            if request is not None:
                request[1]["error"] = SpawnerGone(f"the spawner of process {self.pid} is closed")
                request[2].set()


def _kill_session(proc: subprocess.Popen) -> None:
    """The process and its session (it leads one of its own), reaped if it goes within a few seconds."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


# A forked child has none of its parent's threads: its copies of the spawners must not wait for them
_every_spawner: "weakref.WeakSet[NamespaceSpawner]" = weakref.WeakSet()


def _close_in_forked_child() -> None:
    for spawner in list(_every_spawner):
        spawner._closed = True
        spawner._lock = threading.Lock()


os.register_at_fork(after_in_child=_close_in_forked_child)


class Spawners:
    """One NamespaceSpawner per host, made on first use; `close` ends them all (the network's teardown)."""

    def __init__(self):
        self._by_pid: dict[int, NamespaceSpawner | SpawnerGone] = {}
        self._lock = threading.Lock()
        self._closed = False

    def popen(self, node, argv: list[str], **kwargs) -> subprocess.Popen | None:
        """argv started in the namespaces of `node` (a Mininet host), as `mnexec -da` would; None when no
        spawner can (the host's shell is gone, the network is going down) or the program cannot start (it
        is missing, say): the caller falls back to mnexec, which then fails as it always did, with exit 1
        and the reason on stderr, not an exception."""
        kwargs = {"start_new_session": True, "cwd": os.getcwd(), **kwargs}
        try:
            return self._spawner(node).popen(argv, **kwargs)
        except (SpawnerGone, OSError):
            return None

    def call(self, node, fn):
        """fn() run inside the namespaces of `node` (a Mininet host) by its spawner's thread: a file of
        /proc/sys, say, which shows the namespace of the thread that opens it (/proc/net and /proc/self
        do not: they show the process's main thread's). SpawnerGone if none can."""
        return self._spawner(node).call(fn)

    def _spawner(self, node) -> NamespaceSpawner:
        with self._lock:
            if self._closed:
                raise SpawnerGone("the network's spawners are closed")
            spawner = self._by_pid.get(node.pid)
            if isinstance(spawner, SpawnerGone):   # it could not enter once: it will not now
                raise spawner
            if spawner is None or spawner.closed:
                shell = node.shell
                # a shell reaped already may have left its pid to another process
                if shell is None or shell.poll() is not None:
                    raise SpawnerGone(f"the shell of host {node.name} has ended")
                try:
                    spawner = NamespaceSpawner(node.pid, alive=lambda: shell.poll() is None)
                except SpawnerGone as e:
                    self._by_pid[node.pid] = e
                    raise
                self._by_pid[node.pid] = spawner
            return spawner

    def close(self) -> None:
        with self._lock:
            self._closed = True
            spawners, self._by_pid = list(self._by_pid.values()), {}
        for s in spawners:
            if isinstance(s, NamespaceSpawner):
                s.close()
