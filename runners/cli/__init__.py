"""`run-scenario`: validate a scenario, get a capable kernel, run it, write results.

Exit codes: 0 ok, 2 bad input (nothing was started), 1 a failure while
running (finished runs are kept), 130 interrupted by Ctrl-C, 143 by SIGTERM.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import threading
import time
from pathlib import Path

from scenarios.spec.kernel import is_kernel_path

from runners.analysis.summary import summary
from runners.backends.vm.kernels import native_refusal
from runners.console import output
from runners.console.output import err, info, terminal_gone
from runners.errors import (EXIT_FAIL, EXIT_INPUT, EXIT_INTERRUPTED, EXIT_KERNEL_REFUSED, EXIT_OK, EXIT_STOPPED,
    EXIT_TERMINATED)
from runners.paths import REPO, RESULTS
from runners.results.metadata import DEFAULT_MAX_REPEAT, native_metadata, userland_metadata
from runners.runset.checks import (after_a_killed_run, as_if_from, bad_folders, check_plans, needs_consent,
    select_variants, size_of, user_code)
from runners.runset.kernel_sets import kernel_base, record_kernel, sweeps_kernels, vm_kernels_problem

EPILOG = """\
backends:
  native  run on this kernel, as root. Needs MPTCP, sch_netem, Mininet and iperf3 (and
          Open vSwitch and os-ken for switches); a probe checks them all first and
          names whatever is missing.
  vm      boot a micro-VM (virtme-ng) with a distribution kernel from /boot (the newest
          non-backports one, or the newest meeting `requires.kernel`, or --kernel)
          and run the native backend inside it. Uses KVM when it can boot a stock
          kernel, else TCG emulation (slower: ~12 s to boot and power off, measured
          2026-11-23). When a warm VM is up (`run-scenario vm up`), runs go to it
          instead: no boot.
  auto    native when the probe passes, else vm (the default).

results:
  <out>/<scenario name>/<UTC timestamp>/ holds scenario.yaml, metadata.json (with the
  seconds of every phase), results.json, runs.csv (tidy: one row per run, metric and
  path), raw/ tool output, and the report: stats.csv, verdicts.json, junit.xml and
  plots/ (PNG; --svg adds SVG).

experiments:
  A scenario may hold a `sweep` grid and named `variants`; every combination is a
  point (`--variant NAME` runs only that variant; `optional: true` variants run
  only when named). Runs go in rounds (every point, primary and mode once per round), in an
  order shuffled by a recorded seed. The network is rebuilt only when the
  topology changes. `expect` claims are judged per point with 95% confidence
  intervals: pass, fail, or inconclusive (needs more repetitions).

subcommands:
  run-scenario report DIR [--baseline DIR]   stats, plots, verdicts, JUnit from saved results
  run-scenario merge DIR... [--out DIR]      combine --shard result sets into one
  run-scenario compare DIR... [--metric M] [--by PARAM]   result sets side by side (table, overlay)
  run-scenario vm up|status|down             a warm VM: runs with the vm backend start without a boot
  run-scenario clean [--yes]                 list (and remove) what runs left behind, like mn -c
  run-scenario list [DIR]                    every scenario in DIR (scenarios/): name, runs, time, description
  run-scenario export FILE [--point ID] > net.py   the network as a standalone Mininet script
  run-scenario shell FILE [--point ID] [--primary P]   the network, shaped and configured, in Mininet's CLI

exit codes:
  0 ok; 1 failure while running (finished runs are kept) or a failed verdict;
  2 bad input or bad command line (nothing was started); 130 Ctrl-C; 143 SIGTERM or SIGHUP
  (a closed terminal); each cleans up first.

examples:
  run-scenario scenarios/two-paths.yaml
  run-scenario scenarios/e4-delay.yaml --repeat 3 --backend vm
  run-scenario scenarios/e4-primary-path.yaml --shard 1/4
  run-scenario --resume results/e4-primary-path/20261121T101500Z
  run-scenario scenarios/e5-exp3.yaml --variant paper-1g
  run-scenario scenarios/two-paths.yaml --kernel 6.1 --kernel 6.12 --repeat 3
  run-scenario scenarios/kernels.yaml
  run-scenario --check scenarios/*.yaml
  run-scenario scenarios/e4-delay.yaml --repeat 5 --dry-run
  run-scenario --schema > scenario.schema.json
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="run-scenario", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
        description="Run an MPTCP experiment described by a YAML scenario file in a Mininet network: "
                    "MPTCP against a TCP baseline, with throughput, per-path bytes, out-of-order "
                    "counts, retransmissions, subflows and RTT.")
    p.add_argument("scenario", nargs="*", help="scenario YAML file (several with --check)")
    p.add_argument("--out", default=str(RESULTS), metavar="DIR",
                   help="base folder for results (default: results/ of this checkout; ./results when "
                        "installed without -e)")
    p.add_argument("--backend", choices=["auto", "native", "vm"], default="auto",
                   help="where to run (default: auto)")
    p.add_argument("--repeat", type=int, metavar="N", help="override runs.repeat")
    p.add_argument("--kernel", action="append", metavar="KERNEL",
                   help="vm backend: the kernel to boot, a release prefix of one in /boot (6.1, 6.12) or an image's "
                        "path (default: the newest non-backports /boot/vmlinuz-*, or the newest that meets "
                        "requires.kernel). Twice or more: run the scenario on each, in one result set (as "
                        "`sweep: {kernel: [...]}` does)")
    p.add_argument("--modules", metavar="DIR",
                   help="vm backend: modules of a kernel given by path, when they are not in lib/modules/<release> "
                        "above the image: an INSTALL_MOD_PATH (DIR/lib/modules/<release>) or that folder")
    p.add_argument("--only-kernel", help=argparse.SUPPRESS)   # internal (VM guest side): this kernel's points
    p.add_argument("--only-points", help=argparse.SUPPRESS)   # internal (VM guest side): of those, these ids
    p.add_argument("--vm-memory", default="2G", metavar="SIZE", help="vm backend: guest memory (default: 2G)")
    p.add_argument("--vm-cpus", type=int, metavar="N", help="vm backend: guest CPUs (default: host CPUs, at most 4)")
    p.add_argument("--shard", metavar="K/N", help="run only shard K of N of the sweep's points (combine with merge)")
    p.add_argument("--resume", metavar="DIR", help="continue an interrupted result set: finished runs are kept, "
                   "and --repeat, --variant, --until-conclusive and --max-repeat are the set's unless given again")
    p.add_argument("--until-conclusive", action=argparse.BooleanOptionalAction, default=False,
                   help="add repetitions to points whose verdicts are inconclusive, up to --max-repeat")
    p.add_argument("--max-repeat", type=int, default=DEFAULT_MAX_REPEAT, metavar="N",
                   help=f"bound for --until-conclusive (default: {DEFAULT_MAX_REPEAT})")
    p.add_argument("--baseline", metavar="DIR", help="a saved result set: flag significant regressions against it")
    p.add_argument("--allow-commands", action="store_true",
                   help="allow traffic.tool: command, which runs the scenario's own commands as root")
    p.add_argument("--variant", action="append", metavar="NAME",
                   help="run only this variant (repeatable); default: every variant not marked optional")
    p.add_argument("--svg", action="store_true", help="write every figure as SVG too (default: PNG only)")
    p.add_argument("--no-plots", action="store_true", help="no figures and no report.md/report.html (stats, "
                   "verdicts and JUnit are written; `run-scenario report DIR` draws them later): seconds saved per "
                   "set, most in a TCG micro-VM")
    p.add_argument("--junit", metavar="PATH", help="also write the JUnit XML here (it is always in the result set)")
    p.add_argument("--yes", action="store_true", help="run a set estimated to take more than 24 hours")
    p.add_argument("--capture", nargs="?", const="client,server", metavar="ROLES",
                   help="tcpdump on every interface of these nodes (client, server, routers; default client,server) "
                   "during each run's traffic: raw/<run>/pcap/<node>-<interface>.pcap, and with tshark "
                   "raw/<run>/subflows-pcap.csv (one row per subflow). Costs CPU, most under TCG")
    p.add_argument("--snaplen", type=int, default=None, metavar="BYTES",
                   help="bytes kept per captured packet (default 128: headers and MPTCP options; 64-65535)")
    talk = p.add_mutually_exclusive_group()
    talk.add_argument("-v", "--verbose", action="store_true",
                      help="print every command as it runs, e.g. `[h1] ip mptcp endpoint add 10.0.2.1 dev h1-eth1 "
                      "subflow` (every result set keeps them in commands.log anyway)")
    talk.add_argument("-q", "--quiet", action="store_true", help="print only errors and the final summary")
    p.add_argument("--no-run-log", action="store_true", help=argparse.SUPPRESS)   # the host writes it
    p.add_argument("--pause-after", choices=["build", "shaping", "run"], metavar="build|shaping|run",
                   help="stop after the network is built, after it is shaped, or after each run, so you can look "
                   "around from another terminal (an nsenter line per host is printed); Enter continues, or "
                   "SIGUSR1 when not on a terminal. Native backend only")
    p.add_argument("--check", action="store_true", help="only validate the scenario file(s) and exit")
    p.add_argument("--dry-run", action="store_true", help="print the job table (points, modes, primaries, "
                   "repetitions) and the estimated wall time on the chosen backend, then exit; starts nothing")
    p.add_argument("--schema", action="store_true", help="print the scenario JSON Schema and exit")
    p.add_argument("--run-dir", help=argparse.SUPPRESS)  # internal: exact result folder (VM guest side)
    p.add_argument("--vm-guest", action="store_true", help=argparse.SUPPRESS)   # internal: see results/metadata.py
    p.add_argument("--scenario-file", help=argparse.SUPPRESS)   # internal: see as_if_from
    # internal (VM guest side): the host finishes the result set after the guest exits, at native speed:
    # summary, report, tool versions and the git revision
    p.add_argument("--no-report", action="store_true", help=argparse.SUPPRESS)
    return p


def _parse_shard(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard {text!r}: use K/N, e.g. 2/4") from None
    if not 1 <= k <= n:
        raise argparse.ArgumentTypeError(f"--shard {text!r}: K must be between 1 and N")
    return k, n


def _before_anything_starts(args, exp, backend: str) -> str | None:
    """What would fail late, checked before a result folder exists: tcpdump for --capture, the VM's
    kernel, and what a killed run left behind."""
    if args.capture_spec is not None:
        from runners.backends.programs import tools_for
        missing = [t.missing_message() for t in tools_for("capture") if t.found() is None]
        if any("tcpdump" in m for m in missing):
            return "--capture: " + "; ".join(missing)
        if missing:
            print(f"warning: --capture without subflows-pcap.csv: {missing[0]}", file=sys.stderr, flush=True)
    if backend == "vm" and args.pause_after and not os.environ.get("TESTBED_IN_VM"):
        return ("--pause-after needs the native backend (a micro-VM's hosts cannot be entered from here); "
                "`run-scenario shell` opens a network inside the VM")
    if backend == "vm" and sweeps_kernels(exp):
        problem = vm_kernels_problem(exp, args.modules)
        if problem:
            return problem
    elif backend == "vm":
        from runners.backends.vm.boot import VmError, choose_kernel, modules_dir
        try:
            image = choose_kernel(args.kernel[0] if args.kernel else None, exp.scenario.requires.kernel)
            if args.modules:
                modules_dir(image, Path(args.modules))
        except VmError as e:
            return str(e)
    return after_a_killed_run(Path(args.resume), backend) if args.resume else None


def _check_kernel_arguments(args, parser) -> None:
    """--kernel values are kernels (a release prefix or an image's path, made absolute so that the guest
    reads the same points); --modules is a folder."""
    from scenarios.spec.kernel import kernel_label_problem

    for i, k in enumerate(args.kernel or []):
        problem = kernel_label_problem(k)
        if problem:
            parser.error(f"--kernel {problem}")
        if "/" in k:
            args.kernel[i] = str(Path(k).resolve())
    if args.kernel and len(set(args.kernel)) != len(args.kernel):
        parser.error("--kernel: a kernel is given twice")
    if args.modules is not None and not Path(args.modules).is_dir():
        parser.error(f"--modules {args.modules}: not a folder")


def kernel_sweep(args) -> list[str] | None:
    """The kernels of a sweep made on the command line (two or more --kernel), else None."""
    return list(args.kernel) if args.kernel and len(args.kernel) > 1 else None


def _point_at_the_resumed_set(args, parser) -> None:
    """--resume DIR: the set's folder, scenario, kernel sweep and run options (one given again is used,
    and said so; another --variant is refused)."""
    from runners.results.metadata import given_options, read_metadata, resume_options

    rdir = Path(args.resume)
    if not (rdir / "scenario.yaml").exists():
        parser.error(f"--resume {rdir}: not a result set (no scenario.yaml)")
    if args.scenario and Path(args.scenario[0]).read_text() != (rdir / "scenario.yaml").read_text():
        parser.error(f"--resume {rdir}: {args.scenario[0]} differs from the scenario of that result set")
    try:
        shell = json.loads((rdir / "metadata.json").read_text()).get("shell")
    except (OSError, ValueError):
        shell = False
    if shell:
        parser.error(f"--resume {rdir}: a `run-scenario shell` session's folder, not a run set: nothing to resume "
                     "(run the scenario for a set of its own)")
    args.scenario = [str(rdir / "scenario.yaml")]
    args.run_dir = str(rdir.resolve())   # the VM's guest starts in the checkout, and its command names it
    meta = read_metadata(rdir)
    original = meta.get("scenario_file")
    if original and Path(original).is_file() and not args.scenario_file:
        args.scenario_file = original
    if meta.get("kernel_sweep") and not args.kernel:
        args.kernel = list(meta["kernel_sweep"])
    notes, refusal = resume_options(args, given_options(build_parser(), args.argv), meta)
    if refusal:
        parser.error(f"--resume {rdir}: {refusal}")
    for note in notes:
        info(f"resume: {note}")


def _run_native(args, exp, run_dir: Path, probe_report) -> int:
    from runners.pipeline.runner import NativeRunner
    from runners.console.progress import make_progress
    from runners.errors import results_disk_error
    from runners.results.metadata import command_record
    from runners.runset.jobs import runs_in
    from runners.runset.session import RESULTS_UNWRITABLE, open_run_set, run_to_the_end

    run_set = open_run_set(exp, run_dir, args.repeat, _parse_shard(args.shard) if args.shard else None,
                           only_kernel=args.only_kernel,
                           only_points=set(args.only_points.split(",")) if args.only_points else None)
    _start_logs(args, run_dir)
    store, started = run_set.store, time.time()
    store.set_metadata(scenario=exp.scenario.name, scenario_file=str(Path(exp.file).resolve()),
                       backend=os.environ.get("TESTBED_BACKEND", "native"),
                       started_utc=store.metadata.get("started_utc")
                       or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
                       **command_record(args, exp, store.metadata), seed=run_set.seed,
                       shard=list(run_set.shard) if run_set.shard else None, repeat=run_set.repeat,
                       points={**(store.metadata.get("points") or {}),
                               **{p.id: {"label": p.label, "params": p.params} for p in run_set.points}},
                       user_code=user_code(exp),
                       **native_metadata(probe_report.facts, host_finishes=args.no_report), probe=probe_report.facts)
    if args.only_kernel:
        record_kernel(run_dir, args.only_kernel, release=platform.release(),
                      mptcp_features=probe_report.facts.get("mptcp_features"))
        store.metadata = json.loads((run_dir / "metadata.json").read_text())
    prepared_mono = time.monotonic()
    kept, jobs = run_set.pending_jobs()
    to_go = runs_in(jobs)
    info(f"results: {run_dir}")
    if run_set.resumed:
        info(f"resuming: {kept} finished run(s) kept, {to_go} to go")
    progress = make_progress(kept + to_go, kept, quiet=args.quiet)
    if args.capture_spec is not None:
        store.set_metadata(capture=args.capture_spec.to_dict())
    runner = NativeRunner(store, probe_report, log=progress.log, on_run=progress.advance,
                          base_dir=Path(exp.file).resolve().parent, capture=args.capture_spec,
                          pause_after=args.pause_after)
    store.reserve_space()
    code, status, failure = run_to_the_end(runner, run_set, jobs, args.max_repeat if args.until_conclusive else None,
                                  progress, err)
    store.release_space()
    kept_runs = _runs_on_disk(run_dir)
    if code in EXIT_STOPPED:
        err(f"{status}; {kept_runs} finished run(s) kept in {run_dir} "
             f"(continue with: run-scenario --resume {run_dir})")
    elif code == EXIT_FAIL:
        err(f"{kept_runs} finished run(s) kept in {run_dir}"
             + (f" (continue with: run-scenario --resume {run_dir})" if status == RESULTS_UNWRITABLE else ""))
    # interpreter start and imports, then loading, validating and probing: before the first build
    phases = {**runner.phases, "python_start": round(args.process_age, 3),
              "prepare": round(prepared_mono - args.started_at, 3)}   # load, validate, probe, metadata
    try:
        store.finish_metadata(status=status, failure=failure,
                              finished_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              wall_seconds=round(time.time() - started, 2), phases=phases,
                              process_seconds=round(time.monotonic() - args.started_at + args.process_age, 3))
    except OSError as e:
        if not results_disk_error(e):
            raise
        err(f"the set's status ({status}) could not be written to {run_dir / 'metadata.json'}: {e.strerror}")
        return EXIT_FAIL
    if kept_runs and not args.no_report and status != RESULTS_UNWRITABLE:
        code = _summary_and_report(run_dir, args, code)
    return code


def _runs_on_disk(run_dir: Path) -> int:
    """Finished runs as results.json holds them (a run whose write failed is not among them)."""
    try:
        return len(json.loads((run_dir / "results.json").read_text()).get("runs", []))
    except (OSError, ValueError):
        return 0


def _start_logs(args, run_dir: Path) -> None:
    """run.log (unless the host writes it: a VM run) and commands.log, with -v's echo."""
    from runners.linux.commandlog import COMMANDS
    from runners.console.runlog import RUN_LOG

    if not args.no_run_log:
        RUN_LOG.start(run_dir / "run.log")
    COMMANDS.open(run_dir / "commands.log", echo=args.verbose)


def _summary_and_report(run_dir: Path, args, code: int) -> int:
    """Print the summary, write stats/plots/verdicts/JUnit, time it; a failed verdict turns exit 0 into 1."""
    from runners.results.store import ResultStore, load_results

    t0 = time.monotonic()
    doc = load_results(run_dir)
    print(summary(doc["runs"], doc.get("metadata")), flush=True)
    verdict_code = _report(run_dir, Path(args.baseline) if args.baseline else None, svg=args.svg,
                           plots=not args.no_plots,
                           junit=Path(args.junit) if args.junit else None)
    store = ResultStore(run_dir)
    store.metadata = json.loads((run_dir / "metadata.json").read_text())
    store.finish_metadata(phases={**store.metadata.get("phases", {}), "report": round(time.monotonic() - t0, 3)})
    return verdict_code if code == EXIT_OK else code


def _report(run_dir: Path, baseline: Path | None, svg: bool = False, junit: Path | None = None,
            plots: bool = True) -> int:
    """Stats, plots, verdicts and JUnit for a result set; 1 when a verdict failed."""
    from scenarios.spec.loader import ScenarioError

    from runners.analysis.report import make_report, verdict_table
    from runners.results.store import atomic_write

    try:
        rep = make_report(run_dir, baseline, plots=plots, svg=svg)
    except ScenarioError as e:   # a result set's scenario.yaml edited by hand: the file and the field
        print(e.render(), file=sys.stderr)
        return EXIT_INPUT
    if rep.verdicts:
        print(verdict_table(rep.verdicts), flush=True)
    info(f"junit: {run_dir / 'junit.xml'}")
    if junit is not None:
        atomic_write(junit, (run_dir / "junit.xml").read_text())
        info(f"junit: {junit}")
    info(f"plots: {run_dir / 'plots'}" if plots else f"plots: none (--no-plots; `run-scenario report {run_dir}`)")
    return EXIT_FAIL if rep.failed else EXIT_OK


def _guest_flags(args) -> list[str]:
    """The run options that the guest's native run must see too."""
    out = []
    for flag, value in (("--repeat", args.repeat), ("--shard", args.shard), ("--baseline", args.baseline),
                        ("--max-repeat", args.max_repeat if args.until_conclusive else None)):
        if value is not None:
            out += [flag, str(Path(value).resolve()) if flag == "--baseline" else str(value)]
    for v in args.variant or []:
        out += ["--variant", v]
    if args.until_conclusive:
        out.append("--until-conclusive")
    if args.allow_commands:
        out.append("--allow-commands")
    if args.capture_spec is not None:
        out += ["--capture", ",".join(args.capture_spec.roles), "--snaplen", str(args.capture_spec.snaplen)]
    # not --quiet: the host shows the guest's errors only, and keeps every line in run.log; the host
    # records the user's command line and options (--vm-guest)
    out += ["--no-run-log", "--vm-guest"] + (["--verbose"] if args.verbose else [])
    if args.yes:
        out.append("--yes")
    return out


def _run_vm(args, exp, run_dir: Path) -> int:
    from runners.results.metadata import command_record, read_metadata, update_metadata
    from runners.results.store import ResultStore
    from runners.console.runlog import RUN_LOG

    ResultStore(run_dir).write_scenario(exp.text)
    update_metadata(run_dir, **command_record(args, exp, read_metadata(run_dir)))   # before the guest: it keeps it
    RUN_LOG.start(run_dir / "run.log")
    info(f"results: {run_dir}")
    if not args.no_report and not args.no_plots:
        _prepare_the_report_meanwhile()
    if sweeps_kernels(exp):
        code = _run_vm_per_kernel(args, exp, run_dir)
    else:
        code = _run_one_vm(args, exp, run_dir, args.kernel[0] if args.kernel else None, exp.scenario.requires.kernel)
    meta_path = run_dir / "metadata.json"
    if code == EXIT_OK and not meta_path.exists():
        err("the VM finished but wrote no results")
        return EXIT_FAIL
    if code not in (EXIT_OK, *EXIT_STOPPED) and not (run_dir / "results.json").exists():
        err(f"the VM run failed (exit {code}) before any run finished")
        if not meta_path.exists():
            _mark_stopped(run_dir, "failed", failure=f"the VM run failed (exit {code}) before any run finished; "
                                                     "its output is above this line on the console")
    if (run_dir / "results.json").exists() and code != EXIT_INPUT:
        code = _summary_and_report(run_dir, args, code)
    return code if code in (EXIT_OK, EXIT_FAIL, EXIT_INPUT, *EXIT_STOPPED) else EXIT_FAIL


def _prepare_the_report_meanwhile() -> None:
    """While the guest runs, this process only waits: load matplotlib and draw a first figure now (0.4-0.5 s
    on the host) rather than after the guest is done, when the user waits for the report."""
    def load() -> None:
        try:
            from runners.analysis import plots
            plots.warm_up()
        except Exception:   # the report itself will say what is wrong
            pass

    threading.Thread(target=load, name="report-warm-up", daemon=True).start()


def _run_vm_per_kernel(args, exp, run_dir: Path) -> int:
    """Boot each kernel of the sweep in turn (or use the warm VM that runs it) for its points, all into
    one result set. A kernel that cannot run the scenario is recorded as refused; the others go on."""
    from scenarios.spec.kernel import satisfies

    from runners.backends.vm.kernels import image_release, kernel_groups, resolve_kernel
    from runners.results.metadata import update_metadata
    from runners.runset.kernel_sets import guest_kernel_flags

    if kernel_sweep(args):
        update_metadata(run_dir, kernel_sweep=kernel_sweep(args))
    from scenarios.spec.sweep import shard_points

    requirement, codes = exp.scenario.requires.kernel, []
    shard = _parse_shard(args.shard) if args.shard else None
    for label, points in kernel_groups(shard_points(exp.points, shard)).items():
        image = resolve_kernel(label, kernel_base(exp))
        release = image_release(image)
        if not satisfies(release, requirement):
            why = f"requires.kernel {requirement}: kernel {release} does not meet it"
            record_kernel(run_dir, label, release=release, image=str(image), refused=why)
            info(f"kernel {label}: not run: {why}")
            continue
        info(f"kernel {label} ({release}): {len(points)} point(s)")
        code = _run_one_vm(args, exp, run_dir, image, None,
                           ["--only-kernel", label, *guest_kernel_flags(kernel_sweep(args))], label)
        if code in EXIT_STOPPED:
            return code
        if code != EXIT_KERNEL_REFUSED:
            codes.append(code)
    if codes and not any(codes) and args.until_conclusive:
        code = _more_rounds_across_kernels(args, exp, run_dir)
        if code in EXIT_STOPPED:
            return code
        codes.append(code)
    if not codes:
        err("no kernel of the sweep could run the scenario (see above)")
        _mark_stopped(run_dir, "failed", failure="no kernel of the sweep could run the scenario")
        return EXIT_FAIL
    if any(codes):
        _mark_stopped(run_dir, "failed", failure="a kernel's runs failed (see run.log)")
        return EXIT_FAIL
    return EXIT_OK


def _more_rounds_across_kernels(args, exp, run_dir: Path) -> int:
    """--until-conclusive for checks across kernels: while one is inconclusive, one more repetition of its
    points, a boot (or warm VM job) per kernel, up to --max-repeat. Each guest has already added rounds
    for its own kernel's checks."""
    from runners.analysis.report import make_report
    from runners.backends.vm.kernels import kernel_groups, resolve_kernel
    from runners.runset.kernel_sets import guest_kernel_flags

    done = json.loads((run_dir / "results.json").read_text())["runs"]
    rnd = max([int(r["repeat"]) for r in done] + [args.repeat or exp.scenario.runs.repeat])
    while rnd < args.max_repeat:
        pending = make_report(run_dir, plots=False).inconclusive_across_kernels()
        if not pending:
            return EXIT_OK
        rnd += 1
        info(f"until-conclusive: round {rnd} for {len(pending)} point(s) of checks across kernels")
        for label, points in kernel_groups([p for p in exp.points if p.id in pending]).items():
            code = _run_one_vm(args, exp, run_dir, resolve_kernel(label, kernel_base(exp)), None,
                               ["--only-kernel", label, "--only-points", ",".join(p.id for p in points),
                                "--repeat", str(rnd), *guest_kernel_flags(kernel_sweep(args))], label)
            if code:
                return code
    return EXIT_OK


def _run_one_vm(args, exp, run_dir: Path, kernel, requirement: str | None, more_flags: tuple = (),
                label: str | None = None) -> int:
    """One guest (booted, or the warm VM) runs the set's points (or one kernel's, `label`); the host then
    adds what only it knows to metadata.json. The guest's exit code."""
    from runners.backends.vm.boot import VmError, plan_vm, run_in_vm
    from runners.errors import Terminated

    guest = [sys.executable, "-m", "runners.cli", str(run_dir / "scenario.yaml"),
             "--backend", "native", "--run-dir", str(run_dir), "--no-report",
             "--scenario-file", str(Path(exp.file).resolve()), *_guest_flags(args), *more_flags]
    # --modules belongs to the kernels given by path (a kernel from /boot has its own in /lib/modules)
    modules = Path(args.modules) if args.modules and (label is None or is_kernel_path(label)) else None
    try:
        plan = plan_vm(guest, [run_dir], kernel=kernel, memory=args.vm_memory, cpus=args.vm_cpus,
                       requirement=requirement, modules=modules)
    except VmError as e:
        err(str(e))
        return EXIT_FAIL
    if args.capture_spec is not None and not plan.kvm:
        info("capture: under TCG every captured packet costs the emulated CPU; rates may come out lower")
    t0 = time.time()
    warm = _usable_warm_vm(plan, run_dir)
    try:
        if warm is not None:
            code = _submit_warm(warm, guest, quiet=args.quiet)
        else:
            code = run_in_vm(plan, log=info, silence=vm_silence_limit(exp), quiet=args.quiet)
    except VmError as e:
        err(str(e))
        _mark_stopped(run_dir, "failed", failure=str(e))
        err(f"{_runs_on_disk(run_dir)} finished run(s) kept in {run_dir} "
             f"(continue with: run-scenario --resume {run_dir})")
        return EXIT_FAIL
    except (KeyboardInterrupt, Terminated) as e:
        code, status = ((EXIT_TERMINATED, "terminated") if isinstance(e, Terminated)
                        else (EXIT_INTERRUPTED, "interrupted"))
        _mark_stopped(run_dir, status)
        err(f"{status}; finished runs are kept in {run_dir} (continue with: run-scenario --resume {run_dir})")
        return code
    if (run_dir / "metadata.json").exists() and code != EXIT_KERNEL_REFUSED:
        if warm is not None:
            plan = as_booted_by_warm_vm(plan, warm.state() or {})
        code = _host_metadata(run_dir, plan, warm is not None, time.time() - t0, label) or code
    return code


def as_booted_by_warm_vm(plan, state: dict):
    """The plan of the guest that really ran a warm job: its `vm up` chose the CPUs, memory and CPU
    model, not the job's own command line (a job's --vm-cpus does not resize a running guest)."""
    return dataclasses.replace(plan, cpus=state.get("cpus", plan.cpus), memory=state.get("memory", plan.memory),
                               cpu_model=state.get("cpu_model", plan.cpu_model))


def _host_metadata(run_dir: Path, plan, warm: bool, host_seconds: float, label: str | None) -> int | None:
    """What only the host knows, added to the guest's metadata.json: the VM, the boot's time, the tools.
    EXIT_FAIL when the guest found the results disk full (it said why)."""
    from runners.backends.vm.boot import kernel_release
    from runners.results.store import ResultStore
    from runners.runset.session import RESULTS_UNWRITABLE

    store = ResultStore(run_dir)
    store.metadata = json.loads((run_dir / "metadata.json").read_text())
    phases = dict(store.metadata.get("phases", {}))
    guest_seconds = store.metadata.get("process_seconds")
    if warm:
        phases["vm_boot_and_exit"] = 0.0
        phases["warm_vm_job_overhead"] = round(host_seconds - (guest_seconds or 0.0), 3)
    elif guest_seconds is not None:
        # initramfs, qemu, the guest kernel and its init, and the power-off: all but the guest's process
        phases["vm_boot_and_exit"] = round(host_seconds - guest_seconds, 3)
    if store.metadata.get("status") == RESULTS_UNWRITABLE:
        return EXIT_FAIL
    vm = {"kernel_image": str(plan.kernel), "kernel": kernel_release(plan.kernel), "modules": plan.modules,
          "accel": "kvm" if plan.kvm else "tcg", "accel_reason": plan.accel_reason, "cpus": plan.cpus,
          "cpu_model": plan.cpu_model,
          "memory": plan.memory, "warm": warm, "wall_seconds_with_boot": round(host_seconds, 2)}
    store.finish_metadata(backend="vm", vm=vm, host_kernel=platform.release(), phases=phases, **userland_metadata())
    if label is not None:
        record_kernel(run_dir, label, vm=vm, phases=phases)
    return None


def vm_silence_limit(exp) -> float:
    """Seconds a booted guest may print nothing before it is taken as wedged: the guest prints a line as
    each run starts and ends, so the longest run's time, thrice, plus a slow boot and build.
    TESTBED_VM_SILENCE_S sets it (the fault-injection tests use a short one)."""
    from runners.runset.session import run_seconds

    if os.environ.get("TESTBED_VM_SILENCE_S"):
        return float(os.environ["TESTBED_VM_SILENCE_S"])
    return 3 * max(run_seconds(p.scenario) for p in exp.points) + 300


def _mark_stopped(run_dir: Path, status: str, **more) -> None:
    """The guest was stopped before it could say how the set ended: the host says it."""
    from runners.results.store import ResultStore
    meta = run_dir / "metadata.json"
    store = ResultStore(run_dir)
    try:
        store.metadata = json.loads(meta.read_text()) if meta.exists() else {}
        store.finish_metadata(status=status, backend="vm", **more)
    except (OSError, ValueError):
        pass


def _usable_warm_vm(plan, run_dir: Path):
    """The warm VM, when one is up (or was, and is replaced) and can run this job; else None."""
    from runners.backends.vm import warm as warmvm
    from runners.backends.vm.boot import VmError

    vm = warmvm.for_kernel(plan.kernel)
    if vm is None:
        up = [v.state()["kernel"] for v in warmvm.running()]
        if up:
            info(f"warm VM: runs kernel {', '.join(up)}, this run needs {plan.kernel.name}: booting a VM for it")
        return None
    st = vm.state()
    if not vm.shares(run_dir):
        print(f"warm VM: does not share {run_dir} (it shares {', '.join(st['rwdirs'])}; see `run-scenario vm up "
              "--share`): booting a VM for this run", flush=True)
        return None
    problem = vm.problem()
    if problem is not None:
        kept = warmvm.keep_console(vm) if "gone" in problem or "wedged" in problem else None
        info(f"warm VM: {problem}; replacing it" + (f" (its console is kept in {kept})" if kept else ""))
        warmvm.stop(vm, log=lambda m: None)
        try:
            warmvm.up(vm, warmvm.plan_warm(Path(st["kernel_image"]), st["memory"], st["cpus"], vm,
                                           [Path(d) for d in st["rwdirs"] if Path(d) != vm.spool],
                                           Path(st["modules"]) if st.get("modules") else None))
        except VmError as e:
            info(f"warm VM: could not replace it ({e}): booting a VM for this run")
            return None
    return vm


class _QuietGuest:
    """-q with a warm VM: the job's errors and warnings on the console, every line in run.log."""

    def __init__(self):
        self.partial = ""

    def write(self, text: str) -> None:
        from runners.backends.vm.boot import loud
        from runners.console.runlog import RUN_LOG

        *lines, self.partial = (self.partial + text).split("\n")
        for line in lines:
            if loud(line):
                print(line, flush=True)
            else:
                RUN_LOG.note(line)

    def flush(self) -> None:
        pass


def _submit_warm(vm, guest_argv: list[str], quiet: bool = False) -> int:
    from runners.backends.vm.warm import WarmVmGone, submit

    info("warm VM: running the job without a boot")
    try:
        # drop `python -m runners.cli`: the guest calls its main()
        return submit(vm, guest_argv[3:], out=_QuietGuest() if quiet else None)
    except WarmVmGone as e:
        err(str(e))
        return EXIT_FAIL


def _vm_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run-scenario vm", description="A warm VM: a guest kept running (one per "
                                "kernel), so that runs with the vm backend start without a boot.")
    p.add_argument("action", choices=["up", "status", "down"])
    p.add_argument("--kernel", metavar="KERNEL", help="up: the kernel to boot, a release prefix (6.12) or an image's "
                   "path (default: as for --backend vm); one warm VM per kernel may be up. down: only this "
                   "kernel's (default: every warm VM)")
    p.add_argument("--modules", metavar="DIR", help="up: the modules of a kernel given by path (as for a run)")
    p.add_argument("--vm-memory", default="2G", metavar="SIZE", help="guest memory (default: 2G)")
    p.add_argument("--vm-cpus", type=int, metavar="N", help="guest CPUs (default: host CPUs, at most 4)")
    p.add_argument("--share", action="append", default=[], metavar="DIR",
                   help="another results folder the guest may write (default: results/ of this checkout)")
    return p


def _cmd_vm(argv: list[str]) -> int:
    p = _vm_parser()
    a = p.parse_args(argv)
    from runners.backends.vm import warm as warmvm
    from runners.backends.vm.boot import VmError

    from runners.backends.vm.boot import choose_kernel

    try:
        image = choose_kernel(a.kernel, None) if a.action == "up" or a.kernel else None
    except VmError as e:
        err(str(e))
        return EXIT_FAIL
    if a.action == "status":
        vms = warmvm.running() or [warmvm.default()]
        oks = []
        for vm in vms:
            ok, lines = warmvm.status_lines(vm)
            print("\n".join(lines))
            oks.append(ok)
        return EXIT_OK if all(oks) else EXIT_FAIL
    if a.action == "down":   # every warm VM, or the one of --kernel
        vms = [warmvm.for_kernel(image)] if image is not None else warmvm.running()
        if not [vm for vm in vms if vm is not None and warmvm.stop(vm)]:
            print("warm VM: none was running" + (f" kernel {image.name}" if image is not None else ""))
        return EXIT_OK
    shares = [warmvm.RESULTS, *(Path(d).resolve() for d in a.share)]
    for d in shares:
        d.mkdir(parents=True, exist_ok=True)
    vm = warmvm.slot_for(image)
    vm.home.mkdir(parents=True, exist_ok=True)
    try:
        warmvm.up(vm, warmvm.plan_warm(image, a.vm_memory, a.vm_cpus, vm, shares,
                                       Path(a.modules) if a.modules else None))
    except VmError as e:
        err(str(e))
        return EXIT_FAIL
    return EXIT_OK


def _report_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run-scenario report",
                                description="Regenerate stats, plots, verdicts and JUnit from saved results "
                                            "(nothing is re-run).")
    p.add_argument("dir", help="a result set folder (results/<scenario>/<stamp>)")
    p.add_argument("--baseline", metavar="DIR", help="flag significant regressions against this result set")
    p.add_argument("--svg", action="store_true", help="write every figure as SVG too (default: PNG only)")
    p.add_argument("--junit", metavar="PATH", help="also write the JUnit XML here (for a CI system)")
    return p


def _cmd_report(argv: list[str]) -> int:
    p = _report_parser()
    a = p.parse_args(argv)
    d = Path(a.dir)
    if not (d / "results.json").exists():
        err(f"{d}: no results.json here")
        return EXIT_INPUT
    from runners.results.store import load_results
    doc = load_results(d)
    print(summary(doc["runs"], doc.get("metadata")))
    return _report(d, Path(a.baseline) if a.baseline else None, svg=a.svg, junit=Path(a.junit) if a.junit else None)


def _merge_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run-scenario merge",
                                description="Combine result sets of the same scenario (e.g. --shard runs) into one.")
    p.add_argument("dirs", nargs="+", metavar="DIR")
    p.add_argument("--out", default=str(RESULTS), metavar="DIR", help="base folder for the merged set")
    return p


def _cmd_merge(argv: list[str]) -> int:
    p = _merge_parser()
    a = p.parse_args(argv)
    from runners.results.merge import MergeError, merge
    try:
        merged = merge([Path(d) for d in a.dirs], Path(a.out).resolve())
    except MergeError as e:
        err(str(e))
        return EXIT_INPUT
    print(f"merged {len(a.dirs)} result sets into {merged}")
    from runners.results.store import load_results
    print(summary(load_results(merged)["runs"]))
    return _report(merged, None)


def _compare_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run-scenario compare",
                                description="Several result sets side by side: a table of means with 95 % "
                                            "intervals, and with --by an overlay figure (nothing is re-run).")
    p.add_argument("dirs", nargs="+", metavar="DIR", help="result set folders (results/<scenario>/<stamp>)")
    p.add_argument("--metric", default="throughput_mbps", help="a run metric (default: throughput_mbps; "
                                                               "e.g. seconds, ofo_mptcp, efficiency)")
    p.add_argument("--by", metavar="PARAM", help="a swept key for the x axis, e.g. traffic.bytes")
    p.add_argument("--out", metavar="DIR", help="where the figure goes (default: the current folder)")
    p.add_argument("--svg", action="store_true", help="write the figure as SVG too")
    return p


def _cmd_compare(argv: list[str]) -> int:
    p = _compare_parser()
    a = p.parse_args(argv)
    from runners.analysis.compare import CompareError, compare_rows, load_sets, overlay_figure, render_table
    try:
        rows = compare_rows(load_sets([Path(d) for d in a.dirs]), a.metric)
        print(render_table(rows, a.metric), flush=True)
        if a.by:
            from runners.analysis.plots import _safe, _save
            fig = overlay_figure(rows, a.metric, a.by)
            written = _save(fig, Path(a.out or "."), f"compare-{a.metric}-vs-{_safe(a.by)}",
                            ("png", "svg") if a.svg else ("png",))
            print("figure: " + ", ".join(str(w) for w in written))
    except CompareError as e:
        err(str(e))
        return EXIT_INPUT
    return EXIT_OK


def _clean_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run-scenario clean",
                                description="List what runs left behind on this machine (Mininet hosts and "
                                            "links, OVS bridges, iperf3, a controller, micro-VMs of cold boots, "
                                            "their temporary folders) and, with --yes, remove it. Exit 0 when "
                                            "the machine is clean. Run it when no run is going: it stops those "
                                            "too. After a SIGKILLed run, --resume runs it first: it removes what "
                                            "names the set's folder (its micro-VM, its temporary folder), lists "
                                            "the rest, and natively does not start while anything is listed.")
    p.add_argument("--yes", action="store_true", help="remove what is listed")
    return p


def _cmd_clean(argv: list[str]) -> int:
    p = _clean_parser()
    a = p.parse_args(argv)
    from runners.linux.leftovers import find_leftovers, remove_leftovers
    if os.geteuid() != 0:
        err("clean needs root (what runs leave behind belongs to root)")
        return EXIT_FAIL
    found = remove_leftovers() if a.yes else find_leftovers()
    for line in found:
        print(("removed: " if a.yes else "left behind: ") + line)
    if not found:
        print("clean: nothing left behind")
        return EXIT_OK
    if not a.yes:
        print("clean: run `run-scenario clean --yes` to remove these")
        return EXIT_FAIL
    rest = find_leftovers()
    for line in rest:
        print("still there: " + line)
    return EXIT_OK if not rest else EXIT_FAIL


def _capture_spec(args, parser):
    """--capture and --snaplen, checked (a usage error, exit 2, before anything starts)."""
    from runners.collect.capture import DEFAULT_SNAPLEN, CaptureSpec, parse_roles

    if args.capture is None:
        if args.snaplen is not None:
            parser.error("--snaplen needs --capture")
        return None
    if args.capture.endswith((".yaml", ".yml")):
        # `--capture scenario.yaml`: the optional value swallowed the scenario
        args.scenario.insert(0, args.capture)
        args.capture = "client,server"
    try:
        roles = parse_roles(args.capture)
    except ValueError as e:
        parser.error(str(e))
    snaplen = DEFAULT_SNAPLEN if args.snaplen is None else args.snaplen
    if not 64 <= snaplen <= 65535:
        parser.error(f"--snaplen must be between 64 and 65535 bytes (got {snaplen})")
    return CaptureSpec(roles, snaplen)


def _check_files(args) -> int:
    """--check: validate every file given; exit 2 when any is refused."""
    from scenarios.spec.loader import ScenarioError, load_experiment

    bad = 0
    for f in args.scenario:
        try:
            exp = select_variants(load_experiment(f, kernel_sweep(args)), args.variant)
            check_plans(exp)
            note = needs_consent(exp, args, quiet=True)
            print(f"{f}: ok ({size_of(exp, args.repeat)})" + (f"; to run it: {note}" if note else ""), flush=True)
        except ScenarioError as e:
            print(e.render(), file=sys.stderr)
            bad += 1
    return EXIT_INPUT if bad else EXIT_OK


def _estimate_backend(requested: str, exp) -> tuple[str, str | None]:
    """(the backend a run would use, with 'warm vm' when one is up; why auto chose the VM)."""
    from runners.backends import choose_backend
    from runners.backends.vm import warm as warmvm

    choice = choose_backend(requested, [pt.scenario for pt in exp.points])
    if choice.name == "vm" and warmvm.running():
        return "warm vm", choice.auto_note
    return choice.name, choice.auto_note


def _costs_for(exp, backend: str, out: Path):
    """The per-phase costs the newest finished set of this scenario measured on this backend, else defaults."""
    from runners.runset.estimate import DEFAULTS, measured_costs

    meta_path = out / exp.scenario.name / "latest" / "metadata.json"
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError):
        meta = {}
    same = (meta.get("backend") == "native") == (backend == "native") and meta.get("status") == "ok"
    warm = bool((meta.get("vm") or {}).get("warm"))
    if same and (backend == "native" or warm == (backend == "warm vm")):
        costs = measured_costs(meta, f"results/{exp.scenario.name}/latest")
        if costs is not None:
            return costs
    return DEFAULTS[backend]


def _dry_run(args, exp) -> int:
    from scenarios.spec.sweep import shard_points

    from runners.runset.estimate import render_table

    if args.shard:   # the table of what this command would run: its shard's points only
        exp = dataclasses.replace(exp, points=shard_points(exp.points, _parse_shard(args.shard)))
    backend, _ = _estimate_backend(args.backend, exp)
    print(f"{args.scenario[0]}: {exp.scenario.name} (dry run: nothing is started"
          + (f"; shard {args.shard}: {len(exp.points)} point(s))" if args.shard else ")"))
    print(render_table(exp, args.repeat, _costs_for(exp, backend, Path(args.out).resolve()), backend))
    note = needs_consent(exp, args, quiet=True)
    if note:
        print(f"to run it: {note}")
    return EXIT_OK


def _point_arguments(p) -> None:
    """FILE, --point, --variant and --primary: one point of a scenario (shell, export)."""
    p.add_argument("scenario", metavar="FILE")
    p.add_argument("--point", metavar="ID", help="which point of a sweep or variant (p001, p002...; default p001)")
    p.add_argument("--variant", action="append", metavar="NAME", help="as for a run")
    p.add_argument("--primary", metavar="PATH", help="the MPTCP primary path (default: the first)")


def _load_one_point(p, a):
    """(experiment, point, primary) from _point_arguments' values, or None after printing why not."""
    from scenarios.spec.loader import ScenarioError, load_experiment

    try:
        exp = select_variants(as_if_from(load_experiment(a.scenario), getattr(a, "scenario_file", None)), a.variant)
        check_plans(exp)
    except ScenarioError as e:
        print(e.render(), file=sys.stderr)
        return None
    return (exp, *_pick_point(p, exp, a.point, a.primary))


def _pick_point(p, exp, point_id: str | None, primary: str | None):
    """The point and primary asked for (a usage error naming what there is)."""
    points = {pt.id: pt for pt in exp.points}
    point = points.get(point_id or exp.points[0].id)
    if point is None:
        p.error(f"--point {point_id}: this scenario's points are {', '.join(points)}")
    if primary is not None and primary not in point.scenario.primaries:
        p.error(f"--primary {primary}: this point's primary paths are {', '.join(point.scenario.primaries)}")
    return point, primary or point.scenario.primaries[0]


def _shell_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run-scenario shell", description="Build a scenario's network, shape and "
                                "verify it, configure MPTCP as a run would, print its paths, and open Mininet's CLI "
                                "with the testbed's commands: paths, subflows, endpoints, counters, traffic "
                                "(`testbed` lists them). Leaving it (exit, Ctrl-D) cleans up as a run does.")
    _point_arguments(p)
    p.add_argument("--backend", choices=["auto", "native", "vm"], default="auto")
    p.add_argument("--out", default=str(RESULTS), metavar="DIR",
                   help="where `traffic` stores its runs: a result set like a run's, in DIR/<scenario>/shell/<UTC "
                        "time>, apart from the run sets (DIR/<scenario>/latest does not move)")
    p.add_argument("--run-dir", help=argparse.SUPPRESS)    # the VM's guest: the host made the folder
    p.add_argument("--scenario-file", help=argparse.SUPPRESS)   # the VM's guest: see as_if_from
    return p


def _cmd_shell(argv: list[str]) -> int:
    p = _shell_parser()
    a = p.parse_args(argv)
    chosen = _load_one_point(p, a)
    if chosen is None:
        return EXIT_INPUT
    exp, point, primary = chosen
    from runners.backends import choose_backend

    elsewhere = native_refusal([point], platform.release(), kernel_base(exp)) if point.kernel else None
    if elsewhere and a.backend == "native":
        err(elsewhere)
        return EXIT_INPUT
    choice = choose_backend("vm" if elsewhere else a.backend, [point.scenario])
    if choice.refusal:
        err(choice.refusal)
        return EXIT_FAIL
    if choice.name == "vm":
        from runners.backends.vm.shell import shell_in_vm
        return shell_in_vm(a, exp, point)
    return _shell_here(a, exp, point, primary, choice.probe)


def _shell_here(a, exp, point, primary: str, probe_report) -> int:
    from runners.pipeline.runner import NativeRunner
    from runners.errors import RunFailure, Terminated
    from runners.pipeline.shell import SHELL_HELP, make_cli, open_session, path_table

    store = open_session(a.out, exp.scenario.name, getattr(a, "run_dir", None))
    run_dir = store.dir
    store.write_scenario(exp.text)
    store.set_metadata(scenario=exp.scenario.name, backend="native", shell=True, point=point.id, primary=primary,
                       **native_metadata(probe_report.facts))
    runner = NativeRunner(store, probe_report, log=print, base_dir=Path(exp.file).resolve().parent)
    try:
        with runner:
            runner.prepare(point)
            if "mptcp" in point.scenario.runs.compare:
                runner.mptcp.apply_endpoints(point.scenario, runner.plan, primary)
            print(f"{exp.scenario.name}, point {point.id} ({point.label}), primary path {primary}; "
                  f"runs from `traffic` go to {run_dir}")
            print(path_table(runner.plan, point.scenario))
            print(SHELL_HELP)
            make_cli(runner, point, primary)(runner.network.mininet)
    except RunFailure as e:
        err(str(e))
        return EXIT_FAIL
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Terminated:
        return EXIT_TERMINATED
    return EXIT_OK


def _export_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run-scenario export", description="Print one point of a scenario as a "
                                "standalone Python script of plain Mininet, tc, ip mptcp and sysctl commands: the "
                                "same network, shaping and MPTCP settings, ending in Mininet's CLI.")
    _point_arguments(p)
    return p


def _cmd_export(argv: list[str]) -> int:
    from runners.cli.export import export_script

    p = _export_parser()
    a = p.parse_args(argv)
    chosen = _load_one_point(p, a)
    if chosen is None:
        return EXIT_INPUT
    exp, point, primary = chosen
    print(export_script(point, a.scenario, primary), end="")
    return EXIT_OK


def _list_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run-scenario list", description="One line per scenario file in DIR: name, "
                                "number of runs, estimated time on the backend `auto` would choose, description.")
    p.add_argument("dir", nargs="?", default=str(REPO / "scenarios"), metavar="DIR")
    p.add_argument("--backend", choices=["auto", "native", "vm"], default="auto")
    return p


def _cmd_list(argv: list[str]) -> int:
    from scenarios.spec.loader import ScenarioError, load_experiment
    from runners.runset.estimate import duration, job_table

    p = _list_parser()
    a = p.parse_args(argv)
    files = sorted(Path(a.dir).glob("*.yaml")) + sorted(Path(a.dir).glob("*.yml"))
    if not Path(a.dir).is_dir() or not files:
        err(f"{a.dir}: no scenario files (*.yaml) there")
        return EXIT_INPUT
    rows, backend, bad = [], None, 0
    for f in files:
        try:
            exp = load_experiment(f)
        except ScenarioError as e:
            rows.append((f.name, "-", "-", "invalid: " + e.render().splitlines()[-1].strip()[:80]))
            bad += 1
            continue
        if backend is None:
            backend, _ = _estimate_backend(a.backend, exp)
        jobs, _, seconds = job_table(exp, None, _costs_for(exp, backend, RESULTS))
        desc = " ".join((exp.scenario.description or "").split())
        rows.append((f.name, str(sum(r.runs for r in jobs)), duration(seconds), desc[:70] + ("..." if len(desc) > 70 else "")))
    widths = [max(len(r[i]) for r in rows + [("file", "runs", "time", "")]) for i in range(3)]
    print("  ".join(h.ljust(w) for h, w in zip(("file", "runs", "time"), widths)) + "  description")
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r[:3], widths)) + "  " + r[3])
    print(f"times: estimated for the {backend or a.backend} backend (see --dry-run for one scenario's table)")
    return EXIT_INPUT if bad else EXIT_OK


def _subcommands() -> dict:
    return {"report": _cmd_report, "merge": _cmd_merge, "compare": _cmd_compare, "vm": _cmd_vm,
            "clean": _cmd_clean, "list": _cmd_list, "export": _cmd_export, "shell": _cmd_shell}


def _subcommand_parsers() -> dict:
    return {"report": _report_parser, "merge": _merge_parser, "compare": _compare_parser, "vm": _vm_parser,
            "clean": _clean_parser, "list": _list_parser, "export": _export_parser, "shell": _shell_parser}


def parse_command_line(argv: list[str]) -> tuple[str, argparse.Namespace]:
    """(subcommand or "run", its arguments) as run-scenario would read them, starting nothing; a bad
    command line exits 2 with argparse's message. The lab handouts' test checks their commands with it."""
    if argv and argv[0] in SUBCOMMANDS:
        return argv[0], _subcommand_parsers()[argv[0]]().parse_args(argv[1:])
    return "run", build_parser().parse_args(argv)


def process_age() -> float:
    """Seconds since this process started (interpreter start-up and imports included)."""
    try:
        start_ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        terminal_gone()
        return EXIT_FAIL


def _main(argv: list[str] | None = None) -> int:
    started_at, age = time.monotonic(), process_age()
    argv = list(sys.argv[1:] if argv is None else argv)
    sub = SUBCOMMANDS.get(argv[0]) if argv else None
    if sub is not None:
        return sub(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    args.started_at, args.process_age, args.argv = started_at, age, argv
    output.QUIET = args.quiet
    from scenarios.spec.loader import ScenarioError, load_experiment
    from scenarios.spec.model import json_schema

    if args.schema:
        print(json.dumps(json_schema(), indent=2))
        return EXIT_OK
    if args.repeat is not None and not 1 <= args.repeat <= 1000:
        parser.error("--repeat must be between 1 and 1000")
    try:
        _parse_shard(args.shard)
    except argparse.ArgumentTypeError as e:
        parser.error(str(e))
    args.capture_spec = _capture_spec(args, parser)
    if args.resume:
        _point_at_the_resumed_set(args, parser)
    _check_kernel_arguments(args, parser)
    if not args.scenario:
        parser.error("a scenario file is required (see --help)")
    if args.check:
        return _check_files(args)
    if len(args.scenario) > 1:
        parser.error("give one scenario file to run (several only with --check)")
    try:
        exp = as_if_from(load_experiment(args.scenario[0], kernel_sweep(args)), args.scenario_file)
        exp = select_variants(exp, args.variant)
        check_plans(exp)
    except ScenarioError as e:
        print(e.render(), file=sys.stderr)
        return EXIT_INPUT
    if args.dry_run:
        return _dry_run(args, exp)
    refusal = needs_consent(exp, args) or bad_folders(args)
    if refusal:
        print(f"{args.scenario[0]}: {refusal}", file=sys.stderr)
        return EXIT_INPUT

    from runners.backends import choose_backend
    from runners.results.store import new_run_dir, point_latest

    scenario = exp.scenario
    if _other_kernels_refused(args, exp):
        return EXIT_INPUT
    choice = choose_backend(args.backend, [pt.scenario for pt in exp.points])
    if choice.refusal and args.only_kernel:   # the VM's guest of one kernel: the host goes on with the others
        record_kernel(Path(args.run_dir), args.only_kernel, release=platform.release(), refused=choice.refusal)
        err(f"kernel {args.only_kernel}: {choice.refusal}")
        return EXIT_KERNEL_REFUSED
    if choice.refusal:
        err(choice.refusal)
        return EXIT_FAIL
    if choice.auto_note:
        info(choice.auto_note)
    blocked = _before_anything_starts(args, exp, choice.name)
    if blocked:
        err(blocked)
        return EXIT_FAIL
    run_dir = Path(args.run_dir) if args.run_dir else new_run_dir(Path(args.out).resolve(), scenario.name)
    try:
        if choice.name == "native":
            return _run_native(args, exp, run_dir, choice.probe)
        return _run_vm(args, exp, run_dir)
    finally:
        _close_logs()
        point_latest(run_dir.parent)   # a booted VM's guest could not: it sees only the set's folder
        hand_over(run_dir)


def _other_kernels_refused(args, exp) -> bool:
    """A kernel sweep over kernels other than the running one: refused natively (True: exit 2); auto
    takes the VM backend for it."""
    if args.only_kernel is not None:   # the guest the host booted for that kernel: the host chose it
        return False
    elsewhere = native_refusal(exp.points, platform.release(), kernel_base(exp)) if sweeps_kernels(exp) else None
    if elsewhere and args.backend == "native":
        print(f"{args.scenario[0]}: {elsewhere}", file=sys.stderr)
        return True
    if elsewhere and args.backend == "auto":
        info("auto: the scenario runs on several kernels: using the vm backend")
        args.backend = "vm"
    return False


def _close_logs() -> None:
    from runners.linux.commandlog import COMMANDS
    from runners.console.runlog import RUN_LOG

    COMMANDS.close()
    RUN_LOG.stop()


def hand_over(run_dir: Path, env=os.environ) -> None:
    """`sudo run-scenario`: the result set, its `latest` link and its scenario folder belong to the user
    who ran sudo (SUDO_UID, SUDO_GID), not to root."""
    if os.geteuid() != 0 or not env.get("SUDO_UID", "").isdigit() or not env.get("SUDO_GID", "").isdigit():
        return
    uid, gid = int(env["SUDO_UID"]), int(env["SUDO_GID"])
    targets = [run_dir.parent, run_dir.parent / "latest", run_dir]
    for root, dirs, files in os.walk(run_dir):
        targets += [Path(root) / n for n in dirs + files]
    for t in targets:
        try:
            os.lchown(t, uid, gid)
        except OSError:
            pass


SUBCOMMANDS = _subcommands()
