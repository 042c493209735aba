"""Which Debian releases the fresh-machine test builds a root for on this run.

Debian 12 (bookworm), the CI machine's own release, runs every time. Debian 13 (trixie) costs another
root, setup.sh and VM boot (minutes), and what it tests beyond bookworm is how setup.sh and the Python
packaging meet its packages: so it runs only when the files that decide that (SETUP_FILES) differ from
those of its last pass on this machine. A pass leaves a stamp in the fresh-machine cache: the hash of
those files. Nothing else writes it, so a failed or interrupted run is tried again next time.
TESTBED_FRESH_ALL=1 runs every release whatever the stamp says.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

RELEASES = {"bookworm": "Debian 12", "trixie": "Debian 13"}
EVERY_RUN = {"bookworm"}
SETUP_FILES = ("setup.sh", "requirements*", "pyproject.toml", "setup.py")
FORCE = "TESTBED_FRESH_ALL"


def setup_files(repo: Path, patterns=SETUP_FILES) -> list[Path]:
    """The checkout's files that decide what setup.sh installs (or `patterns`' files), sorted by path."""
    return sorted({p for pattern in patterns for p in repo.glob(pattern) if p.is_file()})


def setup_hash(repo: Path, patterns=SETUP_FILES) -> str:
    """sha256 over each setup file's name and contents (a file added or renamed changes it too)."""
    h = hashlib.sha256()
    for path in setup_files(repo, patterns):
        h.update(str(path.relative_to(repo)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def file_hashes(repo: Path, patterns=SETUP_FILES) -> dict[str, str]:
    """{each setup file's name: sha256 of its contents}, so that a run can say which of them changed."""
    return {str(p.relative_to(repo)): hashlib.sha256(p.read_bytes()).hexdigest() for p in setup_files(repo, patterns)}


def changed_files(stamp: dict, repo: Path, patterns=SETUP_FILES) -> list[str]:
    """The setup files that differ from the stamp's (added and removed ones too); all of them when the
    stamp does not name each file's hash."""
    then, now = stamp.get("file_hashes"), file_hashes(repo, patterns)
    if not isinstance(then, dict):
        return sorted(now)
    return sorted(name for name in set(then) | set(now) if then.get(name) != now.get(name))


def stamp_path(cache: Path, suite: str) -> Path:
    return cache / f"{suite}-passed.json"


def read_stamp(cache: Path, suite: str) -> dict:
    """The last pass's stamp, {} when there is none (or it is unreadable: then the release runs)."""
    try:
        stamp = json.loads(stamp_path(cache, suite).read_text())
    except (OSError, ValueError):
        return {}
    return stamp if isinstance(stamp, dict) else {}


def decide(suite: str, repo: Path, cache: Path, env=os.environ) -> tuple[bool, str]:
    """(whether release `suite` runs now, why: a sentence for the log or the skip)."""
    name = f"{RELEASES[suite]} ({suite})"
    if suite in EVERY_RUN:
        return True, f"{name} runs every time"
    return decide_on_files(name, suite, SETUP_FILES, repo, cache, env)


def decide_on_files(name: str, suite: str, patterns, repo: Path, cache: Path, env=os.environ) -> tuple[bool, str]:
    """(whether `suite` runs now: when `patterns`' files differ from those of its last pass here, why)."""
    if env.get(FORCE) == "1":
        return True, f"{name} runs: {FORCE}=1"
    stamp = read_stamp(cache, suite)
    files = ", ".join(str(p.relative_to(repo)) for p in setup_files(repo, patterns))
    if not stamp.get("hash"):
        return True, f"{name} runs: no pass recorded on this machine ({stamp_path(cache, suite)})"
    if stamp["hash"] != setup_hash(repo, patterns):
        return True, (f"{name} runs: {', '.join(changed_files(stamp, repo, patterns))} changed since its pass of "
                      f"{stamp.get('passed', '?')}")
    return False, (f"{name} skipped: {files} are as they were at its pass of {stamp.get('passed', '?')} on this "
                   f"machine (stamp {stamp_path(cache, suite)}); {FORCE}=1 runs it anyway")


def record_pass(suite: str, tested: Path, cache: Path, patterns=SETUP_FILES) -> Path:
    """Write `suite`'s stamp (only after a pass): the hash, names and date of the setup files in `tested`,
    the copy that ran (the checkout's own may have changed since)."""
    cache.mkdir(parents=True, exist_ok=True)
    path = stamp_path(cache, suite)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"hash": setup_hash(tested, patterns),
                               "files": [str(p.relative_to(tested)) for p in setup_files(tested, patterns)],
                               "file_hashes": file_hashes(tested, patterns),
                               "passed": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}, indent=1) + "\n")
    os.replace(tmp, path)
    return path
