"""What a run may leave behind, seen from the root namespace: used to prove cleanup."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from runners.leftovers import find_leftovers

REPO = Path(__file__).resolve().parents[2]
# OVS daemons that ran before the tests are the machine's; the runner must stop only those it started
_OVS_BEFORE = subprocess.run(["pgrep", "-x", "ovs-vswitchd"], capture_output=True).returncode == 0


def leftovers() -> list[str]:
    """Namespaces, Mininet links, and processes in other network namespaces or named like ours."""
    return find_leftovers(ovs_was_running=_OVS_BEFORE)


def run_cli(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runners.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def write_scenario(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
