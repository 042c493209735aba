"""Debian 12's root as setup.sh left it, kept between runs of the fresh-machine test (tests/fresh).

setup.sh takes about 190 s of the Debian 12 root's 300 s, and what it does there depends only on its
setup files (gate.SETUP_FILES) and on what Debian's mirror and PyPI serve. So after a full run (setup.sh
on debootstrap's minimal root) has passed, the root as it stood right after setup.sh is kept as a tarball
in the fresh-machine cache, with a stamp beside it: the setup files' hash, the date and the release. A
later run whose setup files hash the same, within MAX_AGE_DAYS of that date, starts from it instead: the
checkout in it is replaced by this one, as a new checkout of the same setup files would be on a user's
machine, and the README's first command runs as written, setup.sh first (its fast path), then the
scenario. A run that finds no such root, or one too old or set up by other setup files, is a full run,
and TESTBED_FRESH_ALL=1 (gate.FORCE) makes every run one. A reuse that fails, whatever the reason, removes
the kept root (forget()), so that the next run is a full one. This relaxes chroot.py's rule (reusing
downloads is fine, reusing an installed system is not) for Debian 12 between its full runs, to save most
of its time on every CI run: what a reuse gives up is setup.sh on a minimal root, which a full run proved
with the same setup files at most MAX_AGE_DAYS before; every full run keeps the rule.

The kept tarball is readable by root alone (0600) and leaves out the host's pip and apt configuration that
Chroot copies into every root (NOT_KEPT): a reuse copies them in again.
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


def staged_files(cache: Path, suite: str) -> list[Path]:
    """The staged root and snapshot()'s temporary file for it."""
    staged = staged_path(cache, suite)
    return [staged, snapshot_tmp(staged)]


def sweep_staged(cache: Path, suite: str) -> list[Path]:
    """Remove the staged files (2.6 GB) a full run killed before its cleanup (SIGKILL, a power cut) left;
    which were there. Only a full run of a KEPT release calls it, before it stages its own: a reuse, or
    another release's run, stages nothing and touches no staged file. The names are not per run because
    runs of this test do not overlap on a machine: CI (.ci/run) runs one pytest, whose fresh-machine cases
    run one after the other in its own process; two started at once by hand would share the rest of the
    cache (the minimal roots, the downloads, the kept root) too."""
    return remove_existing(staged_files(cache, suite))


def remove_existing(paths) -> list[Path]:
    """Remove each of `paths` that exists, in order; which were there."""
    found = [path for path in paths if path.exists()]
    for path in found:
        path.unlink(missing_ok=True)
    return found


def forget(cache: Path, suite: str) -> list[Path]:
    """Remove the kept root, its stamp first (a tarball without one is never used), after a reuse of it
    failed: the next run is then a full one, which runs setup.sh on the minimal root again. Which were there."""
    return remove_existing((stamp_path(cache, suite), tarball_path(cache, suite)))


@contextmanager
def forgotten_unless_passed(kept: Path | None, cache: Path, suite: str, release: str):
    """While open, a run on the kept root `kept` (None: a full run, nothing to do); whatever ends it with an
    exception (a failed assertion, Ctrl-C, a timeout) removes the kept root (forget()): the next run is a full
    one that proves setup.sh again, rather than every run reusing this root until it is MAX_AGE_DAYS old."""
    if kept is None:
        yield
        return
    try:
        yield
    except BaseException:
        gone = forget(cache, suite)
        chroot.log(f"{release}: the run on the reused root did not pass: the kept root is removed "
                   f"({', '.join(map(str, gone)) or 'already gone'}), so the next run is a full one")
        raise


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
    os.chmod(staged, 0o600)   # snapshot() made it so; whatever staged it, root alone reads the kept root
    os.replace(staged, tarball_path(cache, suite))
    tmp = stamp_path(cache, suite).with_suffix(".tmp")
    tmp.write_text(json.dumps(stamp, indent=1) + "\n")
    os.replace(tmp, stamp_path(cache, suite))
    return tarball_path(cache, suite)


# What Chroot._copy_network_trust (tests/fresh/chroot.py) copies from the host into every root that may hold
# credentials (an index URL with a token, a registry's auth): left out of the kept root, whose reuse copies
# them in again. Its other copies stay: resolv.conf, and certificate authorities (public certificates, no
# keys), which ca-certificates has also merged into the root's /etc/ssl/certs by then.
NOT_KEPT = ("etc/pip.conf", "etc/apt/apt.conf.d/99artifact-registry")
# snapshot()'s tar, given the root (mounted at "$2") and the tar to write ("$3"): the tar created 0600
# (umask), only those files left out (--anchored: ./etc/pip.conf, not a pip.conf deeper down). Owners by
# number: the root's system users need not have the host's numbers.
TAR = ('umask 077 && exec tar --numeric-owner --anchored '
       + " ".join(f"--exclude=./{name}" for name in NOT_KEPT) + ' -C "$2" -cf "$3" .')


def snapshot_tmp(out: Path) -> Path:
    return out.with_name(out.name + ".tmp")


def snapshot(root: Path, out: Path) -> None:
    """Write `root` as it is on disk to the tar `out` (through a temporary name; mode 0600, without NOT_KEPT),
    leaving out what is mounted in it (/proc, /sys, /dev, the host's download caches): tar reads it through a
    bind mount of the root alone, in a mount namespace of its own that ends with tar, so that the host's
    mount table never holds it."""
    view = root.parent / "snapshot-view"
    view.mkdir()
    tmp = snapshot_tmp(out)
    tmp.unlink(missing_ok=True)   # tar would keep an old file's mode
    try:
        subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                        'mount --bind "$1" "$2" && ' + TAR, "sh", str(root), str(view), str(tmp)],
                       check=True, timeout=900)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
        view.rmdir()


def stage(root: Path, staged: Path, release: str) -> bool:
    """snapshot() the root to `staged`; whether it was. Keeping the root only saves later runs time, so a
    failure here (the disk full, tar failing or timing out) is logged, its partial file removed, and the
    test goes on (a full run next time too)."""
    t0 = time.monotonic()
    try:
        snapshot(root, staged)
        size = staged.stat().st_size
    except (subprocess.SubprocessError, OSError) as e:
        staged.unlink(missing_ok=True)
        chroot.log(f"{release}: the root as setup.sh left it is not kept (staging it failed: {e}); the test goes on")
        return False
    chroot.log(f"{release}: root as setup.sh left it staged in {time.monotonic() - t0:.0f} s "
               f"({size / 1e9:.2f} GB; kept if the run passes)")
    return True


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
