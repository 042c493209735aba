"""run.log: what the console showed, kept with the result set (a VM's boot included: the host writes it).

Installed once the result folder exists: stdout and stderr are copied to the file as they are written,
without terminal colour codes. rich's live progress bar draws on the terminal only; its log lines reach
the file through `note`.
"""
from __future__ import annotations

import re
import sys
import threading
from pathlib import Path

from runners.linux.appender import BatchedAppender

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
    """Appends complete lines in batches at most FLUSH_EVERY_S apart (runners.linux.appender)."""

    def __init__(self) -> None:
        self.file = BatchedAppender(FLUSH_EVERY_S)   # a full or read-only disk: the console goes on
        self._saved = None
        self._partial = ""
        self._lock = threading.Lock()

    path = property(lambda self: self.file.path, lambda self, path: setattr(self.file, "path", path))

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
                self.file.flush()
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
                self.file.pending.append(complete + "\n")
            if self.file.pending and self.file.due():
                self.file.flush()

    def note(self, line: str) -> None:
        self.note_raw(line.rstrip("\n") + "\n")


RUN_LOG = RunLog()


def terminal(stream=None):
    """The real terminal stream under a tee (rich's live display draws there only)."""
    s = stream or sys.stdout
    return s.stream if isinstance(s, _Tee) else s
