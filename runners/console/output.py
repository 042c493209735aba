"""What run-scenario says on the console: progress lines (`info`, kept out of the console by -q but not
out of run.log) and errors (`err`), and what to do when the reader of our output went away."""
from __future__ import annotations

import os
import sys


QUIET = False   # -q: only errors and the final summary on the console (run.log still gets everything)


def info(msg: str) -> None:
    """A line of progress: on the console unless -q, and in run.log."""
    from runners.console.runlog import RUN_LOG

    if QUIET:
        RUN_LOG.note(msg)
    else:
        print(msg, flush=True)


def err(msg: str) -> None:
    try:
        print(f"run-scenario: error: {msg}", file=sys.stderr, flush=True)
    except (BrokenPipeError, OSError, ValueError):
        terminal_gone()


def terminal_gone() -> None:
    """The reader of our output went away (`| tee` killed by the same Ctrl-C): what is left to say goes
    nowhere, and the exit code stays the run's (Python would turn the failed flush at exit into 120)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        try:
            os.dup2(devnull, fd)
        except OSError:
            pass
    os.close(devnull)
