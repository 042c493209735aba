"""What a run may leave behind, seen from the root namespace: used to prove cleanup."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# OVS daemons that ran before the tests are the machine's; the runner must stop only those it started
_OVS_BEFORE = subprocess.run(["pgrep", "-x", "ovs-vswitchd"], capture_output=True).returncode == 0


def leftovers() -> list[str]:
    """Namespaces, Mininet links, and processes in other network namespaces or named like ours."""
    found = []
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.strip()
    if ns:
        found.append(f"named netns: {ns}")
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    ours = re.findall(r"^\d+: ((?:h\d+|s\d+|cli|srv)(?:-eth\d+)?)[@:]", links, re.M)
    if ours:
        found.append(f"links in the root namespace: {ours}")
    if shutil.which("ovs-vsctl"):
        br = subprocess.run(["ovs-vsctl", "--timeout=3", "list-br"], capture_output=True, text=True)
        if br.returncode == 0 and br.stdout.strip():
            found.append(f"OVS bridges: {br.stdout.split()}")
    root_ns = os.readlink("/proc/1/ns/net")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            netns = os.readlink(f"/proc/{pid}/ns/net")
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if netns != root_ns:
            found.append(f"process {pid} ({comm}) in another network namespace")
        elif comm in ("iperf3", "mnexec") or (comm in ("ovs-vswitchd", "ovsdb-server") and not _OVS_BEFORE):
            found.append(f"process {pid} ({comm})")
        else:
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if "controller.launch" in cmdline and str(os.getpid()) != pid:
                found.append(f"process {pid} (controller: {cmdline.strip()[:80]})")
    return found


def run_cli(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runners.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def write_scenario(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
