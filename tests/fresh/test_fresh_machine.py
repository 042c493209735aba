"""A new user's first run, on a clean Debian 12: the README's first command, from a fresh root.

A minimal Debian 12 root is made with debootstrap (its tarball is cached, and so
are the .deb and pip downloads: reusing downloads is fine, reusing an installed
system is not), unpacked anew for every run, and this checkout is copied in.
Inside it, as root in a chroot with /proc, /sys and /dev, the README's first
command runs as written except for the backend, which is forced to the VM:

    ./setup.sh && .venv/bin/run-scenario scenarios/two-paths.yaml --backend vm

So a package that setup.sh forgets fails here, as it would for a new user,
whatever the developers' own machine has installed. Needs root, debootstrap
and access to Debian's mirror (and PyPI), which setup.sh needs anyway.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("TESTBED_FRESH_CACHE", "/var/cache/mptcp-testbed/fresh-machine"))
MIRROR = "http://deb.debian.org/debian"
SUITE = "bookworm"
FIRST_COMMAND = "./setup.sh && .venv/bin/run-scenario scenarios/two-paths.yaml --backend vm"

pytestmark = pytest.mark.fresh_machine


def _log(msg: str) -> None:
    print(f"[fresh machine {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def base_tarball() -> Path:
    """debootstrap's minimal Debian 12, made once and kept as a tarball."""
    tarball = CACHE / f"{SUITE}-minbase.tar"
    if tarball.exists():
        return tarball
    work = CACHE / "debootstrap"
    shutil.rmtree(work, ignore_errors=True)
    CACHE.mkdir(parents=True, exist_ok=True)
    _log(f"debootstrap --variant=minbase {SUITE} (once; the tarball is cached in {CACHE})")
    subprocess.run(["debootstrap", "--variant=minbase", SUITE, str(work), MIRROR], check=True,
                   stdout=subprocess.DEVNULL, timeout=1200)
    tmp = tarball.with_suffix(".tmp")
    subprocess.run(["tar", "-C", str(work), "-cf", str(tmp), "."], check=True, timeout=600)
    os.replace(tmp, tarball)
    shutil.rmtree(work, ignore_errors=True)
    return tarball


def copy_checkout(dest: Path) -> None:
    """The files git knows (tracked, and new ones not ignored): what a clone of this tree would hold."""
    names = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in names)):
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


class Chroot:
    """A fresh root with the kernel file systems mounted; everything undone on exit."""

    def __init__(self, root: Path):
        self.root = root
        self.mounts: list[Path] = []

    def __enter__(self) -> "Chroot":
        subprocess.run(["tar", "-C", str(self.root), "-xf", str(base_tarball())], check=True, timeout=600)
        self._copy_network_trust()
        # a chroot must not start the packages' services on the host (a real machine would start them)
        policy = self.root / "usr/sbin/policy-rc.d"
        policy.write_text("#!/bin/sh\nexit 101\n")
        policy.chmod(0o755)
        self._mount(["-t", "proc", "proc"], "proc")
        self._mount(["-t", "sysfs", "sysfs"], "sys")
        self._mount(["--rbind", "/dev"], "dev")
        subprocess.run(["mount", "--make-rslave", str(self.root / "dev")], check=True)
        for host_dir, inside in ((CACHE / "debs", "var/cache/apt/archives"), (CACHE / "pip", "root/.cache/pip")):
            host_dir.mkdir(parents=True, exist_ok=True)
            self._mount(["--bind", str(host_dir)], inside)
        return self

    def _copy_network_trust(self) -> None:
        """The machine's own network setup, which any new machine here has and no package installs:
        its resolver, the certificate authorities its registries' proxies use (kept where
        update-ca-certificates finds them again when ca-certificates is installed), and pip's config."""
        for name in ("etc/resolv.conf", "etc/pip.conf", "etc/ssl/certs/ca-certificates.crt"):
            src = Path("/") / name
            if src.is_file():
                (self.root / name).unlink(missing_ok=True)
                (self.root / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(src, self.root / name)
        local_cas = Path("/usr/local/share/ca-certificates")
        if local_cas.is_dir():
            shutil.copytree(local_cas, self.root / local_cas.relative_to("/"), dirs_exist_ok=True)
        for name in ("etc/apt/apt.conf.d/99artifact-registry",):
            if (Path("/") / name).is_file():
                shutil.copy(Path("/") / name, self.root / name)

    def _mount(self, args: list[str], inside: str) -> None:
        target = self.root / inside
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", *args, str(target)], check=True)
        self.mounts.append(target)

    def run(self, command: str, cwd: str, timeout: float) -> subprocess.CompletedProcess:
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root",
               "LANG": "C.UTF-8", "TERM": "dumb"}
        # the machine's network settings (certificate bundles, proxies, pip's timeout), as a login here has
        env.update({k: v for k, v in os.environ.items()
                    if k.endswith(("_proxy", "_PROXY", "CA_BUNDLE", "_CERT_FILE", "_CERT_DIR"))
                    or k in ("PIP_CERT", "PIP_DEFAULT_TIMEOUT", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL")})
        return subprocess.run(["chroot", str(self.root), "/bin/bash", "-c", f"cd {cwd} && {command}"],
                               env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, timeout=timeout)

    def __exit__(self, *exc) -> None:
        self._kill_processes_inside()
        for target in reversed(self.mounts):
            subprocess.run(["umount", "-R", "-l", str(target)], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)

    def _kill_processes_inside(self) -> None:
        """qemu or a daemon still running from the fresh root (a failed or timed-out run)."""
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if os.readlink(f"/proc/{pid}/root") == str(self.root):
                    os.kill(int(pid), signal.SIGKILL)
            except OSError:
                continue


@pytest.fixture
def fresh_root(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.fail("the fresh-machine test needs root (chroot, mounts); run the suite as root as CI does")
    if not shutil.which("debootstrap"):
        pytest.fail("debootstrap is not installed: ./setup.sh installs it")
    root = Path(tmp_path_factory.mktemp("fresh")) / "root"
    root.mkdir()
    with Chroot(root) as chroot:
        yield chroot


def test_readme_first_command_on_a_fresh_debian_12(fresh_root):
    t0 = time.monotonic()
    dest = fresh_root.root / "home/user/mptcp-testbed"
    dest.mkdir(parents=True)
    copy_checkout(dest)
    _log(f"fresh root unpacked and checkout copied in {time.monotonic() - t0:.0f} s; running: {FIRST_COMMAND}")
    t1 = time.monotonic()
    r = fresh_root.run(FIRST_COMMAND, "/home/user/mptcp-testbed", timeout=900)
    took = time.monotonic() - t1
    _log(f"first command exited {r.returncode} after {took:.0f} s")
    assert r.returncode == 0, f"the README's first command failed on a fresh Debian 12:\n{r.stdout[-6000:]}"
    results = sorted((dest / "results/two-paths").iterdir())[-1]
    doc = json.loads((results / "results.json").read_text())
    by_mode = {run["mode"]: run["metrics"]["throughput_mbps"] for run in doc["runs"]}
    assert by_mode["mptcp"] > 1.6 * by_mode["tcp"], by_mode
    meta = json.loads((results / "metadata.json").read_text())
    assert meta["backend"] == "vm" and meta["status"] == "ok", meta
    assert (results / "plots" / "box-throughput_mbps.png").exists()
    _log(f"MPTCP {by_mode['mptcp']:.2f} vs TCP {by_mode['tcp']:.2f} Mbit/s; the scenario took "
         f"{meta['vm']['wall_seconds_with_boot']:.0f} s with its VM boot")
