"""run.log: what the console showed, kept with the result set (a VM's boot included: the host writes it).

Installed once the result folder exists: stdout and stderr are copied to the file as they are written,
without terminal colour codes. rich's live progress bar draws on the terminal only; its log lines reach
the file through `note`.
"""
from __future__ import annotations

import re
import sys
import threading
import time
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


class _Tee:
    def __init__(self, stream, file):
        self.stream, self.file = stream, file

    def write(self, text: str) -> int:
        RUN_LOG.note_raw(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    def __getattr__(self, name):
        return getattr(self.stream, name)


FLUSH_EVERY_S = 1.0


class RunLog:
    """Appends complete lines in batches at most FLUSH_EVERY_S apart, opening the file for each batch:
    nothing holds the results disk open, and a VM's 9p share is not opened for every line."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self._saved = None
        self._partial = ""
        self._pending: list[str] = []
        self._flushed = 0.0
        self._lock = threading.Lock()

    def start(self, path: Path) -> None:
        if self._saved is not None:
            return
        self.path = path
        self._saved = (sys.stdout, sys.stderr)
        sys.stdout, sys.stderr = _Tee(sys.stdout, None), _Tee(sys.stderr, None)

    def stop(self) -> None:
        if self._partial:
            self.note_raw("\n")
        with self._lock:
            if self.path is not None:
                self._flush()
        if self._saved is not None:
            sys.stdout, sys.stderr = self._saved
            self._saved = None
        self.path = None

    def note_raw(self, text: str) -> None:
        if self.path is None:
            return
        with self._lock:
            text = self._partial + ANSI.sub("", text)
            complete, newline, self._partial = text.rpartition("\n")
            if newline:
                self._pending.append(complete + "\n")
            if self._pending and time.monotonic() - self._flushed >= FLUSH_EVERY_S:
                self._flush()

    def _flush(self) -> None:
        text, self._pending, self._flushed = "".join(self._pending), [], time.monotonic()
        try:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(text)
        except OSError:
            self.path = None    # a full or read-only disk: the console goes on

    def note(self, line: str) -> None:
        self.note_raw(line.rstrip("\n") + "\n")


RUN_LOG = RunLog()


def terminal(stream=None):
    """The real terminal stream under a tee (rich's live display draws there only)."""
    s = stream or sys.stdout
    return s.stream if isinstance(s, _Tee) else s
