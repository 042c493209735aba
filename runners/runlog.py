"""run.log: what the console showed, kept with the result set (a VM's boot included: the host writes it).

Installed once the result folder exists: stdout and stderr are copied to the file as they are written,
without terminal colour codes. rich's live progress bar draws on the terminal only; its log lines reach
the file through `note`.
"""
from __future__ import annotations

import re
import sys
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


class RunLog:
    def __init__(self) -> None:
        self.file = None
        self._saved = None

    def start(self, path: Path) -> None:
        if self.file is not None:
            return
        self.file = open(path, "a", encoding="utf-8", buffering=1)
        self._saved = (sys.stdout, sys.stderr)
        sys.stdout, sys.stderr = _Tee(sys.stdout, self.file), _Tee(sys.stderr, self.file)

    def stop(self) -> None:
        if self.file is None:
            return
        sys.stdout, sys.stderr = self._saved
        try:
            self.file.close()
        except OSError:
            pass
        self.file = None

    def note_raw(self, text: str) -> None:
        if self.file is not None:
            try:
                self.file.write(ANSI.sub("", text))
            except (OSError, ValueError):
                self.file = None    # a full disk: the console goes on

    def note(self, line: str) -> None:
        self.note_raw(line.rstrip("\n") + "\n")


RUN_LOG = RunLog()


def terminal(stream=None):
    """The real terminal stream under a tee (rich's live display draws there only)."""
    s = stream or sys.stdout
    return s.stream if isinstance(s, _Tee) else s
