"""A new user's first run, on a clean Debian 12 and a clean Debian 13: the README's first command, then
its second (the unit suite), in a fresh root of each release.

In each root (tests/fresh/chroot.py: a root unpacked anew from a tarball, this checkout copied in), as
root in a chroot with /proc, /sys and /dev, the README's first command runs as written except for the
backend, which is forced to the VM, as its two parts:

    ./setup.sh
    .venv/bin/run-scenario scenarios/two-paths.yaml --backend vm

(the second only when the first passed, as `&&` would). setup.sh failing fails the test, as does an
`ERROR:` line of pip's or its deprecated editable install. Then lab 5 (a switched scenario with the
os-ken controller) runs where the root's os-ken is not the CI machine's (SWITCHED_IN), and the unit
suite. The host's mount table and links are read before and after: nothing a root ran may stay.

Which root, and which releases run:
- Debian 12 runs every time. A full run starts from debootstrap's minimal root, so that a package that
  setup.sh forgets fails here, as it would for a new user, whatever the CI machine has installed; once
  it has passed, the root as it stood right after setup.sh (before the scenario) is kept in the cache
  with a stamp (tests/fresh/setup_root.py). A later run whose setup files (setup.sh, requirements*,
  pyproject.toml, setup.py) are those of the kept root, at most setup_root.MAX_AGE_DAYS (7) days after
  it was set up, starts from it instead: this checkout replaces the old one there (whose tracked files
  go and whose .venv stays, as a pull leaves them), and setup.sh (its fast path on a second run), the
  scenario and the unit suite run on it. Otherwise, or with TESTBED_FRESH_ALL=1, the run is a full one,
  and the log says why. A reuse that does not pass (Ctrl-C too) removes the kept root, so that the next
  run is a full one; a full run that cannot stage its root (the disk full) goes on without keeping it.
- Debian 13 runs only when those setup files changed since its last pass on this machine
  (tests/fresh/gate.py), always from the minimal root.

Needs root, debootstrap and access to Debian's mirror (and PyPI), which setup.sh needs anyway.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest

from tests.fresh import gate, setup_root
from tests.fresh.chroot import CACHE, REPO, Chroot, copy_checkout, host_state, left_behind, log

# The README's first command, `./setup.sh && .venv/bin/run-scenario scenarios/two-paths.yaml` (with the VM
# backend), run as its two parts: a full run keeps the root as it stood between them (setup_root.py).
SETUP = "./setup.sh"
SCENARIO = ".venv/bin/run-scenario scenarios/two-paths.yaml --backend vm"
UNIT_SUITE = ".venv/bin/python -m pytest tests/unit -q -p no:cacheprovider"
# A switched scenario with the os-ken controller (lab 5: OVS and the steering app), in the roots whose
# python3-os-ken CI does not run otherwise: the integration tests' guest sees the CI machine's own root,
# Debian 12's os-ken 2.5.0, every run; Debian 13's 3.0.1 (other oslo libraries) only here.
SWITCHED = ".venv/bin/run-scenario labs/lab5-steering.yaml --backend vm"
SWITCHED_IN = {"trixie"}
CHECKOUT = "/home/user/mptcp-testbed"

pytestmark = pytest.mark.fresh_machine


@pytest.fixture(params=list(gate.RELEASES))
def suite(request) -> str:
    runs, why = gate.decide(request.param, REPO, CACHE)
    log(why)
    if not runs:
        pytest.skip(why)
    if os.geteuid() != 0:
        pytest.fail("the fresh-machine test needs root (chroot, mounts); run the suite as root as CI does")
    if not shutil.which("debootstrap"):
        pytest.fail("debootstrap is not installed: ./setup.sh installs it")
    return request.param


def pip_complaints(output: str) -> list[str]:
    """pip's lines that a clean setup must not print: errors (a dependency conflict, as trixie's os-ken
    stack gave without tzdata, issue 32) and the editable install through setup.py that pip 25.3 drops."""
    return [line for line in output.splitlines()
            if line.startswith("ERROR:") or "Legacy editable install" in line or "setup.py develop" in line]


def test_readme_commands_on_a_fresh_debian(suite, tmp_path_factory):
    release = gate.RELEASES[suite]
    kept, why = setup_root.decide(suite, REPO, CACHE)
    log(why)
    root = Path(tmp_path_factory.mktemp(f"fresh-{suite}")) / "root"
    root.mkdir()
    staged = setup_root.staged_path(CACHE, suite) if kept is None and suite in setup_root.KEPT else None
    if staged:
        swept = setup_root.sweep_staged(CACHE, suite)
        if swept:
            log(f"{release}: removed what an interrupted full run left staged: {', '.join(map(str, swept))}")
    before = host_state()
    t0 = time.monotonic()
    try:
        with setup_root.forgotten_unless_passed(kept, CACHE, suite, release):
            with setup_root.unpacking(kept), Chroot(root, suite) as chroot:
                log(f"{release}: {'kept' if kept else 'minimal'} root unpacked in {time.monotonic() - t0:.0f} s")
                tested = checkout_in(root, kept)
                set_up = run_setup(chroot, release)
                if staged and not setup_root.stage(root, staged, release):
                    staged = None
                run_readme_rest(chroot, suite, root / CHECKOUT.lstrip("/"))
            assert not chroot.stray_mounts, f"{release}: mounts left under the root (undone): {chroot.stray_mounts}"
            left = left_behind(before, host_state())
            assert not left, f"{release}: the host has gained {left}"
        log(f"{release}: passed in {time.monotonic() - t0:.0f} s; the host's mount table and links are as before")
        if staged:
            stamp = setup_root.make_stamp(suite, tested, set_up, staged)
            log(f"{release}: the root as setup.sh left it is kept for later runs: "
                f"{setup_root.promote(staged, stamp, CACHE, suite)}")
        if suite not in gate.EVERY_RUN:
            log(f"{release}: pass recorded in {gate.record_pass(suite, tested, CACHE)}")
    finally:
        if staged:
            staged.unlink(missing_ok=True)   # a failed run's root is not kept


def checkout_in(root: Path, kept: Path | None) -> Path:
    """Copy this checkout into the root (over the kept root's old one, whose tracked files go and whose
    .venv and byte code stay, as on a user's machine after a pull); return a copy of its setup files, for
    the stamps of a pass (the root goes on exit)."""
    t0 = time.monotonic()
    dest = root / CHECKOUT.lstrip("/")
    if kept:
        # were this the minimal root (unpacking() no longer reaching Chroot) or a kept one without a set-up
        # checkout, setup.sh would run in full under a reuse's name
        assert (dest / ".venv/.testbed-installed").is_file(), f"{kept} holds no checkout set up by setup.sh"
        setup_root.remove_tracked(dest)
    dest.mkdir(parents=True, exist_ok=True)
    copy_checkout(dest)
    tested = root.parent / "setup-files"
    tested.mkdir()
    for path in gate.setup_files(dest):
        shutil.copy(path, tested / path.name)
    log(f"checkout copied in {time.monotonic() - t0:.0f} s")
    return tested


def run_setup(chroot: Chroot, release: str) -> float:
    """The README's first command's first part: setup.sh, which must pass without pip complaining; returns
    when it finished (epoch seconds). A full run then stages the root as setup.sh left it (before the
    scenario's VM boot, caches and results)."""
    log(f"{release}: running: {SETUP}")
    t0 = time.monotonic()
    setup = chroot.run(SETUP, CHECKOUT, timeout=1200)
    finished = time.time()
    log(f"{release}: {SETUP} exited {setup.returncode} after {time.monotonic() - t0:.0f} s: "
        f"{(setup.stdout.strip().splitlines() or ['(no output)'])[-1]}")
    assert setup.returncode == 0, f"setup.sh failed on a fresh {release}:\n{setup.stdout[-6000:]}"
    assert not pip_complaints(setup.stdout), f"setup.sh on {release}:\n" + "\n".join(pip_complaints(setup.stdout))
    return finished


def run_readme_rest(chroot: Chroot, suite: str, dest: Path) -> None:
    """The first command's second part (the scenario), lab 5 where SWITCHED_IN, and the unit suite."""
    release = gate.RELEASES[suite]
    t1 = time.monotonic()
    first = chroot.run(SCENARIO, CHECKOUT, timeout=900)
    log(f"{release}: {SCENARIO} exited {first.returncode} after {time.monotonic() - t1:.0f} s")
    assert first.returncode == 0, (f"the README's first command's scenario failed on a fresh {release}:\n"
                                   f"{first.stdout[-6000:]}")
    check_first_run(dest / "results/two-paths", release)
    if suite in SWITCHED_IN:
        t2 = time.monotonic()
        switched = chroot.run(SWITCHED, CHECKOUT, timeout=900)
        log(f"{release}: {SWITCHED} exited {switched.returncode} after {time.monotonic() - t2:.0f} s")
        assert switched.returncode == 0, f"lab 5 failed on a fresh {release}:\n{switched.stdout[-6000:]}"
        check_switched_run(dest / "results/lab5-steering", release)
    t3 = time.monotonic()
    unit = chroot.run(UNIT_SUITE, CHECKOUT, timeout=900)
    summary = (unit.stdout.strip().splitlines() or ["(no output)"])[-1]
    log(f"{release}: unit suite exited {unit.returncode} after {time.monotonic() - t3:.0f} s: {summary}")
    assert unit.returncode == 0, f"the unit suite failed on a fresh {release}:\n{failures(unit.stdout)}"


def check_first_run(results_dir: Path, release: str) -> None:
    results = sorted(results_dir.iterdir())[-1]
    doc = json.loads((results / "results.json").read_text())
    by_mode = {run["mode"]: run["metrics"]["throughput_mbps"] for run in doc["runs"]}
    assert by_mode["mptcp"] > 1.6 * by_mode["tcp"], by_mode
    meta = json.loads((results / "metadata.json").read_text())
    assert meta["backend"] == "vm" and meta["status"] == "ok", meta
    assert (results / "plots" / "box-throughput_mbps.png").exists()
    log(f"{release}: MPTCP {by_mode['mptcp']:.2f} vs TCP {by_mode['tcp']:.2f} Mbit/s on kernel "
        f"{meta['vm'].get('kernel')}; the scenario took {meta['vm']['wall_seconds_with_boot']:.0f} s with its VM boot")


def check_switched_run(results_dir: Path, release: str) -> None:
    """Both switches reached the controller, it steered flows, and lab 5's expectations held."""
    results = sorted(results_dir.iterdir())[-1]
    events = [json.loads(line) for line in (results / "controller" / "report.jsonl").read_text().splitlines()]
    connected = sorted(e["switch"] for e in events if e["event"] == "switch-connected")
    assert connected == ["s1", "s2"] and any(e["event"] == "flow" for e in events), events[:5]
    verdicts = {v["name"]: v["outcome"] for v in json.loads((results / "verdicts.json").read_text())}
    assert verdicts == {"two-subflows": "pass", "transfer-shortened": "pass"}, verdicts
    meta = json.loads((results / "metadata.json").read_text())
    log(f"{release}: lab 5 through os-ken: {verdicts} on kernel {meta['vm'].get('kernel')}, "
        f"{meta['vm']['wall_seconds_with_boot']:.0f} s with its VM boot")


def failures(output: str) -> str:
    """pytest's short summary (its FAILED/ERROR lines) and the output's tail."""
    short = [line for line in output.splitlines() if re.match(r"(FAILED|ERROR) ", line)]
    return "\n".join(short) + "\n...\n" + output[-6000:]
