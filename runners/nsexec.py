"""Run argument lists inside a Mininet host's namespace, and keep track of them.

Mininet's `node.cmd()` goes through a shared bash; we use `node.popen(list)`
instead, so no scenario value ever passes through a shell, and every
long-running process is registered for cleanup.
"""
from __future__ import annotations

import os
import signal
import subprocess
import threading
from dataclasses import dataclass


class CommandError(RuntimeError):
    """A command the runner depends on failed: the run is aborted with its output."""


@dataclass
class Result:
    argv: list[str]
    rc: int
    out: str
    err: str


def run(node, argv: list[str], timeout: float = 60, check: bool = True) -> Result:
    p = node.popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise CommandError(f"{node.name}: `{' '.join(argv)}` timed out after {timeout:g}s") from None
    res = Result(argv, p.returncode, out.decode(errors="replace"), err.decode(errors="replace"))
    if check and res.rc != 0:
        raise CommandError(f"{node.name}: `{' '.join(argv)}` failed (exit {res.rc}): "
                           f"{(res.err or res.out).strip()[:500]}")
    return res


class ProcessRegistry:
    """Every background process the run started, so that every exit path can stop it."""

    def __init__(self) -> None:
        self._procs: list[subprocess.Popen] = []
        self._lock = threading.Lock()

    def start(self, node, argv: list[str], stdout=subprocess.PIPE, stderr=subprocess.PIPE) -> subprocess.Popen:
        p = node.popen(argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr)
        with self._lock:
            self._procs.append(p)
        return p

    def forget(self, p: subprocess.Popen) -> None:
        with self._lock:
            if p in self._procs:
                self._procs.remove(p)

    def stop_all(self, grace: float = 2.0) -> None:
        with self._lock:
            procs, self._procs = self._procs, []
        for p in procs:
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in procs:
            try:
                p.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                try:
                    os.kill(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(timeout=5)
