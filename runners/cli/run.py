"""`run-scenario FILE`: validate a scenario, choose where it runs, run its set, write its results.

The run command's parser and its checks before anything starts live here; the set itself is the chosen
backend's `run_set` (runners.backends). --check and --dry-run stop before a backend is chosen."""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import platform
import sys
import time
from pathlib import Path

from runners.backends import BACKENDS, probe_cache
from runners.backends.vm.kernel_sets import (kernel_base, kernel_sweep, kernels_here, missing_kernels_report, record_kernel,
    sweeps_kernels, vm_kernels_problem)
from runners.backends.vm.keep import keep_setting
from runners.backends.vm.kernels import native_refusal
from runners.cli import subcommand_listing
from runners.cli.common import costs_for, estimate_backend
from runners.console import output
from runners.console.output import err, info
from runners.errors import EXIT_FAIL, EXIT_INPUT, EXIT_KERNEL_REFUSED, EXIT_OK
from runners.paths import RESULTS
from runners.results.metadata import DEFAULT_MAX_REPEAT, read_metadata_file
from runners.runset.checks import (after_a_killed_run, as_if_from, bad_folders, check_plans, files_of,
    needs_consent, select_variants, size_of)
from runners.runset.jobs import parse_shard
from runners.runset.options import RunOptions


EPILOG = """\
backends:
  native  run on this kernel, as root. Needs MPTCP, sch_netem, Mininet and iperf3 (and
          Open vSwitch and os-ken for switches); a probe checks them all first and
          names whatever is missing.
  vm      boot a micro-VM (virtme-ng) with a distribution kernel from /boot (the newest
          non-backports one, or the newest meeting `requires.kernel`, or --kernel)
          and run the native backend inside it. Uses KVM when it can boot a stock
          kernel, else TCG emulation (slower: ~7 s to boot and power off, measured
          2026-11-27). The first such run leaves its guest up as a warm VM, which
          stops itself after 10 min without a job (--keep-vm; none with
          --keep-vm 0s, TESTBED_KEEP_VM=0, or when CI is set): the next runs, with
          any --out, go to it and do not boot. `run-scenario vm status` shows it,
          `run-scenario vm down` stops it.
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
""" + subcommand_listing() + """

calibration:
  --check, --dry-run and a run compare the plan (each point's path rates, their sum, its
  clients) with this machine's calibration for the backend and kernel it would use, and warn
  naming the paths and the limit when it is beyond; `run-scenario calibrate` measures it.

exit codes:
  0 ok; 1 failure while running (finished runs are kept), a failed verdict, or with
  --strict-fidelity an unfaithful run; 2 bad input or bad command line, or with
  --strict-fidelity a plan beyond the calibration (nothing was started); 130 Ctrl-C;
  143 SIGTERM or SIGHUP (a closed terminal); each cleans up first. 120: what it printed
  last could not all be written (a full disk under a redirection), as Python's own exit.

examples:
  run-scenario scenarios/two-paths.yaml
  run-scenario scenarios/e4-delay.yaml --repeat 3 --backend vm
  run-scenario scenarios/e4-primary-path.yaml --shard 1/4
  run-scenario --resume results/e4-primary-path/20261121T101500Z
  run-scenario scenarios/e5-exp3.yaml --variant paper-1g
  run-scenario scenarios/two-paths.yaml --kernel 6.1 --kernel 6.12 --repeat 3
  run-scenario scenarios/kernels.yaml
  run-scenario --check scenarios/*.yaml
  run-scenario calibrate --backend vm
  run-scenario scenarios/e5-exp3.yaml --strict-fidelity
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
    p.add_argument("--backend", choices=["auto", *BACKENDS], default="auto",
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
    p.add_argument("--vm-memory", default="2G", metavar="SIZE", help="vm backend: guest memory (default: 2G)")
    p.add_argument("--vm-cpus", type=int, metavar="N", help="vm backend: guest CPUs (default: host CPUs, at most 4)")
    p.add_argument("--keep-vm", metavar="DURATION",
                   help="vm backend: leave the guest up as a warm VM for the next runs until it has had no job "
                        "for DURATION (600s, 10min, 1h; default 10min; 0s: boot a VM for this run only, as "
                        "TESTBED_KEEP_VM=0 does; none is kept when CI is set unless asked here or there). A "
                        "warm VM already up is used either way")
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
                   "raw/<run>/subflows-pcap.csv (one row per subflow), written with the report after the runs. "
                   "Costs CPU, most under TCG")
    p.add_argument("--snaplen", type=int, default=None, metavar="BYTES",
                   help="bytes kept per captured packet (default 128: headers and MPTCP options; 64-65535)")
    talk = p.add_mutually_exclusive_group()
    talk.add_argument("-v", "--verbose", action="store_true",
                      help="print every command as it runs, e.g. `[h1] ip mptcp endpoint add 10.0.2.1 dev h1-eth1 "
                      "subflow` (every result set keeps them in commands.log anyway)")
    talk.add_argument("-q", "--quiet", action="store_true", help="print only errors and the final summary")
    p.add_argument("--pause-after", choices=["build", "shaping", "run"], metavar="build|shaping|run",
                   help="stop after the network is built, after it is shaped, or after each run, so you can look "
                   "around from another terminal (an nsenter line per host is printed); Enter continues, or "
                   "SIGUSR1 when not on a terminal. Native backend only")
    p.add_argument("--strict-fidelity", action="store_true",
                   help="refuse a plan beyond what `run-scenario calibrate` measured this machine reproduces "
                   "faithfully (exit 2, nothing started; without a calibration the plan is not compared), and end a "
                   "set in which a run was unfaithful with exit 1 naming those runs (the set runs to its end and "
                   "keeps their records)")
    p.add_argument("--check", action="store_true", help="only validate the scenario file(s) and exit (a swept "
                   "kernel this machine lacks is a warning saying how to add it; one given with --kernel: exit 2)")
    p.add_argument("--dry-run", action="store_true", help="print the job table (points, modes, primaries, "
                   "repetitions, the kernel each boots or `missing here`) and the estimated wall time on the chosen "
                   "backend, then exit; starts nothing")
    p.add_argument("--schema", action="store_true", help="print the scenario JSON Schema and exit")
    # the VM's guest: its run options are this job file's (runners.backends.vm.guest), the only other argument
    # the set's copy of the scenario
    p.add_argument("--guest-job", metavar="FILE", help=argparse.SUPPRESS)
    return p


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
    if args.resume:
        from runners.backends.vm.warm import take_back
        take_back(Path(args.resume), log=info)   # a killed run's job in a warm VM, first: it writes into the set
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
        shell = read_metadata_file(rdir).get("shell")
    except (OSError, ValueError):
        shell = False
    if shell:
        parser.error(f"--resume {rdir}: a `run-scenario shell` session's folder, not a run set: nothing to resume "
                     "(run the scenario for a set of its own)")
    args.scenario = [str(rdir / "scenario.yaml")]
    args.run_dir = str(rdir.resolve())   # the VM's guest starts in the checkout, and its job names it
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
            asked, report = missing_kernels_report(kernels_here(exp, args.kernel), args.kernel)
            if asked:
                print(f"{f}: --kernel {', '.join(asked)}: not on this machine", file=sys.stderr)
                print("\n".join(report), file=sys.stderr)
                bad += 1
                continue
            if _check_plan(exp, estimate_backend(args.backend, exp)[0], args.kernel, args.strict_fidelity, f) \
                    and args.strict_fidelity:
                bad += 1   # check_plan said why
                continue
            note = needs_consent(exp, args, quiet=True)
            print(f"{f}: ok ({size_of(exp, args.repeat)})" + (f"; to run it: {note}" if note else ""), flush=True)
            if report:   # the file is valid: another machine may have the kernel
                print("\n".join(f"warning: {line}" for line in report), file=sys.stderr, flush=True)
        except ScenarioError as e:
            print(e.render(), file=sys.stderr)
            bad += 1
    return EXIT_INPUT if bad else EXIT_OK


def _dry_run(args, exp) -> int:
    from scenarios.spec.sweep import shard_points

    from runners.runset.estimate import render_table

    if args.shard:   # the table of what this command would run: its shard's points only
        exp = dataclasses.replace(exp, points=shard_points(exp.points, parse_shard(args.shard)))
    backend, _ = estimate_backend(args.backend, exp)
    print(f"{args.scenario[0]}: {exp.scenario.name} (dry run: nothing is started"
          + (f"; shard {args.shard}: {len(exp.points)} point(s))" if args.shard else ")"))
    here = kernels_here(exp, args.kernel)
    print(render_table(exp, args.repeat, costs_for(exp, backend, Path(args.out).resolve()), backend,
                       capture=bool(args.capture), kernels_here=here))
    note = needs_consent(exp, args, quiet=True)
    if note:
        print(f"to run it: {note}")
    asked, report = missing_kernels_report(here, args.kernel)
    if report:
        print("\n".join(report))
    if asked:
        print(f"{args.scenario[0]}: --kernel {', '.join(asked)}: not on this machine", file=sys.stderr)
        return EXIT_INPUT
    if _check_plan(exp, backend, args.kernel, args.strict_fidelity, args.scenario[0]) and args.strict_fidelity:
        return EXIT_INPUT
    return EXIT_OK


def _check_plan(*args) -> bool:
    """runners.cli.plan_check's check_plan, imported when used: the VM's guest never uses it (its host
    compared the plan with the calibration), and every import costs tenths of a second in a TCG guest."""
    from runners.cli.plan_check import check_plan

    return check_plan(*args)


def process_age() -> float:
    """Seconds since this process started (interpreter start-up and imports included)."""
    try:
        start_ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def main(argv: list[str]) -> int:
    started_at, age = time.monotonic(), process_age()
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.guest_job is not None:
        return _run_guest_job(parser, args, argv, started_at, age)
    args.started_at, args.process_age, args.argv = started_at, age, argv
    args.run_dir = args.scenario_file = None   # a resumed set's (_point_at_the_resumed_set)
    output.QUIET = args.quiet
    if args.schema:
        from scenarios.spec.model import json_schema

        print(json.dumps(json_schema(), indent=2))
        return EXIT_OK
    _check_arguments(args, parser)
    if args.check:
        return _check_files(args)
    if len(args.scenario) > 1:
        parser.error("give one scenario file to run (several only with --check)")
    exp = _load(args)
    if exp is None:
        return EXIT_INPUT
    if args.dry_run:
        return _dry_run(args, exp)
    refusal = needs_consent(exp, args) or bad_folders(args)
    if refusal:
        print(f"{args.scenario[0]}: {refusal}", file=sys.stderr)
        return EXIT_INPUT
    if _other_kernels_refused(args, exp):
        return EXIT_INPUT
    return _run(RunOptions.from_args(args), exp)


def _run_guest_job(parser, args, argv: list[str], started_at: float, age: float) -> int:
    """The VM's guest: the set's copy of the scenario, run natively with the options of the host's job file
    into the host's result folder. A job file it cannot use is bad input (exit 2)."""
    from runners.backends.vm.guest import GuestJobError, read_job
    from runners.results.metadata import given_options

    other = sorted(given_options(build_parser(), argv) - {"scenario", "guest_job"})
    if other or len(args.scenario) != 1:
        parser.error("--guest-job FILE takes the scenario file and nothing else (the job holds the options)"
                     + (f"; also given: {', '.join('--' + o.replace('_', '-') for o in other)}" if other else ""))
    try:
        options = read_job(Path(args.guest_job), args.scenario[0], argv, started_at, age)
    except GuestJobError as e:
        err(str(e))
        return EXIT_INPUT
    output.QUIET = options.quiet
    exp = _load(options)
    if exp is None:
        return EXIT_INPUT
    refusal = needs_consent(exp, options) or bad_folders(options)
    if refusal:
        print(f"{options.scenario[0]}: {refusal}", file=sys.stderr)
        return EXIT_INPUT
    # a cold boot's host may hand over the probe's answers for this kernel, and keeps the ones asked here
    answers = Path(options.run_dir) / probe_cache.ANSWERS_FILE
    probe_cache.seed_from(answers)
    try:
        return _run(options, exp)
    finally:
        probe_cache.keep_new(answers)


def _check_arguments(args, parser) -> None:
    """The run's arguments, checked and completed (a usage error exits 2): --repeat, --keep-vm (and
    TESTBED_KEEP_VM), --shard, --capture, a resumed set's scenario and options, --kernel and --modules."""
    if args.repeat is not None and not 1 <= args.repeat <= 1000:
        parser.error("--repeat must be between 1 and 1000")
    try:
        keep_setting(args.keep_vm, os.environ)
    except ValueError as e:
        parser.error(str(e))
    try:
        parse_shard(args.shard)
    except argparse.ArgumentTypeError as e:
        parser.error(str(e))
    args.capture_spec = _capture_spec(args, parser)
    if args.resume:
        _point_at_the_resumed_set(args, parser)
    _check_kernel_arguments(args, parser)
    if not args.scenario:
        parser.error("a scenario file is required (see --help)")


def _load(args):
    """The experiment of the one scenario file, its variants selected and every point's plan checked;
    None after printing why it is refused."""
    from scenarios.spec.loader import ScenarioError, load_experiment

    try:
        exp = as_if_from(load_experiment(args.scenario[0], kernel_sweep(args), files_of(args.scenario_file)),
                         args.scenario_file)
        exp = select_variants(exp, args.variant)
        check_plans(exp)
    except ScenarioError as e:
        print(e.render(), file=sys.stderr)
        return None
    return exp


def _run(options: RunOptions, exp) -> int:
    """Choose the backend, check what would fail late, then run the set there (BACKENDS[name].run_set)."""
    from runners.backends.choice import choose_backend
    from runners.results.store import new_run_dir, point_latest

    choice = choose_backend(options.backend, [pt.scenario for pt in exp.points])
    if choice.refusal and options.only_kernel:   # the VM's guest of one kernel: the host goes on with the others
        record_kernel(Path(options.run_dir), options.only_kernel, release=platform.release(), refused=choice.refusal)
        err(f"kernel {options.only_kernel}: {choice.refusal}")
        return EXIT_KERNEL_REFUSED
    if choice.refusal:
        err(choice.refusal)
        return EXIT_FAIL
    if choice.auto_note:
        info(choice.auto_note)
    if not options.vm_guest and _check_plan(exp, choice.name, options.kernel, options.strict_fidelity,
                                           options.scenario[0]) and options.strict_fidelity:
        return EXIT_INPUT
    blocked = _before_anything_starts(options, exp, choice.name)
    if blocked:
        err(blocked)
        return EXIT_FAIL
    run_dir = Path(options.run_dir) if options.run_dir else new_run_dir(Path(options.out).resolve(), exp.scenario.name)
    try:
        return importlib.import_module(BACKENDS[choice.name]).run_set(options, exp, run_dir, choice.probe)
    finally:
        close_logs()
        if not options.vm_guest:   # a VM's host links it once its guest is done (a booted guest sees only the set)
            point_latest(run_dir.parent)
        hand_over(run_dir)


def _other_kernels_refused(args, exp) -> bool:
    """A kernel sweep over kernels other than the running one: refused natively (True: exit 2); auto
    takes the VM backend for it."""
    elsewhere = native_refusal(exp.points, platform.release(), kernel_base(exp)) if sweeps_kernels(exp) else None
    if elsewhere and args.backend == "native":
        print(f"{args.scenario[0]}: {elsewhere}", file=sys.stderr)
        return True
    if elsewhere and args.backend == "auto":
        info("auto: the scenario runs on several kernels: using the vm backend")
        args.backend = "vm"
    return False


def close_logs() -> None:
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
