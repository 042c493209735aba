"""The VM backend's contract between the host and its guest: the command the guest runs.

The guest runs `python -m runners.cli` with the scenario's copy in the result folder, the native backend,
the run options it must see too (`guest_flags`), and these hidden flags of the run parser (help=SUPPRESS),
which only the host gives:

  --run-dir DIR         the result folder the host made (the guest writes into it)
  --scenario-file FILE  the file the scenario was copied from (runners.runset.checks.as_if_from)
  --no-report           the host writes the summary and report, once, after the guest
  --no-run-log          the host keeps run.log (it sees the boot too)
  --vm-guest            metadata.json keeps the user's command line, not the guest's (results.metadata)
  --only-kernel LABEL   a kernel sweep: only this kernel's points (runners.backends.vm.kernel_sets)
  --only-points IDS     of those, only these (--until-conclusive rounds across kernels)

A run option the host takes that `guest_flags` does not pass on does not reach the guest's run:
PASSED_ON, HOST_ONLY and GUEST_ONLY say which is which."""
from __future__ import annotations

import sys
from pathlib import Path

# The run's options, by what becomes of each in a VM run (tests/unit/test_cli_commands.py checks that
# every option of the run's parser is in one of these, so that none is dropped unnoticed).
PASSED_ON = ("repeat", "shard", "baseline", "max_repeat", "variant", "until_conclusive", "allow_commands",
             "capture", "snaplen", "verbose", "yes")
HOST_ONLY = ("scenario", "out", "backend", "kernel", "modules", "vm_memory", "vm_cpus", "resume", "svg",
             "no_plots", "junit", "quiet", "pause_after", "check", "dry_run", "schema")
GUEST_ONLY = ("run_dir", "scenario_file", "no_report", "no_run_log", "vm_guest", "only_kernel", "only_points")


def guest_command(options, exp, run_dir: Path, more_flags=()) -> list[str]:
    """What the guest runs: the set's copy of the scenario, natively, into the host's folder."""
    return [sys.executable, "-m", "runners.cli", str(run_dir / "scenario.yaml"),
            "--backend", "native", "--run-dir", str(run_dir), "--no-report",
            "--scenario-file", str(Path(exp.file).resolve()), *guest_flags(options), *more_flags]


def guest_flags(options) -> list[str]:
    """The run options that the guest's native run must see too."""
    out = []
    for flag, value in (("--repeat", options.repeat), ("--shard", options.shard), ("--baseline", options.baseline),
                        ("--max-repeat", options.max_repeat if options.until_conclusive else None)):
        if value is not None:
            out += [flag, str(Path(value).resolve()) if flag == "--baseline" else str(value)]
    for v in options.variant or []:
        out += ["--variant", v]
    if options.until_conclusive:
        out.append("--until-conclusive")
    if options.allow_commands:
        out.append("--allow-commands")
    if options.capture_spec is not None:
        out += ["--capture", ",".join(options.capture_spec.roles), "--snaplen", str(options.capture_spec.snaplen)]
    # not --quiet: the host shows the guest's errors only, and keeps every line in run.log; the host
    # records the user's command line and options (--vm-guest)
    out += ["--no-run-log", "--vm-guest"] + (["--verbose"] if options.verbose else [])
    if options.yes:
        out.append("--yes")
    return out
