"""What a result set records of the command that made it, and what --resume takes back from it.

metadata.json keeps the user's command line as typed (`command_line` and
`argv`, with `cwd`, the folder it was typed in), never the VM guest's: the
guest's arguments are `guest_argv`. It keeps the run options the set was
started with (`run_options`: repeat, variant, until_conclusive, max_repeat),
and each resume's own command line (`resumes`). A resume continues with the
recorded options; one given again with another value is used, and said so,
except --variant: other variants' points would mix into the set, so that is
refused.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from runners.paths import IN_CHECKOUT, REPO

RUN_OPTIONS = ("repeat", "variant", "until_conclusive", "max_repeat")
DEFAULT_MAX_REPEAT = 10


def read_metadata_file(run_dir: Path) -> dict:
    """metadata.json as it is on disk (OSError or ValueError when it is missing or unreadable). Every reader of
    the file comes here; read_metadata is the set's view, results.json's copy included."""
    return json.loads((run_dir / "metadata.json").read_text())


def read_metadata(run_dir: Path) -> dict:
    """The set's metadata: metadata.json over results.json's copy. Every change is written to metadata.json
    first (the host adds the command line and a kernel's refusal before its guest starts); results.json's
    copy is as it was at the last run."""
    found: dict = {}
    for path, pick in ((run_dir / "results.json", lambda doc: doc.get("metadata")),
                       (run_dir / "metadata.json", lambda doc: doc)):
        try:
            part = pick(json.loads(path.read_text()))
        except (OSError, ValueError, AttributeError):
            continue
        found.update(part if isinstance(part, dict) else {})
    return found


def update_metadata(run_dir: Path, **kv) -> None:
    """Merge `kv` into the set's metadata.json as it is on disk (a fresh ResultStore would write only `kv`)."""
    from runners.results.store import ResultStore

    store = ResultStore(run_dir)
    store.metadata = read_metadata(run_dir)
    store.set_metadata(**kv)


def given_options(parser: argparse.ArgumentParser, argv: list[str]) -> set[str]:
    """The options typed on this command line (argparse fills in the others' defaults, which look the same)."""
    for action in parser._actions:
        action.default = argparse.SUPPRESS
    return set(vars(parser.parse_args(argv)))


def users_command(argv: list[str]) -> dict:
    """The command line the user typed: its arguments as given, and the program as started (`run-scenario`
    when main() was called otherwise: `python -m runners.cli`, a test)."""
    program = sys.argv[0] if sys.argv and Path(sys.argv[0]).name == "run-scenario" else "run-scenario"
    return {"command_line": shlex.join([program, *argv]), "argv": [program, *argv], "cwd": os.getcwd()}


def command_record(args, exp, metadata: dict) -> dict:
    """What metadata.json gets for this command. The VM's guest records only its own arguments (the host
    records the user's); a new set, the user's command line and its run options; a resume, its command
    line in `resumes` and the options it continued with."""
    if args.vm_guest:
        return {"guest_argv": list(args.argv)}
    options = {name: getattr(args, name) for name in RUN_OPTIONS}
    options["repeat"] = args.repeat or exp.scenario.runs.repeat
    options["until_conclusive"] = bool(args.until_conclusive)
    if not args.resume:
        return {**users_command(args.argv), "run_options": options}
    this = {**users_command(args.argv), "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    # the set runs again: how it ended before no longer holds (a SIGKILL now must leave no status)
    return {"run_options": options, "resumes": [*(metadata.get("resumes") or []), this], "status": None,
            "failure": None}


def _flag(name: str, value) -> str:
    """An option's value as it is typed."""
    if name == "variant":
        return " ".join(f"--variant {v}" for v in value) if value else "no --variant (every variant not optional)"
    if name == "until_conclusive":
        return "--until-conclusive" if value else "--no-until-conclusive"
    return f"--{name.replace('_', '-')} {value}"


def _same(name: str, a, b) -> bool:
    if name == "variant":
        return sorted(a or []) == sorted(b or [])
    return a == b


def resume_options(args, given: set[str], metadata: dict) -> tuple[list[str], str | None]:
    """Take the resumed set's run options into `args` where none was given: (what to say, why the resume
    is refused or None). A set recorded before `run_options` has its repeat (the one it ran with)."""
    started = dict(metadata.get("run_options") or {})
    if "repeat" not in started and metadata.get("repeat") is not None:
        started["repeat"] = metadata["repeat"]
    # what changes the runs is said: not a --max-repeat without --until-conclusive, nor an absent option
    worth_saying = {"repeat": True, "variant": bool(started.get("variant")),
                    "until_conclusive": bool(started.get("until_conclusive")),
                    "max_repeat": bool(started.get("until_conclusive"))}
    kept, notes = [], []
    for name in (n for n in RUN_OPTIONS if n in started):
        was = started[name]
        if name not in given:
            setattr(args, name, was)
            kept += [_flag(name, was)] if worth_saying[name] else []
        elif not _same(name, getattr(args, name), was):
            if name == "variant":
                return [], (f"the set was started with {_flag(name, was)}; {_flag(name, args.variant)} would "
                            "mix other points into it (start a new set for those)")
            notes.append(f"{_flag(name, getattr(args, name))} as given (the set was started with {_flag(name, was)})")
    return ([f"continuing as the set was started: {', '.join(kept)}"] if kept else []) + notes, None


def _git_revision() -> dict:
    if not IN_CHECKOUT:   # installed in site-packages: git would find whatever repository holds the venv
        return {"git_revision": None, "git_dirty": None}
    try:
        rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip() != ""
        return {"git_revision": rev or None, "git_dirty": dirty}
    except (OSError, subprocess.SubprocessError):
        return {"git_revision": None, "git_dirty": None}


def _tool_version(argv: list[str]) -> str | None:
    if not shutil.which(argv[0]):
        return None
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        return (r.stdout or r.stderr).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def native_metadata(probe_facts: dict, host_finishes: bool = False) -> dict:
    try:
        from mininet.net import VERSION as mn_version
    except ImportError:
        mn_version = None
    meta = {
        "backend_kernel": platform.release(),
        "kernel_version": platform.version(),
        "python": platform.python_version(),
        "mininet": mn_version,
        "iperf3_mptcp": "native --mptcp" if probe_facts.get("iperf3_native_mptcp") else "mptcpize run",
        "mptcpize": shutil.which("mptcpize"),
    }
    if not host_finishes:
        # a VM run's host adds these (same binaries and checkout, and no process start under TCG)
        meta.update(userland_metadata())
    return meta


@functools.cache   # once per process: `git status` over the guest's 9p took 4.3 s under TCG
def userland_metadata() -> dict:
    """Tool versions and the checkout's revision: the same for a native run and for the VM's guest."""
    return {"iperf3": _tool_version(["iperf3", "--version"]), "iproute2": _tool_version(["ip", "-V"]),
            **_git_revision()}
