"""A clean Debian root to run the README's commands in, as a new machine would (tests/fresh).

A minimal root of the release is made with debootstrap once and kept as a tarball (as are the .deb
and pip downloads: reusing downloads is fine, reusing an installed system is not); every test
unpacks it anew, copies this checkout in, and runs commands in a chroot with /proc, /sys and /dev.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("TESTBED_FRESH_CACHE", "/var/cache/mptcp-testbed/fresh-machine"))
# trixie is on the same mirror as bookworm
MIRROR = "http://deb.debian.org/debian"


def log(msg: str) -> None:
    print(f"[fresh machine {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def base_tarball(suite: str) -> Path:
    """debootstrap's minimal root of `suite` (bookworm, trixie), made once and kept as a tarball."""
    tarball = CACHE / f"{suite}-minbase.tar"
    if tarball.exists():
        return tarball
    work = CACHE / f"debootstrap-{suite}"
    shutil.rmtree(work, ignore_errors=True)
    CACHE.mkdir(parents=True, exist_ok=True)
    log(f"debootstrap --variant=minbase {suite} (once; the tarball is cached in {CACHE})")
    t0 = time.monotonic()
    subprocess.run(["debootstrap", "--variant=minbase", suite, str(work), MIRROR], check=True,
                   stdout=subprocess.DEVNULL, timeout=1200)
    tmp = tarball.with_suffix(".tmp")
    subprocess.run(["tar", "-C", str(work), "-cf", str(tmp), "."], check=True, timeout=600)
    os.replace(tmp, tarball)
    shutil.rmtree(work, ignore_errors=True)
    log(f"{tarball.name} made in {time.monotonic() - t0:.0f} s")
    return tarball


def copy_checkout(dest: Path) -> None:
    """The files git knows (tracked, and new ones not ignored), committed in a new repository there: what a
    clone of this tree would hold (the unit suite lists the checkout's files with git, as packaging does)."""
    names = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in names)):
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    git = ["git", "-C", str(dest), "-c", "user.name=fresh machine", "-c", "user.email=fresh@localhost"]
    for args in (["-c", "init.defaultBranch=main", "init", "-q"], ["add", "-A"],
                 ["commit", "-q", "-m", "the checkout under test"]):
        subprocess.run(git + args, check=True, capture_output=True, timeout=120)


def mount_points() -> list[str]:
    """This mount namespace's mount points, in /proc/self/mountinfo's order (its field 5)."""
    return [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]


def host_state() -> dict[str, Counter]:
    """What a test could leave on this machine: its mount table (a chroot's `ip netns add` once left a
    bind mount of the root's run/netns, issue 32), and the links of its network namespace, which the
    chroot shares. Each a count per entry, so that a second mount on the same point shows."""
    mounts = Counter()
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields, _, fs = line.partition(" - ")
        fs_type, source = (fs.split() + ["", ""])[:2]
        mounts[f"{fields.split()[4]} ({fs_type} {source})"] += 1
    return {"mounts": mounts, "links": Counter(os.listdir("/sys/class/net"))}


def left_behind(before: dict[str, Counter], after: dict[str, Counter]) -> list[str]:
    """The entries `after` has that `before` had not, as 'mounts: /x (ext4 /dev/vda)'."""
    return [f"{kind}: {entry}" for kind in before for entry in sorted((after[kind] - before[kind]).elements())]


class Chroot:
    """A fresh root with the kernel file systems mounted; everything undone on exit."""

    def __init__(self, root: Path, suite: str):
        self.root = root
        self.suite = suite
        self.mounts: list[Path] = []
        self.stray_mounts: list[str] = []   # under the root, made by what ran inside: found on exit, undone

    def __enter__(self) -> "Chroot":
        subprocess.run(["tar", "-C", str(self.root), "-xf", str(base_tarball(self.suite))], check=True, timeout=600)
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
                    or k in ("PIP_CERT", "PIP_DEFAULT_TIMEOUT", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL")
                    # the suite's and CI's word on warm VMs (tests/conftest.py): the run boots cold, leaves none
                    or k in ("CI", "TESTBED_KEEP_VM")})
        return subprocess.run(["chroot", str(self.root), "/bin/bash", "-c", f"cd {cwd} && {command}"],
                               env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, timeout=timeout)

    def __exit__(self, *exc) -> None:
        self._kill_processes_inside()
        for target in reversed(self.mounts):
            subprocess.run(["umount", "-R", "-l", str(target)], capture_output=True)
        # what ran inside left these (the test fails on them); undone, so that the root can go and the host
        # keeps no trace of it
        inside = str(self.root) + "/"
        self.stray_mounts = [m for m in mount_points() if m.startswith(inside)]
        for target in reversed(self.stray_mounts):
            subprocess.run(["umount", "-l", target], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)

    def _kill_processes_inside(self) -> None:
        """qemu or a daemon still running from the fresh root (a failed or timed-out run)."""
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if os.readlink(f"/proc/{pid}/root") == str(self.root):
                    os.kill(int(pid), signal.SIGKILL)
            except OSError:
                continue
