"""A log file appended in batches (commands.log, run.log): lines collect in memory and are written at most
`every_s` seconds apart, the file opened for each batch. Nothing holds the results disk open (a remount
read-only is not refused because of it), and a micro-VM's shared folder (9p, slow to open under TCG) is
not opened for every line."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable


class BatchedAppender:
    """`pending` lines for `path`; the owner holds its own lock around every call."""

    def __init__(self, every_s: float, on_error: Callable[[OSError], None] = lambda e: None):
        self.path: Path | None = None
        self.every_s, self.on_error = every_s, on_error
        self.pending: list[str] = []
        self._flushed = 0.0

    def due(self) -> bool:
        return time.monotonic() - self._flushed >= self.every_s

    def flush(self) -> None:
        """Write what is pending. A failed write stops the log (`on_error` says why): a full disk ends
        the set elsewhere, and the log must not."""
        text, self.pending, self._flushed = "".join(self.pending), [], time.monotonic()
        try:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(text)
        except OSError as e:
            self.on_error(e)
            self.path = None
