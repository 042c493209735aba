"""A run set: one result directory, the runs still to do in it, and how it ended.

Resume (a directory with results.json keeps its finished runs), the seed
(the scenario's, the resumed set's, or a fresh one, recorded), shards,
--until-conclusive rounds, and the exit code and status each ending maps to.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from scenarios.spec.sweep import shard_points

from runners.errors import (EXIT_FAIL, EXIT_INTERRUPTED, EXIT_OK, EXIT_TERMINATED, RunFailure, Terminated,
    results_disk_error)
from runners.linux.nsexec import CommandError
from runners.pipeline.job import Job
from runners.results.metadata import read_metadata
from runners.results.store import ResultStore, run_key
from runners.runset.jobs import plan_jobs, runs_in

RESULTS_UNWRITABLE = "failed: results disk full or read-only"


@dataclass
class RunSet:
    exp: object                  # the loaded experiment (scenarios.spec.loader)
    store: ResultStore
    resumed: bool
    seed: int
    shard: tuple[int, int] | None
    points: list
    repeat: int

    @property
    def multi_point(self) -> bool:
        return len(self.exp.points) > 1

    def pending_jobs(self) -> tuple[int, list[Job]]:
        """(finished runs kept, jobs still to run). A job run together reruns whole when one of its
        runs is missing (the set stopped between its records); its new records replace the old."""
        done = {run_key(r) for r in self.store.runs}
        jobs = plan_jobs(self.points, range(1, self.repeat + 1), self.seed, self.multi_point)
        return len(done), [j for j in jobs if any(k not in done for k in j.keys)]


# what a run costs beyond its traffic and pause: measured 1.3-1.7 s per run in the TCG VM, plus the network's
# build and shaping once per point (docs/benchmark.md, 2026-11-25; 3.6-4.5 s on 2026-11-22); natively
# less. The estimate leans long on purpose: deep queues take longer to drain, a boot adds ~15 s.
RUN_OVERHEAD_S = 3.0
MAX_UNASKED_S = 24 * 3600


def run_seconds(scenario, rate_mbps: float | None = None) -> float:
    """One run's expected wall time: its traffic (a fixed size at `rate_mbps`, by default the slowest
    link's: the longest run), pause and overhead."""
    t = scenario.traffic
    rate = rate_mbps or scenario.topology.min_rate
    traffic = t.duration + t.omit if t.duration is not None else t.bytes * 8 / (rate * 1e6)
    return traffic + scenario.runs.pause / 1000.0 + RUN_OVERHEAD_S


def job_seconds(job: Job) -> float:
    """A job's expected wall time. A fixed size goes at its path's bottleneck rate; TCP run together on
    several paths at the slowest one's; MPTCP at least at its best path's."""
    topo = job.point.scenario.topology
    if job.mode == "tcp":
        rate = min(topo.path_rate(p) for p in job.paths)
    else:
        rate = max(topo.path_rate(p) for p in topo.path_names)
    return run_seconds(job.point.scenario, rate)


def estimate(exp, repeat: int | None) -> tuple[int, float]:
    """(runs, seconds) a run set of this experiment would take."""
    one_round = plan_jobs(exp.points, range(1, 2), 0, len(exp.points) > 1)
    rounds = repeat or exp.scenario.runs.repeat
    return runs_in(one_round) * rounds, sum(job_seconds(j) for j in one_round) * rounds


def too_long(exp, repeat: int | None) -> str | None:
    """Why the run set needs --yes (over 24 hours, or a transfer that cannot finish in time), or None."""
    runs, seconds = estimate(exp, repeat)
    if seconds > MAX_UNASKED_S:
        return (f"{runs} runs would take about {seconds / 3600:.0f} hours ({seconds / 86400:.1f} days); "
                "pass --yes to run them anyway")
    return None


def open_run_set(exp, run_dir: Path, repeat: int | None, shard: tuple[int, int] | None,
                 only_kernel: str | None = None, only_points: set[str] | None = None) -> RunSet:
    """The set in `run_dir` (new or resumed). `only_kernel`: a VM guest of a kernel sweep runs that
    kernel's points of the shard (the shard is taken over all points, as the host took it);
    `only_points`: of those, these (a further round for cross-kernel checks)."""
    scenario = exp.scenario
    store = ResultStore(run_dir)
    resumed = (run_dir / "results.json").exists()
    if resumed:
        store.runs = list(json.loads((run_dir / "results.json").read_text()).get("runs", []))
    # with what the host recorded before its guest started (the command line, a kernel sweep's refusals)
    store.metadata = read_metadata(run_dir)
    store.write_scenario(exp.text)
    seed = scenario.runs.seed if scenario.runs.seed is not None else store.metadata.get("seed")
    if seed is None:
        seed = random.SystemRandom().randrange(2**31)
    if shard is None and store.metadata.get("shard"):
        shard = tuple(store.metadata["shard"])
    return RunSet(exp=exp, store=store, resumed=resumed, seed=seed, shard=shard,
                  points=[p for p in shard_points(exp.points, shard) if only_kernel in (None, p.kernel)
                          and (only_points is None or p.id in only_points)],
                  repeat=repeat or scenario.runs.repeat)


def more_rounds(runner, run_set: RunSet, max_repeat: int, progress) -> None:
    """--until-conclusive: one more repetition of every inconclusive point, until none is or max_repeat."""
    from runners.analysis.report import make_report

    run_set.store.settle()   # the runs so far on disk: the report reads results.json
    rnd = max([r["repeat"] for r in run_set.store.runs] + [run_set.repeat])
    while rnd < max_repeat:
        run_set.store.settle()
        pending = make_report(run_set.store.dir, plots=False).inconclusive_points()
        if not pending:
            return
        rnd += 1
        more = plan_jobs([p for p in run_set.points if p.id in pending], range(rnd, rnd + 1), run_set.seed,
                         run_set.multi_point)
        progress.log(f"until-conclusive: round {rnd} for {len(pending)} inconclusive point(s)")
        progress.extend(runs_in(more))
        runner.run_jobs(more)


def run_to_the_end(runner, run_set: RunSet, jobs: list[Job], max_repeat: int | None, progress,
                   err) -> tuple[int, str, str | None]:
    """Run the jobs (and further rounds); the exit code, the status and why it failed (or None), with the
    network always cleaned up."""
    try:
        with runner:
            runner.run_jobs(jobs)
            if max_repeat is not None:
                more_rounds(runner, run_set, max_repeat, progress)
        run_set.store.flush_raw()
        return EXIT_OK, "ok", None
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED, "interrupted", None
    except Terminated:
        return EXIT_TERMINATED, "terminated", None
    except (RunFailure, CommandError) as e:
        # the last run's records are written while the next run sets up: a disk that failed them is
        # what stopped the set, whatever the next run's set-up then ran into
        unwritten = _settle_for_disk_error(run_set.store)
        if unwritten is not None:
            return _unwritable(run_set, unwritten, err)
        err(str(e))
        return EXIT_FAIL, "failed", str(e)
    except OSError as e:
        if not results_disk_error(e):
            raise
        return _unwritable(run_set, e, err)
    finally:
        _write_what_was_handed_over(run_set.store)
        progress.close()


def _unwritable(run_set: RunSet, e: OSError, err) -> tuple[int, str, str]:
    why = (f"cannot write the results in {run_set.store.dir}: {e.strerror}"
           + (f" ({e.filename})" if e.filename else ""))
    err(why + "; the set stopped there")
    return EXIT_FAIL, RESULTS_UNWRITABLE, why


def _settle_for_disk_error(store) -> OSError | None:
    """The pending write of the last run's records, finished: its error if the results' disk failed it."""
    try:
        store.settle()
    except OSError as e:
        if results_disk_error(e):
            return e
    return None


def _write_what_was_handed_over(store) -> None:
    """However the set ended, the raw files of its runs reach the disk. A failed write is not reported
    here: the set already ended on an error or an interrupt, or reported the disk's state itself."""
    try:
        store.flush_raw()
    except OSError:
        pass
