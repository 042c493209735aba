"""Test plumbing: integration tests run natively where the kernel can, else in ONE micro-VM.

Tests marked `integration` need root, MPTCP and sch_netem. When this machine
cannot run them (the probe says why), every selected integration test is run
by a single pytest inside one virtme-ng boot, because TCG boots are slow; each
host-side test then reports its own outcome from the guest's JUnit XML, so
the host's summary still lists every test by name.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
IN_VM = os.environ.get("TESTBED_IN_VM") == "1"
# CI stops the whole job at 90 min: stop the VM before that, so the tests that did not finish are named
VM_TESTS_TIMEOUT = float(os.environ.get("TESTBED_VM_TESTS_TIMEOUT", 80 * 60))


def pytest_configure(config):
    config.addinivalue_line("markers", "integration: needs root and a kernel with MPTCP and netem "
                                       "(run in a micro-VM when this machine has neither)")
    config.addinivalue_line("markers", "vm_host: boots micro-VMs from the host to inject faults at the VM level "
                                       "(needs virtme-ng and qemu, which setup.sh installs)")
    config.addinivalue_line("markers", "fresh_machine: the README's first command in a clean Debian 12 root "
                                       "(debootstrap, chroot; needs root and Debian's mirror)")


def _native_problems() -> list[str]:
    from runners.backends.probe import probe
    from scenarios.spec.loader import load_scenario

    return probe(load_scenario(REPO / "scenarios" / "two-paths.yaml")).missing


class VmProxy:
    """Runs the selected integration tests in one VM boot and remembers each outcome."""

    def __init__(self, config, nodeids: list[str], why: list[str]):
        self.config = config
        self.nodeids = nodeids
        self.why = why
        self.outcomes: dict[str, tuple[str, str]] | None = None

    def _run(self) -> None:
        from runners.backends.vm import VmError, plan_vm, run_in_vm
        from runners.errors import Terminated

        workdir = Path(tempfile.mkdtemp(prefix="testbed-vm-tests-"))
        xml = workdir / "junit.xml"
        # per-test times as they finish and a durations table: CI's budget is the whole suite
        guest = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "-rA",
                 "-o", "console_output_style=times", "--durations=0", f"--junitxml={xml}", *self.nodeids]
        capman = self.config.pluginmanager.getplugin("capturemanager")
        with capman.global_and_fixture_disabled():
            print(f"\n== integration tests in a micro-VM (this machine: {'; '.join(self.why)}) ==", flush=True)
            try:
                code = run_in_vm(plan_vm(guest, [workdir]), timeout=VM_TESTS_TIMEOUT)
            except VmError as e:
                # a timeout: the tests that finished keep their outcome (pytest writes the XML at its end,
                # so usually none did); the others say why
                done = parse_junit(xml) if xml.exists() else {}
                self.outcomes = {n: done.get(n, ("failed", f"the micro-VM: {e}")) for n in self.nodeids}
                return
            except Terminated:
                # SIGTERM stopped the VM: the session ends here (the next test would boot another)
                self.outcomes = {n: ("failed", "SIGTERM: the micro-VM was stopped") for n in self.nodeids}
                pytest.exit("SIGTERM: the micro-VM was stopped", returncode=143)
            finally:
                self.outcomes_from = xml.read_bytes() if xml.exists() else None
                shutil.rmtree(workdir, ignore_errors=True)
            print(f"== micro-VM pytest exited {code} ==", flush=True)
        self.outcomes = parse_junit_text(self.outcomes_from) if self.outcomes_from else {}

    def outcome(self, nodeid: str) -> tuple[str, str]:
        if self.outcomes is None:
            self._run()
        return self.outcomes.get(nodeid, ("failed", "did not run in the micro-VM (see its output above)"))


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


def _proxied(item, proxy: VmProxy):
    def runtest():
        outcome, msg = proxy.outcome(item.nodeid)
        if outcome == "failed":
            pytest.fail(f"[in micro-VM] {msg}", pytrace=False)
        if outcome == "skipped":
            pytest.skip(f"[in micro-VM] {msg}")
    return runtest
