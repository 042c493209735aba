"""RunOptions: what the user asked of a run set, built once from the command line and read below it.

The run command checks and completes its arguments first (a resumed set's options, --kernel made
absolute, --capture's roles); then the options are frozen and handed to the backend, which passes them
on to the run set, the VM's guest (its job file: runners.backends.vm.guest) and metadata.json. Nothing
below the CLI sees argparse."""
from __future__ import annotations

import argparse
from dataclasses import MISSING, dataclass, fields


@dataclass(frozen=True)
class RunOptions:
    scenario: list[str]
    out: str
    backend: str
    repeat: int | None
    kernel: list[str] | None
    modules: str | None
    vm_memory: str
    vm_cpus: int | None
    shard: str | None
    resume: str | None
    until_conclusive: bool
    max_repeat: int
    baseline: str | None
    allow_commands: bool
    variant: list[str] | None
    svg: bool
    no_plots: bool
    junit: str | None
    yes: bool
    capture_spec: object | None       # runners.collect.capture.CaptureSpec, from --capture and --snaplen
    verbose: bool
    quiet: bool
    pause_after: str | None
    keep_vm: str | None               # --keep-vm: a warm VM's idle time (runners.backends.vm.keep)
    strict_fidelity: bool             # a plan beyond the calibration refused; unfaithful runs: exit 1
    # the process: the command line as typed, and when it started (for metadata.json's phases)
    argv: list[str]
    started_at: float
    process_age: float
    # not on the command line: --resume sets the first two; the VM's guest gets them all from its job file
    # (runners.backends.vm.guest says what each is)
    run_dir: str | None = None
    scenario_file: str | None = None
    vm_guest: bool = False
    no_report: bool = False
    no_run_log: bool = False
    only_kernel: str | None = None
    only_points: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RunOptions:
        """The options of the parsed (and checked) command line; a field that is not an argument (and that
        --resume did not set) keeps its default."""
        return cls(**{f.name: getattr(args, f.name) for f in fields(cls)
                      if f.default is MISSING or hasattr(args, f.name)})
