"""The native backend: the run set on this kernel, with Mininet, in this process.

`run_set` opens (or resumes) the set, records what this machine is, runs every job through the pipeline's
NativeRunner with a progress display, records how the set ended, and writes the summary and report."""
from __future__ import annotations

import os
import platform
import time
from pathlib import Path

from runners.backends.vm.kernel_sets import record_kernel
from runners.console.output import err, info
from runners.errors import EXIT_FAIL, EXIT_STOPPED
from runners.results.metadata import native_metadata, read_metadata_file
from runners.results.store import runs_on_disk
from runners.runset.checks import user_code
from runners.runset.jobs import parse_shard


def run_set(options, exp, run_dir: Path, probe_report) -> int:
    from runners.pipeline.runner import NativeRunner
    from runners.console.progress import make_progress
    from runners.errors import results_disk_error
    from runners.results.metadata import command_record
    from runners.runset.jobs import runs_in
    from runners.runset.session import RESULTS_UNWRITABLE, open_run_set, run_to_the_end

    run_set = open_run_set(exp, run_dir, options.repeat, parse_shard(options.shard) if options.shard else None,
                           only_kernel=options.only_kernel,
                           only_points=set(options.only_points.split(",")) if options.only_points else None)
    start_logs(options, run_dir)
    store, started = run_set.store, time.time()
    store.set_metadata(scenario=exp.scenario.name, scenario_file=str(Path(exp.file).resolve()),
                       backend=os.environ.get("TESTBED_BACKEND", "native"),
                       started_utc=store.metadata.get("started_utc")
                       or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
                       **command_record(options, exp, store.metadata), seed=run_set.seed,
                       shard=list(run_set.shard) if run_set.shard else None, repeat=run_set.repeat,
                       points={**(store.metadata.get("points") or {}),
                               **{p.id: {"label": p.label, "params": p.params} for p in run_set.points}},
                       user_code=user_code(exp),
                       **native_metadata(probe_report.facts, host_finishes=options.no_report), probe=probe_report.facts)
    if options.only_kernel:
        record_kernel(run_dir, options.only_kernel, release=platform.release(),
                      mptcp_features=probe_report.facts.get("mptcp_features"))
        store.metadata = read_metadata_file(run_dir)
    prepared_mono = time.monotonic()
    kept, jobs = run_set.pending_jobs()
    to_go = runs_in(jobs)
    if not options.vm_guest:   # the host named the folder before it started the guest
        info(f"results: {run_dir}")
    if run_set.resumed:
        info(f"resuming: {kept} finished run(s) kept, {to_go} to go")
    progress = make_progress(kept + to_go, kept, quiet=options.quiet)
    if options.capture_spec is not None:
        store.set_metadata(capture=options.capture_spec.to_dict())
    runner = NativeRunner(store, probe_report, log=progress.log, on_run=progress.advance,
                          base_dir=Path(exp.file).resolve().parent, capture=options.capture_spec,
                          pause_after=options.pause_after, host_rows=options.vm_guest)
    store.reserve_space()
    code, status, failure = run_to_the_end(runner, run_set, jobs, options.max_repeat if options.until_conclusive else None,
                                  progress, err)
    store.release_space()
    kept_runs = runs_on_disk(run_dir)
    if code in EXIT_STOPPED:
        err(f"{status}; {kept_runs} finished run(s) kept in {run_dir} "
             f"(continue with: run-scenario --resume {run_dir})")
    elif code == EXIT_FAIL:
        err(f"{kept_runs} finished run(s) kept in {run_dir}"
             + (f" (continue with: run-scenario --resume {run_dir})" if status == RESULTS_UNWRITABLE else ""))
    # interpreter start and imports, then loading, validating and probing: before the first build
    phases = {**runner.phases, "python_start": round(options.process_age, 3),
              "prepare": round(prepared_mono - options.started_at, 3)}   # load, validate, probe, metadata
    try:
        store.finish_metadata(status=status, failure=failure,
                              finished_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              wall_seconds=round(time.time() - started, 2), phases=phases,
                              process_seconds=round(time.monotonic() - options.started_at + options.process_age, 3))
    except OSError as e:
        if not results_disk_error(e):
            raise
        err(f"the set's status ({status}) could not be written to {run_dir / 'metadata.json'}: {e.strerror}")
        return EXIT_FAIL
    if kept_runs and not options.no_report and status != RESULTS_UNWRITABLE:
        from runners.analysis.report import summary_and_report   # not in the VM's guest: its host reports

        code = summary_and_report(run_dir, options, code)
    return code


def start_logs(options, run_dir: Path) -> None:
    """run.log (unless the host writes it: a VM run) and commands.log, with -v's echo."""
    from runners.linux.commandlog import COMMANDS
    from runners.console.runlog import RUN_LOG

    if not options.no_run_log:
        RUN_LOG.start(run_dir / "run.log")
    COMMANDS.open(run_dir / "commands.log", echo=options.verbose)
