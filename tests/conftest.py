"""Test plumbing: integration tests run natively where the kernel can, else in ONE micro-VM.

Tests marked `integration` need root, MPTCP and sch_netem. When this machine
cannot run them (the probe says why), the selected integration tests are split
into shards of about equal recorded time, and each shard is run by one pytest
inside its own virtme-ng boot, all boots side by side (TESTBED_VM_TESTS_SHARDS,
default 1: one boot for all); each host-side test then reports its own outcome from its guest's
JUnit XML, so the host's summary still lists every test by name.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests import failed_files

REPO = Path(__file__).resolve().parent.parent
# The first VM run of a session would leave its guest up as a warm VM (runners.backends.vm.keep): the
# suite boots cold, as CI does, and leaves none behind; a test that wants one asks with --keep-vm.
os.environ["TESTBED_KEEP_VM"] = "0"
IN_VM = os.environ.get("TESTBED_IN_VM") == "1"
# CI stops the whole job at 90 min: stop the VM before that, so the tests that did not finish are named
VM_TESTS_TIMEOUT = float(os.environ.get("TESTBED_VM_TESTS_TIMEOUT", 80 * 60))
# micro-VMs side by side, each with a share of the tests. One by default: on a 2-core machine under TCG
# two VMs kept both cores busy and made each test about 3x slower (capture 107 -> 322 s, 2026-11-24),
# and two tests failed on time. With two or more host cores per VM, side by side can pay.
VM_TESTS_SHARDS = int(os.environ.get("TESTBED_VM_TESTS_SHARDS", 1))
DURATIONS = REPO / "tests" / "integration" / "durations.json"


def pytest_configure(config):
    config.addinivalue_line("markers", "integration: needs root and a kernel with MPTCP and netem "
                                       "(run in a micro-VM when this machine has neither)")
    config.addinivalue_line("markers", "vm_host: boots micro-VMs from the host to inject faults at the VM level "
                                       "(needs virtme-ng and qemu, which setup.sh installs)")
    config.addinivalue_line("markers", "fresh_machine: the README's commands in a clean Debian 12 and 13 root "
                                       "(debootstrap, chroot; needs root and Debian's mirror)")
    config.addinivalue_line("markers", "vagrant: `vagrant up --provider libvirt` of the project's own box, in a "
                                       "network namespace of the test's (libvirt and vagrant-libvirt, which "
                                       "`setup.sh --vagrant` installs; needs root)")
    config.addinivalue_line("markers", "slurm: docs/ci.md's Slurm recipe on a one-node Slurm cluster started on "
                                       "this machine (munge and slurm-wlm, which setup.sh installs; needs root; "
                                       "its shards boot micro-VMs where the kernel lacks netem)")


def _native_problems() -> list[str]:
    from runners.backends.probe import probe
    from scenarios.spec.loader import load_scenario

    return probe(load_scenario(REPO / "scenarios" / "two-paths.yaml")).missing


class VmProxy:
    """Runs the selected integration tests in micro-VMs side by side (one boot per shard) and remembers
    each outcome."""

    def __init__(self, config, nodeids: list[str], why: list[str]):
        self.config = config
        self.nodeids = nodeids
        self.why = why
        self.outcomes: dict[str, tuple[str, str]] | None = None

    def _run(self) -> None:
        workdir = Path(tempfile.mkdtemp(prefix="testbed-vm-tests-"))
        parts = shards(self.nodeids, VM_TESTS_SHARDS)
        capman = self.config.pluginmanager.getplugin("capturemanager")
        with capman.global_and_fixture_disabled():
            print(f"\n== integration tests in {len(parts)} micro-VM(s) side by side, {', '.join(str(len(p)) for p in parts)} "
                  f"tests (this machine: {'; '.join(self.why)}) ==", flush=True)
            started = time.monotonic()
            try:
                codes, terminated = run_shards(parts, workdir)
                self.outcomes = {}
                for k, part in enumerate(parts, 1):
                    xml = workdir / f"vm{k}" / "junit.xml"
                    done = parse_junit(xml) if xml.exists() else {}
                    why = (f"did not finish in micro-VM {k} (exit {codes[k - 1]}; its output above is marked "
                           f"[vm{k}])")
                    self.outcomes.update({n: done.get(n, ("failed", why)) for n in part})
                    # pytest's own durations give all of it to the first test, which waited for the VMs
                    print(f"== micro-VM {k}: pytest exited {codes[k - 1]} after {time.monotonic() - started:.0f} s "
                          f"(per-test times are its [vm{k}] lines) ==", flush=True)
            finally:
                try:   # keeping them must not hide the tests' outcome
                    kept = failed_files.harvest([workdir / f"vm{k}" for k in range(1, len(parts) + 1)])
                    if kept is not None:
                        print(f"== the failed tests' files (their tmp_path in the micro-VM): {kept} ==", flush=True)
                except OSError as e:
                    print(f"== the failed tests' files could not be kept: {e} ==", flush=True)
                shutil.rmtree(workdir, ignore_errors=True)
        if terminated:
            # SIGTERM stopped the VMs: the session ends here (the next test would boot more)
            pytest.exit("SIGTERM: the micro-VMs were stopped", returncode=143)

    def outcome(self, nodeid: str) -> tuple[str, str]:
        if self.outcomes is None:
            self._run()
        return self.outcomes.get(nodeid, ("failed", "did not run in the micro-VM (see its output above)"))


def shards(nodeids: list[str], count: int) -> list[list[str]]:
    """`count` shards of about equal time: longest test first, each to the shard with the least time so far
    (the seconds tests/integration/durations.json recorded; 60 s for a test it lacks). File order within
    a shard."""
    known = json.loads(DURATIONS.read_text())["seconds"] if DURATIONS.exists() else {}
    bins: list[list[str]] = [[] for _ in range(max(1, count))]
    load = [0.0] * len(bins)
    for nodeid in sorted(nodeids, key=lambda n: -known.get(n, 60)):
        k = load.index(min(load))
        bins[k].append(nodeid)
        load[k] += known.get(nodeid, 60)
    order = {n: i for i, n in enumerate(nodeids)}
    return [sorted(b, key=order.__getitem__) for b in bins if b]


def vm_shard_argv(junit: Path, part: list[str]) -> list[str]:
    return [sys.executable, "-m", "tests.vm_shard", str(junit), str(VM_TESTS_TIMEOUT), *part]


def run_shards(parts: list[list[str]], workdir: Path, argv_of=vm_shard_argv) -> tuple[list[int], bool]:
    """Each shard's pytest in its own VM boot (tests/vm_shard.py), all at once, their output prefixed
    [vmK]; (exit codes, whether SIGTERM stopped them). SIGTERM and Ctrl-C reach every VM."""
    procs, pumps = [], []
    for k, part in enumerate(parts, 1):
        (workdir / f"vm{k}").mkdir()
        proc = subprocess.Popen(argv_of(workdir / f"vm{k}" / "junit.xml", part), cwd=REPO, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        pumps.append(threading.Thread(target=_forward_lines, args=(proc.stdout, f"[vm{k}] "), daemon=True))
        pumps[-1].start()
        procs.append(proc)
    terminated: list[int] = []

    def forward(signum, frame):
        terminated.append(signum)
        _signal_all(procs, signal.SIGTERM)
    old = signal.signal(signal.SIGTERM, forward)
    try:
        while any(p.poll() is None for p in procs):
            time.sleep(0.5)
    except KeyboardInterrupt:
        _signal_all(procs, signal.SIGINT)
        for p in procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
        raise
    finally:
        signal.signal(signal.SIGTERM, old)
    for t in pumps:
        t.join(timeout=5)
    for p, t in zip(procs, pumps):   # read to its end: closed here, not left to the garbage collector's warning
        if not t.is_alive():          # (one still reading, its pipe held by a straggler, is left as it was)
            p.stdout.close()
    return [p.returncode for p in procs], bool(terminated)


def _signal_all(procs: list, signum: int) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signum)


def _forward_lines(src, prefix: str) -> None:
    for line in iter(src.readline, b""):
        try:
            sys.stdout.write(prefix + line.decode(errors="replace"))
            sys.stdout.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass


def parse_junit(path: Path) -> dict[str, tuple[str, str]]:
    """JUnit XML -> {pytest nodeid: (passed|failed|skipped, message)}."""
    return parse_junit_text(path.read_bytes())


def parse_junit_text(xml: bytes) -> dict[str, tuple[str, str]]:
    out = {}
    for case in ET.fromstring(xml).iter("testcase"):
        mod, _, cls = case.get("classname", "").partition("::")
        parts = case.get("classname", "").split(".")
        # pytest writes classname 'tests.integration.test_x' (plus '.Class' for methods)
        file_parts, klass = parts, None
        if parts and parts[-1][:1].isupper():
            file_parts, klass = parts[:-1], parts[-1]
        nodeid = "/".join(file_parts) + ".py::" + (f"{klass}::" if klass else "") + case.get("name", "")
        outcome, msg = "passed", ""
        for tag in ("failure", "error"):
            el = case.find(tag)
            if el is not None:
                outcome, msg = "failed", (el.get("message", "") + "\n" + (el.text or "")).strip()
        el = case.find("skipped")
        if el is not None and outcome == "passed":
            outcome, msg = "skipped", el.get("message", "")
        out[nodeid] = (outcome, msg)
    return out


@pytest.hookimpl(trylast=True)   # after -k and -m deselected: only the selected tests go to the VM
def pytest_collection_modifyitems(session, config, items):
    integration = [it for it in items if it.get_closest_marker("integration")]
    if not integration or IN_VM:
        return
    problems = _native_problems()
    if not problems:
        return
    proxy = VmProxy(config, [it.nodeid for it in integration], problems)
    for it in integration:
        it.runtest = _proxied(it, proxy)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In the micro-VM: a failed test's tmp_path goes to the folder the host shares (beside the JUnit
    XML), which the host keeps (tests/failed_files.py)."""
    outcome = yield
    report = outcome.get_result()
    xml = getattr(item.config.option, "xmlpath", None)
    if IN_VM and xml and report.when == "call" and report.failed and "tmp_path" in getattr(item, "funcargs", {}):
        try:
            failed_files.keep(item.funcargs["tmp_path"], Path(xml).parent, item.nodeid)
        except OSError as e:   # keeping them must not hide the failure itself
            print(f"could not keep {item.nodeid}'s files: {e}", flush=True)


def _proxied(item, proxy: VmProxy):
    def runtest():
        outcome, msg = proxy.outcome(item.nodeid)
        if outcome == "failed":
            pytest.fail(f"[in micro-VM] {msg}", pytrace=False)
        if outcome == "skipped":
            pytest.skip(f"[in micro-VM] {msg}")
    return runtest


# The mount table's named network namespaces (and /run/netns itself) when the session started: a test
# that leaves one behind (a probe's `ip netns add` once left /run/netns bind-mounted, issue 32) fails the
# session, named, at its end.
MOUNTINFO = Path("/proc/self/mountinfo")
_netns_at_start: list[str] = []


def pytest_sessionstart(session):
    from runners.linux.netns import netns_mounts

    if IN_VM:   # the guest's mount table goes with the guest; the host's session checks the host's
        return

    _netns_at_start[:] = netns_mounts(MOUNTINFO)


def pytest_sessionfinish(session, exitstatus):
    from runners.linux.netns import netns_mounts

    if IN_VM:
        return

    gained = [m for m in netns_mounts(MOUNTINFO) if m not in _netns_at_start]
    if gained:
        print(f"\nthe tests left network-namespace mounts behind: {', '.join(gained)} (not there when the "
              "session started; /proc/self/mountinfo)", file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
