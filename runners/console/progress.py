"""Progress of a run set: a rich live display on a terminal, plain lines elsewhere (CI, logs, the VM)."""
from __future__ import annotations

import sys
import time

from runners.results.derived import counts_text


def describe_result(result: dict) -> str:
    m = result["metrics"]
    ofo, retrans = counts_text(m)
    subflows = "?" if m["subflows"] is None else str(m["subflows"])
    if m.get("missing_subflows"):
        subflows += f" of {m['subflows_expected']} expected (missing {m['missing_subflows']})"
    line = f"{m['throughput_mbps']:.2f} Mbit/s, subflows {subflows}, OFO tcp/mptcp {ofo}, retrans {retrans}"
    if result.get("events", {}).get("changes"):   # a run with events: how it came through them
        line += (f", recovery {m['recovery_s']:.2f} s" if m.get("recovery_s") is not None else ", no recovery") \
            + (f", stall {m['stall_s']:.2f} s" if m.get("stall_s") is not None else "")
    if result.get("fidelity"):   # did the emulator keep up; a warning line before this one gave the reasons
        line += f", fidelity {result['fidelity']['status']}"
    return line


class PlainProgress:
    """One line per event, with done/total and a naive ETA; safe for pipes and log files."""

    def __init__(self, total: int, done: int = 0):
        self.total, self.done, self.t0 = total, done, time.monotonic()
        self.finished_here = 0

    def log(self, msg: str) -> None:
        print(msg, flush=True)

    def extend(self, n: int) -> None:
        self.total += n

    def advance(self, job, result: dict) -> None:
        self.done += 1
        self.finished_here += 1
        per = (time.monotonic() - self.t0) / self.finished_here
        eta = per * (self.total - self.done)
        self.log(f"run {job.run_id}: {describe_result(result)}  [{self.done}/{self.total}, ETA {eta / 60:.1f} min]")

    def close(self) -> None:
        pass


class RichProgress(PlainProgress):
    """A progress bar with point, repetition, ETA and the last result; log lines scroll above it."""

    def __init__(self, total: int, done: int = 0):
        super().__init__(total, done)
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        from rich.console import Console

        from runners.console.runlog import terminal

        self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeRemainingColumn(), TextColumn("{task.fields[last]}"),
                                 console=Console(file=terminal()))
        self.task = self.progress.add_task("runs", total=total, completed=done, last="")
        self.progress.start()

    def log(self, msg: str) -> None:
        from runners.console.runlog import RUN_LOG

        self.progress.console.print(msg, highlight=False)
        RUN_LOG.note(msg)

    def extend(self, n: int) -> None:
        super().extend(n)
        self.progress.update(self.task, total=self.total)

    def advance(self, job, result: dict) -> None:
        self.done += 1
        self.progress.update(self.task, completed=self.done,
                             description=f"{job.point.id} rep {job.rep}",
                             last=f"last {job.run_id}: {describe_result(result)}")

    def close(self) -> None:
        self.progress.stop()


class QuietProgress(PlainProgress):
    """-q: nothing but errors (stderr) and the final summary."""

    def log(self, msg: str) -> None:
        from runners.console.runlog import RUN_LOG

        RUN_LOG.note(msg)

    def advance(self, job, result: dict) -> None:
        self.done += 1
        self.log(f"run {job.run_id}: {describe_result(result)}  [{self.done}/{self.total}]")


def make_progress(total: int, done: int = 0, quiet: bool = False) -> PlainProgress:
    if quiet:
        return QuietProgress(total, done)
    return RichProgress(total, done) if sys.stdout.isatty() else PlainProgress(total, done)
