"""Debian 12's root as setup.sh left it, kept between runs of the fresh-machine test (tests/fresh).

setup.sh takes about 190 s of the Debian 12 root's 300 s, and what it does there depends only on its
setup files (gate.SETUP_FILES) and on what Debian's mirror and PyPI serve. So after a full run (setup.sh
on debootstrap's minimal root) has passed, the root as it stood right after setup.sh is kept as a tarball
in the fresh-machine cache, with a stamp beside it: the setup files' hash, the date and the release. A
later run whose setup files hash the same, within MAX_AGE_DAYS of that date, starts from it instead: the
checkout in it is replaced by this one, as a new checkout of the same setup files would be on a user's
machine, and the README's first command runs as written, setup.sh first (its fast path), then the
scenario. A run that finds no such root, or one too old or set up by other setup files, is a full run,
and TESTBED_FRESH_ALL=1 (gate.FORCE) makes every run one. (chroot.py's rule, that an installed system is
not reused, holds for every full run: what a reuse gives up is setup.sh on a minimal root, proven with
the same setup files at most MAX_AGE_DAYS before.)
"""
from __future__ import annotations

import calendar
import json
import os
import shutil
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

from tests.fresh import chroot, gate

# The releases whose set-up root is kept. Debian 13's runs only when its setup files changed (gate.py),
# when a kept root could not be used anyway.
KEPT = {"bookworm"}
# Debian's mirror (point releases, security updates) and PyPI (new releases of unpinned dependencies)
# move under an unchanged setup.sh: a week after its full run, the root is set up anew from the minimal one.
MAX_AGE_DAYS = 7
DATE_FORMAT = "%Y-%m-%d %H:%M:%S UTC"


def tarball_path(cache: Path, suite: str) -> Path:
    return cache / f"{suite}-set-up.tar"


def stamp_path(cache: Path, suite: str) -> Path:
    return cache / f"{suite}-set-up.json"


def staged_path(cache: Path, suite: str) -> Path:
    """Where a full run writes the root it set up, until the run has passed (then promote() moves it)."""
    return cache / f"{suite}-set-up.tar.staged"


def read_stamp(cache: Path, suite: str) -> dict:
    """The kept root's stamp, {} when there is none or it is unreadable (then the run is a full one)."""
    try:
        stamp = json.loads(stamp_path(cache, suite).read_text())
    except (OSError, ValueError):
        return {}
    return stamp if isinstance(stamp, dict) else {}


def age_days(stamp: dict, now: float) -> float | None:
    """Days since the stamp's root was set up; None when its date is missing or unreadable."""
    try:
        then = calendar.timegm(time.strptime(stamp["set_up"], DATE_FORMAT))
    except (KeyError, TypeError, ValueError):
        return None
    return (now - then) / 86400


def decide(suite: str, repo: Path, cache: Path, env=os.environ, now: float | None = None) -> tuple[Path | None, str]:
    """(the kept root's tarball to start from, or None for a full run from the minimal root; why, for the log)."""
    release = gate.RELEASES[suite]
    if suite not in KEPT:
        kept = ", ".join(gate.RELEASES[s] for s in sorted(KEPT))
        return None, f"{release}: full run: only {kept}'s set-up root is kept"
    if env.get(gate.FORCE) == "1":
        return None, f"{release}: full run: {gate.FORCE}=1"
    stamp, tarball = read_stamp(cache, suite), tarball_path(cache, suite)
    if not stamp.get("hash") or not tarball.is_file():
        return None, f"{release}: full run: no set-up root kept on this machine ({tarball})"
    if stamp.get("release") != suite or stamp.get("bytes") != tarball.stat().st_size:
        return None, f"{release}: full run: the stamp {stamp_path(cache, suite)} does not describe {tarball}"
    if stamp["hash"] != gate.setup_hash(repo):
        return None, (f"{release}: full run: {', '.join(gate.changed_files(stamp, repo))} changed since setup.sh "
                      f"set up the kept root on {stamp.get('set_up', '?')}")
    age = age_days(stamp, time.time() if now is None else now)
    if age is None or age < 0:
        return None, f"{release}: full run: the kept root's date ({stamp.get('set_up')!r}) is unreadable or to come"
    if age > MAX_AGE_DAYS:
        return None, (f"{release}: full run: the kept root was set up on {stamp['set_up']}, {age:.1f} days ago "
                      f"(more than {MAX_AGE_DAYS}: Debian's mirror and PyPI have moved since)")
    return tarball, (f"{release}: root set up by setup.sh on {stamp['set_up']} reused (setup files unchanged): "
                     f"the scenario and unit suite run on this checkout")


def make_stamp(suite: str, tested: Path, set_up: float, tarball: Path) -> dict:
    """The stamp of a root set up at `set_up` (epoch seconds) from the setup files in `tested` (the copy that
    ran), kept as `tarball` (its size, so that a tarball that is not the one stamped is not used)."""
    return {"release": suite, "hash": gate.setup_hash(tested), "file_hashes": gate.file_hashes(tested),
            "set_up": time.strftime(DATE_FORMAT, time.gmtime(set_up)), "bytes": tarball.stat().st_size}


def promote(staged: Path, stamp: dict, cache: Path, suite: str) -> Path:
    """Make the staged root the kept one (only after the run passed). The old stamp goes first and the new one
    comes last, so that whatever interrupts this leaves either a matching pair or no stamp (a full run)."""
    stamp_path(cache, suite).unlink(missing_ok=True)
    os.replace(staged, tarball_path(cache, suite))
    tmp = stamp_path(cache, suite).with_suffix(".tmp")
    tmp.write_text(json.dumps(stamp, indent=1) + "\n")
    os.replace(tmp, stamp_path(cache, suite))
    return tarball_path(cache, suite)


def snapshot(root: Path, out: Path) -> None:
    """Write `root` as it is on disk to the tar `out` (through a temporary name), leaving out what is mounted
    in it (/proc, /sys, /dev, the host's download caches): tar reads it through a bind mount of the root
    alone, in a mount namespace of its own that ends with tar, so that the host's mount table never holds
    it. Owners by number: the root's system users need not have the host's numbers."""
    view = root.parent / "snapshot-view"
    view.mkdir()
    tmp = out.with_name(out.name + ".tmp")
    try:
        subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                        'mount --bind "$1" "$2" && exec tar --numeric-owner -C "$2" -cf "$3" .',
                        "sh", str(root), str(view), str(tmp)], check=True, timeout=900)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
        view.rmdir()


def remove_tracked(dest: Path) -> None:
    """Remove the files git tracks in the checkout `dest`, the folders they leave empty and its .git, keeping
    what setup.sh made there (.venv, byte code, the editable install's egg-info): what an old checkout's
    set-up folder keeps when a new checkout (a pull) replaces its files. copy_checkout() then copies this
    checkout in and commits it to a new repository, as for a full run."""
    names = subprocess.run(["git", "-C", str(dest), "ls-files", "-z"], capture_output=True, check=True,
                           timeout=120).stdout.split(b"\0")
    folders = set()
    for name in filter(None, (n.decode() for n in names)):
        (dest / name).unlink(missing_ok=True)
        folders.update((dest / name).parents)
    for folder in sorted((f for f in folders if f.is_relative_to(dest) and f != dest), key=lambda f: -len(f.parts)):
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    shutil.rmtree(dest / ".git")


@contextmanager
def unpacking(tarball: Path | None):
    """While open, Chroot unpacks `tarball` instead of debootstrap's minimal root (None: the minimal root).
    Chroot takes its tarball from chroot.base_tarball(); it is replaced here rather than given a parameter
    there because tests/fresh/chroot.py is part of the Vagrant test's key (tests/vagrant), which a change
    to it would run again."""
    if tarball is None:
        yield
        return
    minimal = chroot.base_tarball
    chroot.base_tarball = lambda suite: tarball
    try:
        yield
    finally:
        chroot.base_tarball = minimal
