"""Several clients released at one moment.

Started one after another, four iperf3 clients under TCG began up to a second
apart, so each one's average covered a different window: the sum of their
averages came out above what the shared link can carry (26.6 Mbit/s of TCP
through one 25 Mbit/s link, 2026-11-23). Each client now waits in a shell
reading a FIFO; once all of them wait there (or after a short grace), one
write releases them together.
"""
from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from runners.linux.leftovers import BARRIER_PREFIX

# sh reads a pipe one byte at a time, so each waiting client takes exactly one line
WAIT_THEN_EXEC = 'read _ < "$0"; exec "$@"'
# where a reader of an empty pipe sleeps: pipe_read (6.1), anon_pipe_read (6.18), pipe_wait (older)
READY_WCHAN = ("pipe_read", "pipe_wait")


class StartBarrier:
    """A FIFO the clients block on. The write end stays open until the barrier closes, so a
    client that opens the FIFO late still finds its line instead of blocking."""

    def __init__(self, count: int, grace_s: float = 3.0) -> None:
        self.count = count
        self.grace_s = grace_s
        self._dir = Path(tempfile.mkdtemp(prefix=BARRIER_PREFIX))
        self.fifo = self._dir / "go"
        os.mkfifo(self.fifo, 0o600)
        # O_RDWR: opening never blocks, and readers that open later never see EOF before their line
        self._fd = os.open(self.fifo, os.O_RDWR | os.O_NONBLOCK)

    def wrap(self, argv: list[str]) -> list[str]:
        return ["sh", "-c", WAIT_THEN_EXEC, str(self.fifo), *argv]

    def release(self, procs: list) -> float:
        """Wait until every client blocks on the FIFO (at most grace_s), then release all; returns
        how long the wait took."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < self.grace_s and not all(_waiting(p.pid) for p in procs):
            time.sleep(0.02)
        os.write(self._fd, b"\n" * self.count)
        return time.monotonic() - t0

    def close(self) -> None:
        # only once the clients are done: a client that had not opened the FIFO yet would block for ever
        try:
            os.close(self._fd)
        except OSError:
            pass
        try:
            self.fifo.unlink()
            self._dir.rmdir()
        except OSError:
            pass


def _waiting(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/wchan").read_text().strip().endswith(READY_WCHAN)
    except OSError:
        return True     # gone already: nothing to wait for
