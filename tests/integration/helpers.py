"""What a run may leave behind, seen from the root namespace: used to prove cleanup."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def leftovers() -> list[str]:
    """Namespaces, Mininet links, and processes in other network namespaces or named like ours."""
    found = []
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.strip()
    if ns:
        found.append(f"named netns: {ns}")
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    ours = re.findall(r"^\d+: (h\d+-eth\d+)", links, re.M)
    if ours:
        found.append(f"links in the root namespace: {ours}")
    root_ns = os.readlink("/proc/1/ns/net")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            netns = os.readlink(f"/proc/{pid}/ns/net")
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if netns != root_ns:
            found.append(f"process {pid} ({comm}) in another network namespace")
        elif comm in ("iperf3", "mnexec"):
            found.append(f"process {pid} ({comm})")
    return found


def run_cli(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runners.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def write_scenario(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
