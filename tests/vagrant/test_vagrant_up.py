"""`vagrant up` for real: the project's own box, brought up by vagrant-libvirt, then the README's Vagrant
command, whose run must use the native backend inside the VM and write its results on the host.

1. The box: vagrant/build-box.sh makes it from Debian 12's minimal root (the fresh-machine test's cached
   debootstrap tarball) with setup.sh already run. It is kept in the cache, keyed by the files it is made
   from (BOX_FILES), as a downloaded box would be.
2. A network namespace of the test's own, and in it a private mount namespace where libvirtd runs with
   folders of the test's (tests/vagrant/in_private_libvirt.sh): its vagrant-libvirt network, dnsmasq and
   the VM's addresses exist only there (the network rule for tests: nothing leaves the namespace).
3. In a copy of this checkout, as a user would: `vagrant box add`, `vagrant up --provider libvirt` (the
   qemu domain type: software emulation, as this machine has no usable KVM), `vagrant ssh -c 'cd /vagrant
   && sudo run-scenario scenarios/two-paths.yaml'`, `vagrant destroy -f`.
4. The run's results on the host: backend native, status ok, MPTCP above TCP. Nothing left behind: the
   host's mount table and links are as before, no process of the namespace remains.

It costs minutes (a full Debian boot under TCG), so it runs when the Vagrantfile, the box script, this test
or setup.sh's files changed since its last pass on this machine (tests/fresh/gate.py's stamps), as Debian
13's fresh root does; TESTBED_FRESH_ALL=1 runs it anyway. Without libvirt and vagrant-libvirt (`setup.sh
--vagrant`, which the README's commands leave out) it is skipped, saying so, except where
TESTBED_REQUIRE_VAGRANT=1 (CI's .ci/run sets it, after installing them): there it fails.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from runners.linux.netns import throwaway_netns
from tests.fresh import gate
from tests.fresh.chroot import CACHE as FRESH_CACHE, REPO, base_tarball, copy_checkout, host_state, left_behind

pytestmark = pytest.mark.vagrant
CACHE = Path(os.environ.get("TESTBED_VAGRANT_CACHE", "/var/cache/mptcp-testbed/vagrant"))
BOX_FILES = ("setup.sh", "requirements*", "pyproject.toml", "setup.py", "vagrant/build-box.sh")
# and what the test runs with: its scripts, the fresh-machine helpers it borrows, the scenario it runs
TEST_FILES = BOX_FILES + ("Vagrantfile", "tests/vagrant/*", "tests/fresh/chroot.py", "tests/fresh/gate.py",
                          "scenarios/two-paths.yaml")
SUITE = "vagrant-up"
INSIDE = REPO / "tests" / "vagrant" / "in_private_libvirt.sh"
RUN_LIBVIRT = Path("/run/libvirt")


def log(msg: str) -> None:
    print(f"[vagrant {time.strftime('%H:%M:%S')}] {msg}", flush=True)


@pytest.fixture
def runs_here() -> None:
    runs, why = gate.decide_on_files("vagrant up", SUITE, TEST_FILES, REPO, CACHE)
    log(why)
    if not runs:
        pytest.skip(why)
    if os.geteuid() != 0:
        pytest.fail("the vagrant test needs root (libvirtd, namespaces); run the suite as root as CI does")
    missing = [tool for tool in ("vagrant", "libvirtd", "qemu-img", "qemu-system-x86_64", "dnsmasq")
               if not shutil.which(tool)]
    # the distribution's plugin (what setup.sh installs), as the test's own VAGRANT_HOME sees plugins
    if "vagrant" not in missing:
        with tempfile.TemporaryDirectory() as home:
            plugins = subprocess.run(["vagrant", "plugin", "list"], capture_output=True, text=True,
                                     env={**os.environ, "VAGRANT_HOME": home}).stdout
        if "vagrant-libvirt" not in plugins:
            missing.append("vagrant-libvirt")
    if missing:
        why = f"{', '.join(missing)} missing: `./setup.sh --vagrant` installs them (CI's .ci/run does)"
        if os.environ.get("TESTBED_REQUIRE_VAGRANT") == "1":
            pytest.fail(why)
        pytest.skip(why)


def project_box() -> Path:
    """The box made from this checkout's BOX_FILES: from the cache, or built now (minutes)."""
    key = gate.setup_hash(REPO, BOX_FILES)[:16]
    box = CACHE / f"mptcp-testbed-bookworm-{key}.box"
    if box.exists():
        log(f"box {box.name} from the cache")
        return box
    CACHE.mkdir(parents=True, exist_ok=True)
    for old in CACHE.glob("mptcp-testbed-bookworm-*.box"):
        old.unlink()
    t0 = time.monotonic()
    built = subprocess.run([str(REPO / "vagrant" / "build-box.sh"), "--out", str(box),
                            "--base", str(base_tarball("bookworm")),
                            "--apt-cache", str(FRESH_CACHE / "debs"), "--pip-cache", str(FRESH_CACHE / "pip")],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=2400)
    assert built.returncode == 0, f"vagrant/build-box.sh failed:\n{built.stdout[-4000:]}\n{built.stderr[-4000:]}"
    log(f"box built in {time.monotonic() - t0:.0f} s: {built.stdout.strip().splitlines()[-1]}")
    return box


def leave_no_run_libvirt(had_it: bool) -> None:
    """The empty /run/libvirt that in_private_libvirt.sh makes to bind its own over: gone again, also when
    the script was killed before its own exit could remove it."""
    if not had_it:
        try:
            RUN_LIBVIRT.rmdir()
        except OSError:
            pass


def netns_pids(ns: str) -> list[int]:
    """The processes whose network namespace is `ns` (libvirtd, dnsmasq, qemu, vagrant's ssh)."""
    try:
        target = os.stat(f"/run/netns/{ns}").st_ino
    except OSError:
        return []
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}/ns/net").st_ino == target and int(pid) != os.getpid():
                pids.append(int(pid))
        except OSError:
            continue
    return pids


def stop_namespace(ns: str) -> list[int]:
    """Kill what still runs in `ns` (throwaway_netns deletes it); the pids found still running (none after
    a clean run)."""
    left = netns_pids(ns)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    deadline = time.monotonic() + 10
    while netns_pids(ns) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def test_vagrant_up_runs_the_readme_command_natively_in_the_project_box(runs_here, tmp_path):
    box = project_box()
    checkout = tmp_path / "mptcp-testbed"
    checkout.mkdir()
    copy_checkout(checkout)
    work = tmp_path / "libvirt"
    work.mkdir()
    before = host_state()
    had_run_libvirt = RUN_LIBVIRT.exists()
    ns = f"tbvagrant{os.getpid()}"
    t0 = time.monotonic()
    # the first `ip netns add` on a machine bind-mounts /run/netns on itself; throwaway_netns undoes that
    # mount when it made it (a fresh machine's CI found it left behind, 2026-11-26)
    with throwaway_netns(ns) as made:
        assert made.returncode == 0, made.stderr
        try:
            # the namespace has no way out, so the VM has none either: its provisioning must need no network
            routes = subprocess.run(["ip", "-n", ns, "route", "show", "default"], capture_output=True, text=True)
            assert routes.returncode == 0 and not routes.stdout.strip(), routes.stdout
            done = subprocess.run(["ip", "netns", "exec", ns, "unshare", "--mount", "--propagation", "private",
                                   "--", str(INSIDE), str(work), str(box), str(checkout)],
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=2400)
        finally:
            stray = stop_namespace(ns)
            leave_no_run_libvirt(had_run_libvirt)
            # the box unpacked by `vagrant box add` and libvirt's copy of its image: GBs, not kept
            shutil.rmtree(work, ignore_errors=True)
    # vagrant's progress bars are thousands of \r-separated lines: left out of what a failure shows
    output = "\n".join(line for line in (done.stdout + done.stderr).replace("\r", "\n").splitlines()
                       if "Progress:" not in line)
    phases = {m[1]: int(m[2]) for m in re.finditer(r"^phase (\S+) (\d+)$", done.stdout, re.M)}
    log(f"exited {done.returncode} after {time.monotonic() - t0:.0f} s; phases (s): {phases}")
    assert done.returncode == 0, f"the Vagrant commands failed:\n{output[-8000:]}"
    assert not stray, f"processes left in the test's namespace after `vagrant destroy -f` (killed): {stray}"
    results = (checkout / "results" / "two-paths" / "latest").resolve()
    meta = json.loads((results / "metadata.json").read_text())
    assert meta["backend"] == "native" and meta["status"] == "ok", {k: meta.get(k) for k in ("backend", "status")}
    doc = json.loads((results / "results.json").read_text())
    by_mode = {run["mode"]: run["metrics"]["throughput_mbps"] for run in doc["runs"]}
    assert by_mode["mptcp"] > 1.6 * by_mode["tcp"], by_mode
    assert (results / "plots" / "box-throughput_mbps.png").exists()
    left = left_behind(before, host_state())
    assert not left, f"the host has gained {left}"
    log(f"native run in the box on kernel {meta.get('backend_kernel', '?')}: MPTCP "
        f"{by_mode['mptcp']:.2f} vs TCP {by_mode['tcp']:.2f} Mbit/s; results on the host in {results}")
    tested = tmp_path / "tested"
    for path in gate.setup_files(checkout, TEST_FILES):
        (tested / path.relative_to(checkout)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, tested / path.relative_to(checkout))
    log(f"pass recorded in {gate.record_pass(SUITE, tested, CACHE, TEST_FILES)}")
