"""commands.log: every command the runner runs (node, argv, exit code, seconds), and -v's echo of each.

One recorder for the process, opened by the CLI once the result folder exists; the places that run
commands (runners.linux.nsexec, runners.linux.processes) report to it. Until it is opened it records nothing, so
unit tests and the probe stay quiet.
"""
from __future__ import annotations

import shlex
import sys
import threading
import time
from pathlib import Path

from runners.linux.appender import BatchedAppender

HEADER = "# utc\tnode\texit\tseconds\targv (background: the process was started and left running)\n"


FLUSH_EVERY_S = 2.0


def _stopped(e: OSError) -> None:
    print(f"warning: commands.log: {e.strerror}; no more commands are logged", file=sys.stderr)


class CommandLog:
    """Appends a line per command, in batches at most FLUSH_EVERY_S apart (runners.linux.appender)."""

    def __init__(self) -> None:
        self.file = BatchedAppender(FLUSH_EVERY_S, on_error=_stopped)
        self._lock = threading.Lock()
        self.echo = False

    path = property(lambda self: self.file.path, lambda self, path: setattr(self.file, "path", path))

    def open(self, path: Path, echo: bool = False) -> None:
        self.path, self.echo = path, echo
        if not path.exists():
            self.file.pending.append(HEADER)
            self.file.flush()

    def close(self) -> None:
        with self._lock:
            if self.path is not None:
                self.file.flush()
            self.path = None

    def announce(self, node: str, argv: list[str]) -> None:
        """-v: the command, as it starts (one write per line: threads print at once)."""
        if self.echo:
            with self._lock:
                try:
                    sys.stdout.write(f"[{node}] {shlex.join(map(str, argv))}\n")
                    sys.stdout.flush()
                except (BrokenPipeError, OSError, ValueError):
                    pass

    def record(self, node: str, argv: list[str], rc: int | str, seconds: float) -> None:
        with self._lock:
            if self.path is None:
                return
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() % 1 * 1000):03d}Z"
            self.file.pending.append(f"{stamp}\t{node}\t{rc}\t{seconds:.3f}\t{shlex.join(map(str, argv))}\n")
            if self.file.due():
                self.file.flush()


COMMANDS = CommandLog()


class Timed:
    """with Timed(node, argv) as t: ...; t.rc = code  -> announced before, recorded after."""

    def __init__(self, node: str, argv: list[str]):
        self.node, self.argv, self.rc = node, argv, "?"

    def __enter__(self) -> "Timed":
        COMMANDS.announce(self.node, self.argv)
        self.t0 = time.monotonic()
        return self

    def __exit__(self, *exc) -> None:
        COMMANDS.record(self.node, self.argv, self.rc if exc[0] is None else f"{self.rc} ({exc[0].__name__})",
                        time.monotonic() - self.t0)
