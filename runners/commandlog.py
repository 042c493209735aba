"""commands.log: every command the runner runs (node, argv, exit code, seconds), and -v's echo of each.

One recorder for the process, opened by the CLI once the result folder exists; the places that run
commands (runners.nsexec, runners.processes) report to it. Until it is opened it records nothing, so
unit tests and the probe stay quiet.
"""
from __future__ import annotations

import shlex
import sys
import threading
import time
from pathlib import Path

HEADER = "# utc\tnode\texit\tseconds\targv (background: the process was started and left running)\n"


class CommandLog:
    def __init__(self) -> None:
        self._file = None
        self._lock = threading.Lock()
        self.echo = False

    def open(self, path: Path, echo: bool = False) -> None:
        self.close()
        new = not path.exists()
        self._file = open(path, "a", encoding="utf-8", buffering=1)
        if new:
            self._file.write(HEADER)
        self.echo = echo

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def announce(self, node: str, argv: list[str]) -> None:
        """-v: the command, as it starts."""
        if self.echo:
            try:
                print(f"[{node}] {shlex.join(map(str, argv))}", flush=True)
            except (BrokenPipeError, OSError, ValueError):
                pass

    def record(self, node: str, argv: list[str], rc: int | str, seconds: float) -> None:
        with self._lock:
            if self._file is None:
                return
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() % 1 * 1000):03d}Z"
            try:
                self._file.write(f"{stamp}\t{node}\t{rc}\t{seconds:.3f}\t{shlex.join(map(str, argv))}\n")
            except (OSError, ValueError) as e:   # a full disk ends the set elsewhere; the log must not
                print(f"warning: commands.log: {e}", file=sys.stderr)
                self._file = None


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
