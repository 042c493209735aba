"""`run-scenario`: the command line. May import every room below it (backends, runset, pipeline, results,
analysis, console, errors); nothing imports it but `python -m runners.cli` and the VM's warm guest.

`run-scenario FILE` is the run command (runners.cli.run); every other subcommand is one module named in
COMMANDS, imported only when it is used, with `build_parser()` and `main(argv) -> int`. The run's --help lists
the subcommands from COMMANDS. Every exit code is in runners.errors.
"""
from __future__ import annotations

import argparse
import atexit
import importlib
import os
import sys
import threading
from typing import NamedTuple

from runners.console.output import terminal_gone
from runners.errors import EXIT_FAIL, EXIT_OUTPUT_LOST


class Command(NamedTuple):
    module: str    # imported when the subcommand runs
    usage: str     # the subcommand's line in the run's --help ...
    summary: str   # ... and what it does


COMMANDS = {
    "report": Command("runners.cli.report", "report DIR [--baseline DIR]",
                      "stats, plots, verdicts, JUnit from saved results"),
    "merge": Command("runners.cli.merge", "merge DIR... [--out DIR]", "combine --shard result sets into one"),
    "compare": Command("runners.cli.compare", "compare DIR... [--metric M] [--by PARAM]",
                       "result sets side by side (table, overlay)"),
    "vm": Command("runners.cli.vm", "vm up|status|down", "a warm VM: runs with the vm backend start without a boot"),
    "clean": Command("runners.cli.clean", "clean [--yes]", "list (and remove) what runs left behind, like mn -c"),
    "list": Command("runners.cli.listing", "list [DIR]", "every scenario in DIR (scenarios/): name, runs, time, description"),
    "export": Command("runners.cli.export", "export FILE [--point ID] > net.py", "the network as a standalone Mininet script"),
    "shell": Command("runners.cli.shell", "shell FILE [--point ID] [--primary P]",
                     "the network, shaped and configured, in Mininet's CLI"),
    "calibrate": Command("runners.cli.calibrate", "calibrate [--backend B] [--kernel K]",
                         "measure what this machine reproduces faithfully"),
}
RUN = "runners.cli.run"   # `run-scenario FILE ...`: no subcommand word
# (`list` is listing.py: a submodule named list, once imported, would be this package's `list`, not the builtin)


def subcommand_listing() -> str:
    """The `subcommands:` block of the run's --help."""
    return "\n".join(f"  {('run-scenario ' + c.usage).ljust(40)}   {c.summary}" for c in COMMANDS.values())


def _module(argv: list[str]):
    """The module of the command `argv` asks for, and that command's own arguments."""
    if argv and argv[0] in COMMANDS:
        return importlib.import_module(COMMANDS[argv[0]].module), argv[1:]
    return importlib.import_module(RUN), argv


def parse_command_line(argv: list[str]) -> tuple[str, argparse.Namespace]:
    """(subcommand or "run", its arguments) as run-scenario would read them, starting nothing; a bad
    command line exits 2 with argparse's message. The lab handouts' test checks their commands with it."""
    module, rest = _module(argv)
    return (argv[0] if rest is not argv else "run"), module.build_parser().parse_args(rest)


def main(argv: list[str] | None = None) -> int:
    """Without `argv` it is the program (`run-scenario`, setup.py's entry point, and `python -m
    runners.cli`): it reads sys.argv and, once done, exits at once (exit_at_once). With `argv` (tests, the
    warm VM's jobs) it returns the exit code."""
    program = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    module, rest = _module(argv)
    try:
        code = module.main(rest)
    except BrokenPipeError:
        terminal_gone()
        code = EXIT_FAIL
    if program:
        exit_at_once(code)
    return code


def exit_at_once(code: int) -> None:
    """Exit without the interpreter's teardown of every module and object it loaded (pydantic's models,
    matplotlib, Mininet): 0.17-0.20 s of each command on the host, 0.18-0.28 s in a TCG guest (2026-11-29).
    Only once nothing is left for that teardown to do: atexit's handlers run here (the result store's
    writers are waited for there), the standard streams are flushed, and the testbed keeps no file open
    with unwritten data (run.log's lines are appended in batches, each file closed after its batch).
    With another thread still running, the usual exit, which waits for it."""
    if threading.active_count() > 1:
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:   # None: started with the descriptor closed
                stream.flush()
        except (BrokenPipeError, ValueError):   # its reader has gone, or it was closed: as terminal_gone
            pass
        except OSError as e:   # what it printed was not all written (a full disk): as Python's own exit
            try:
                os.write(2, f"run-scenario: its output could not be written: {e}\n".encode())
            except OSError:
                pass
            code = EXIT_OUTPUT_LOST
    os._exit(code)

