"""Faults injected mid-run, on a real kernel: each ends with a clear message, the right exit code and
status, finished runs intact, and nothing left behind (the leftovers helper that `run-scenario clean`
uses). The VM-level faults (a wedged guest, Ctrl-C during the boot) are in tests/vmhost."""
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runners.runset.session import RESULTS_UNWRITABLE

from .helpers import REPO, ForkedCli, leftovers, run_cli, write_scenario

pytestmark = pytest.mark.integration

THREE_RUNS = """\
name: faults
topology:
  kind: dual-homed
  paths:
    - {name: A, bw: 10, delay: 5ms}
    - {name: B, bw: 10, delay: 5ms}
traffic: {duration: DURATION}
runs: {compare: [mptcp], repeat: 3, pause: 200ms}
"""
FINISHED = re.compile(r"run r\d{3}-mptcp-A: [\d.]+ Mbit/s")
STARTED = re.compile(r"run r\d{3}-\w+-\w+: \w+ with primary path")


class Run:
    """run-scenario whose output is read line by line as it comes: a real `python -m runners.cli` process
    for the tests of signals, else a fork of this process that imported the testbed once (ForkedCli)."""

    def __init__(self, *args: str, out: Path, real: bool = False):
        self.out = out
        args = (*args, "--backend", "native", "--out", str(out))
        self.p = subprocess.Popen([sys.executable, "-u", "-m", "runners.cli", *args], cwd=REPO,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) if real \
            else ForkedCli(*args)
        self.seen: list[str] = []

    def wait_for(self, pattern: re.Pattern | str, count: int = 1, within: float = 300) -> None:
        deadline = time.monotonic() + within
        hits = 0
        for line in self.p.stdout:
            self.seen.append(line)
            if (pattern.search(line) if isinstance(pattern, re.Pattern) else line.startswith(pattern)):
                hits += 1
                if hits == count:
                    return
            assert time.monotonic() < deadline, self.text
        raise AssertionError(f"ended before {pattern!r}:\n{self.text}")

    def finish(self, within: float = 180) -> int:
        rest, _ = self.p.communicate(timeout=within)
        self.seen.append(rest)
        return self.p.returncode

    @property
    def text(self) -> str:
        return "".join(self.seen)

    @property
    def result_dir(self) -> Path:
        return next(self.out.glob("*/2*"))

    def metadata(self) -> dict:
        return json.loads((self.result_dir / "metadata.json").read_text())

    def runs(self) -> list[dict]:
        return json.loads((self.result_dir / "results.json").read_text())["runs"]


def pkill(signal_name: str, *pattern: str) -> None:
    subprocess.run(["pkill", f"-{signal_name}", *pattern], check=True)


def test_iperf3_pair_killed_fails_that_run_with_the_signal(tmp_path):
    run = Run(str(write_scenario(tmp_path / "f.yaml", THREE_RUNS.replace("DURATION", "6"))), out=tmp_path / "o")
    run.wait_for(STARTED, count=2)      # the first run finished, the second is under way
    time.sleep(3)
    pkill("KILL", "-x", "iperf3")
    assert run.finish() == 1, run.text
    assert re.search(r"run r002-mptcp-A: the iperf3 (client|server) on h\d died \(killed by SIGKILL\)", run.text), \
        run.text
    assert "Traceback" not in run.text and "did not print JSON" not in run.text
    meta = run.metadata()
    assert meta["status"] == "failed" and "killed by SIGKILL" in meta["failure"]
    assert [r["id"] for r in run.runs()] == ["r001-mptcp-A"]                   # the finished run stays
    assert leftovers() == []


@pytest.mark.parametrize("delay", [0.0, 1.5], ids=["at-once", "mid-build"])
def test_sigterm_during_the_topology_build(tmp_path, delay):
    run = Run(str(write_scenario(tmp_path / "f.yaml", THREE_RUNS.replace("DURATION", "6"))), out=tmp_path / "o",
              real=True)
    run.wait_for("building topology")
    time.sleep(delay)
    run.p.send_signal(signal.SIGTERM)
    assert run.finish() == 143, run.text
    assert "Traceback" not in run.text and "AssertionError" not in run.text
    assert run.metadata()["status"] == "terminated"
    assert leftovers() == []


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MB file system of its own, for the results."""
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(disk)], check=True)
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path) -> Path:
    filler = disk / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * (1 << 20))
                f.flush()
        except OSError:
            pass
    return filler


def test_results_disk_full_mid_set_keeps_finished_runs_and_resumes(tmp_path, small_disk):
    run = Run(str(write_scenario(tmp_path / "f.yaml", THREE_RUNS.replace("DURATION", "3"))), out=small_disk / "o")
    run.wait_for(FINISHED)
    filler = fill(small_disk)
    assert run.finish() == 1, run.text
    assert "cannot write the results in" in run.text and "No space left on device" in run.text, run.text
    assert "Traceback" not in run.text
    kept = run.runs()                                     # results.json still parses: no half-written JSON
    assert 1 <= len(kept) < 3
    meta = run.metadata()
    assert meta["status"] == RESULTS_UNWRITABLE and "No space left on device" in meta["failure"]
    assert leftovers() == []

    filler.unlink()
    r = run_cli("--resume", str(run.result_dir), "--backend", "native", "--no-plots", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(run.runs()) == 3 and run.metadata()["status"] == "ok"
    assert leftovers() == []


def test_results_disk_turned_read_only_mid_set(tmp_path, small_disk):
    run = Run(str(write_scenario(tmp_path / "f.yaml", THREE_RUNS.replace("DURATION", "3"))), out=small_disk / "o")
    run.wait_for(FINISHED)
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    assert run.finish() == 1, run.text
    assert "Read-only file system" in run.text and "could not be written" in run.text, run.text
    assert "Traceback" not in run.text
    assert 1 <= len(run.runs()) < 3
    assert leftovers() == []
    subprocess.run(["mount", "-o", "remount,rw", str(small_disk)], check=True)
    r = run_cli("--resume", str(run.result_dir), "--backend", "native", "--no-plots", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(run.runs()) == 3


OVS = """\
name: ovs-killed
topology:
  kind: switched
  switches:
    - {name: s1, type: ovs}
  links:
    - {name: h1a, between: [h1, s1], bw: 10, delay: 2ms}
    - {name: h1b, between: [h1, s1], bw: 10, delay: 2ms}
    - {name: h2a, between: [h2, s1], bw: 10, delay: 2ms}
    - {name: h2b, between: [h2, s1], bw: 10, delay: 2ms}
  paths:
    - {name: A, client_if: 0, server_if: 0}
    - {name: B, client_if: 1, server_if: 1}
traffic: {duration: 10}
runs: {compare: [mptcp, tcp], pause: 0.2s}
"""


def test_ovs_killed_mid_run_fails_clearly_and_cleans_up(tmp_path):
    if subprocess.run(["pgrep", "-x", "ovs-vswitchd"], capture_output=True).returncode == 0:
        pytest.skip("Open vSwitch was running before the test: it belongs to this machine, not to the run")
    run = Run(str(write_scenario(tmp_path / "o.yaml", OVS)), out=tmp_path / "o")
    run.wait_for(STARTED)
    time.sleep(4)
    pkill("KILL", "-x", "ovs-vswitchd")
    code = run.finish()
    assert code == 1, run.text
    assert "Traceback" not in run.text
    assert "ovs-vswitchd is no longer running during run r001" in run.text, run.text
    assert "starting it again to take the switches down" in run.text
    assert run.metadata()["status"] == "failed"
    assert leftovers() == []
    # the daemons the run started itself: their logs kept with the results, the second ovs-vswitchd's too
    logs = run.result_dir / "openvswitch"
    assert (logs / "ovsdb-server.log").exists() and "ovs-vswitchd" in (logs / "ovs-vswitchd.log").read_text()
