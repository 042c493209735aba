"""A new user's first run, on a clean Debian 12 and a clean Debian 13: the README's first command, then
its second (the unit suite), in a fresh root of each release.

In each root (tests/fresh/chroot.py: debootstrap's minimal root, unpacked anew, this checkout copied
in), as root in a chroot with /proc, /sys and /dev, the README's first command runs as written except
for the backend, which is forced to the VM:

    ./setup.sh && .venv/bin/run-scenario scenarios/two-paths.yaml --backend vm

So a package that setup.sh forgets fails here, as it would for a new user, whatever the developers'
own machine has installed; so does an `ERROR:` line of pip's, or its deprecated editable install.
Then lab 5 (a switched scenario with the os-ken controller) runs where the root's os-ken is not the
CI machine's (SWITCHED_IN), and the unit suite. The host's mount table and links are read before and after:
nothing a root ran may stay. Debian 13 runs only when setup.sh, requirements*, pyproject.toml or
setup.py changed since its last pass on this machine (tests/fresh/gate.py). Needs root, debootstrap
and access to Debian's mirror (and PyPI), which setup.sh needs anyway.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest

from tests.fresh import gate
from tests.fresh.chroot import CACHE, REPO, Chroot, copy_checkout, host_state, left_behind, log

FIRST_COMMAND = "./setup.sh && .venv/bin/run-scenario scenarios/two-paths.yaml --backend vm"
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
    root = Path(tmp_path_factory.mktemp(f"fresh-{suite}")) / "root"
    root.mkdir()
    before = host_state()
    t0 = time.monotonic()
    with Chroot(root, suite) as chroot:
        dest = root / CHECKOUT.lstrip("/")
        dest.mkdir(parents=True)
        copy_checkout(dest)
        tested = root.parent / "setup-files"   # what this root ran, for the pass's stamp (the root goes on exit)
        tested.mkdir()
        for path in gate.setup_files(dest):
            shutil.copy(path, tested / path.name)
        log(f"{release}: fresh root unpacked and checkout copied in {time.monotonic() - t0:.0f} s; running: "
            f"{FIRST_COMMAND}")
        t1 = time.monotonic()
        first = chroot.run(FIRST_COMMAND, CHECKOUT, timeout=1200)
        log(f"{release}: first command exited {first.returncode} after {time.monotonic() - t1:.0f} s")
        assert first.returncode == 0, f"the README's first command failed on a fresh {release}:\n{first.stdout[-6000:]}"
        assert not pip_complaints(first.stdout), f"setup.sh on {release}:\n" + "\n".join(pip_complaints(first.stdout))
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
    assert not chroot.stray_mounts, f"{release}: mounts left under the root (undone): {chroot.stray_mounts}"
    left = left_behind(before, host_state())
    assert not left, f"{release}: the host has gained {left}"
    log(f"{release}: passed in {time.monotonic() - t0:.0f} s; the host's mount table and links are as before")
    if suite not in gate.EVERY_RUN:
        log(f"{release}: pass recorded in {gate.record_pass(suite, tested, CACHE)}")


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
