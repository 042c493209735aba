"""The VM backend's contract between the host and its guest: a job file, and the command that names it.

The host writes the guest's job into the result folder (`guest-job.json`: JSON, written to a temporary
file and renamed) and the guest runs

    python -m runners.cli <run_dir>/scenario.yaml --guest-job <run_dir>/guest-job.json

The job is the run's RunOptions (runners.runset.options) as the guest must see them: every field but those
in HOST_ONLY, so that a new run option reaches the guest unless it is declared host-only here
(tests/unit/test_guest_job.py checks both). Among them are the guest's own, which the host sets:

  run_dir        the result folder the host made (the guest writes into it)
  scenario_file  the file the scenario was copied from (runners.runset.checks.as_if_from)
  no_report      the host writes the summary and report, once, after the guest
  no_run_log     the host keeps run.log (it sees the boot too)
  vm_guest       metadata.json keeps the user's command line, not the guest's (runners.results.metadata)
  only_kernel    a kernel sweep: only this kernel's points (runners.backends.vm.kernel_sets)
  only_points    of those, only these (--until-conclusive rounds across kernels)

The guest rebuilds its RunOptions from the job (`read_job`). A job file that is missing, unreadable, of
another version, or with a key missing, unknown or of the wrong type is bad input (exit 2), named."""
from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

from runners.runset.options import RunOptions

JOB_VERSION = 1
JOB_FILE = "guest-job.json"

# The run options the guest does not get from the host, and what the guest's run has instead.
HOST_ONLY = {
    "scenario": None,       # the set's copy: the guest's command line names it
    "out": None,            # the guest writes into run_dir
    "backend": "native",    # the guest runs natively
    "resume": None,         # the host resumed the set; the guest adds to run_dir
    "modules": None, "vm_memory": None, "vm_cpus": None,    # the VM's: the host boots it
    "svg": False, "no_plots": False, "junit": None,         # the report: the host writes it (no_report)
    "quiet": False,         # the host shows the guest's errors only and keeps every line in run.log
    "pause_after": None,    # native backend only: refused with the VM's
    "keep_vm": None,        # the host's warm VM; none is booted inside the guest
    # the host compares the plan with its calibration before the guest starts, and ends the set with exit 1
    # on unfaithful runs after it (summary_and_report); a guest's exit 1 would read as a kernel's runs failed
    "strict_fidelity": False,
    "argv": None, "started_at": None, "process_age": None,  # the guest's own process
}


class GuestJobError(ValueError):
    """The guest's job file cannot be used; the message names the file and what is wrong."""


def passed_on() -> list[str]:
    """The RunOptions fields a job carries: all but HOST_ONLY."""
    return [f.name for f in dataclasses.fields(RunOptions) if f.name not in HOST_ONLY]


def job_of(options: RunOptions, exp, run_dir: Path) -> dict:
    """The guest's job: `options` as the guest must see them (paths made absolute: the guest starts in the
    checkout), with the guest's own facts."""
    job = {name: getattr(options, name) for name in passed_on()}
    job.update(run_dir=str(Path(run_dir).resolve()), scenario_file=str(Path(exp.file).resolve()),
               no_report=True, no_run_log=True, vm_guest=True)
    if options.baseline:
        job["baseline"] = str(Path(options.baseline).resolve())
    if options.kernel:
        job["kernel"] = [str(Path(k).resolve()) if "/" in k else k for k in options.kernel]
    if options.capture_spec is not None:
        job["capture_spec"] = options.capture_spec.to_dict()
    return {"version": JOB_VERSION, **job}


def write_job(options: RunOptions, exp, run_dir: Path) -> Path:
    """The job written into the result folder, whole or not at all (the guest may read it any time after)."""
    path = Path(run_dir) / JOB_FILE
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(job_of(options, exp, run_dir), indent=1) + "\n")
    os.replace(tmp, path)
    return path


def guest_command(run_dir: Path, job: Path) -> list[str]:
    """What the guest runs: the set's copy of the scenario and its job file."""
    return [sys.executable, "-m", "runners.cli", str(Path(run_dir).resolve() / "scenario.yaml"),
            "--guest-job", str(Path(job).resolve())]


def read_job(path: Path, scenario: str, argv: list[str], started_at: float, process_age: float) -> RunOptions:
    """The guest's RunOptions: the job's fields, HOST_ONLY's guest values, this process's facts."""
    doc = _load(path)
    if doc.get("version") != JOB_VERSION:
        raise GuestJobError(f"guest job {path}: version {doc.get('version')!r}, this testbed reads version "
                            f"{JOB_VERSION} (were the host and the guest started from different code?)")
    keys = passed_on()
    for key in doc:
        if key != "version" and key not in keys:
            raise GuestJobError(f"guest job {path}: unknown key {key!r} (a job holds: version, {', '.join(keys)})")
    types = {f.name: f.type for f in dataclasses.fields(RunOptions)}
    values = {}
    for key in keys:
        if key not in doc:
            raise GuestJobError(f"guest job {path}: key {key!r} is missing")
        if not _is(doc[key], types[key]):
            raise GuestJobError(f"guest job {path}: key {key!r} is {json.dumps(doc[key])}, not {types[key]}")
        values[key] = doc[key]
    if not values["run_dir"] or not Path(values["run_dir"]).is_dir():
        raise GuestJobError(f"guest job {path}: key 'run_dir' is {values['run_dir']!r}, not a folder")
    values["capture_spec"] = _capture_spec(path, values["capture_spec"])
    return RunOptions(**{**HOST_ONLY, **values, "scenario": [scenario], "argv": list(argv),
                         "started_at": started_at, "process_age": process_age})


def _load(path: Path) -> dict:
    try:
        doc = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise GuestJobError(f"guest job {path}: no such file") from None
    except OSError as e:
        raise GuestJobError(f"guest job {path}: cannot read it ({e.strerror or e})") from None
    except ValueError as e:
        raise GuestJobError(f"guest job {path}: not JSON ({e})") from None
    if not isinstance(doc, dict):
        raise GuestJobError(f"guest job {path}: not a JSON object")
    return doc


def _is(value, annotation: str) -> bool:
    """Whether a JSON value fits a RunOptions field's annotation ('int | None', 'list[str]', ...). An
    annotation this does not know fits nothing: the round trip's test then fails for a new field's type."""
    fits = {"None": lambda v: v is None, "str": lambda v: isinstance(v, str), "bool": lambda v: isinstance(v, bool),
            "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
            "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
            "list[str]": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
            "object": lambda v: isinstance(v, dict)}   # capture_spec: checked by _capture_spec
    return any(fits.get(part.strip(), lambda v: False)(value) for part in annotation.split("|"))


def _capture_spec(path: Path, doc: dict | None):
    """capture_spec's CaptureSpec from its to_dict()."""
    from runners.collect.capture import CaptureSpec, parse_roles

    if doc is None:
        return None
    roles, snaplen = doc.get("roles"), doc.get("snaplen")
    if (set(doc) != {"roles", "snaplen"} or not isinstance(roles, list) or not isinstance(snaplen, int)
            or not all(isinstance(r, str) for r in roles)):
        raise GuestJobError(f"guest job {path}: key 'capture_spec' is {json.dumps(doc)}, not "
                            "{\"roles\": [...], \"snaplen\": N}")
    try:
        return CaptureSpec(parse_roles(",".join(roles)), snaplen)
    except ValueError as e:
        raise GuestJobError(f"guest job {path}: key 'capture_spec': {e}") from None
