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

HEADER = "# utc\tnode\texit\tseconds\targv (background: the process was started and left running)\n"


FLUSH_EVERY_S = 2.0


class CommandLog:
    """Appends a line per command, in batches at most FLUSH_EVERY_S apart, opening the file for each
    batch: nothing holds the results disk open (a remount read-only is not refused because of it), and
    a micro-VM's shared folder (9p, slow to open under TCG) is not opened for every line."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self._lock = threading.Lock()
        self._pending: list[str] = []
        self._flushed = 0.0
        self.echo = False

    def open(self, path: Path, echo: bool = False) -> None:
        self.path, self.echo = path, echo
        if not path.exists():
            self._pending.append(HEADER)
            self._flush()

    def close(self) -> None:
        with self._lock:
            if self.path is not None:
                self._flush()
            self.path = None

    def _flush(self) -> None:
        text, self._pending, self._flushed = "".join(self._pending), [], time.monotonic()
        try:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(text)
        except OSError as e:   # a full disk ends the set elsewhere; the log must not
            print(f"warning: commands.log: {e.strerror}; no more commands are logged", file=sys.stderr)
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
            self._pending.append(f"{stamp}\t{node}\t{rc}\t{seconds:.3f}\t{shlex.join(map(str, argv))}\n")
            if time.monotonic() - self._flushed >= FLUSH_EVERY_S:
                self._flush()


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
