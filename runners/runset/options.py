"""RunOptions: what the user asked of a run set, built once from the command line and read below it.

The run command checks and completes its arguments first (a resumed set's options, --kernel made
absolute, --capture's roles); then the options are frozen and handed to the backend, which passes them
on to the run set, the VM's guest command and metadata.json. Nothing below the CLI sees argparse."""
from __future__ import annotations

import argparse
from dataclasses import dataclass, fields


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
    # the VM's guest only (runners.backends.vm.guest says what each is)
    run_dir: str | None
    scenario_file: str | None
    vm_guest: bool
    no_report: bool
    no_run_log: bool
    only_kernel: str | None
    only_points: str | None
    # the process: the command line as typed, and when it started (for metadata.json's phases)
    argv: list[str]
    started_at: float
    process_age: float

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RunOptions:
        return cls(**{f.name: getattr(args, f.name) for f in fields(cls)})
