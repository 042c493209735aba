"""What a run can leave behind on a machine (or in a guest), found and removed by one helper.

A run's Mininet hosts are `bash ... mininet:<host>` processes holding
network namespaces; its links are veth pairs named `<node>-eth<N>`; its
traffic is iperf3 (or a user's tool under mptcpize); switched topologies add
Open vSwitch bridges and an os-ken controller (`python -m controller.launch`).
The warm VM checks for these between jobs.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

MININET_HOST = re.compile(r"mininet:")
OUR_PROCESSES = (re.compile(r"(^|/)iperf3\b"), re.compile(r"-m controller\.launch\b"), MININET_HOST)
OUR_LINK = re.compile(r"^[A-Za-z][A-Za-z0-9_]*-eth\d+$")


def _processes() -> list[tuple[int, str]]:
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if cmd:
            out.append((int(d.name), cmd))
    return out


def leftover_processes() -> list[tuple[int, str]]:
    return [(pid, cmd) for pid, cmd in _processes() if any(p.search(cmd) for p in OUR_PROCESSES)]


def leftover_links() -> list[str]:
    try:
        r = subprocess.run(["ip", "-j", "link", "show"], capture_output=True, text=True, timeout=20)
        links = json.loads(r.stdout or "[]")
    except (OSError, subprocess.SubprocessError, json.JSONDecodeError):
        return []
    return [ln["ifname"] for ln in links if OUR_LINK.match(ln.get("ifname", ""))]


OVSDB_SOCKET = Path("/var/run/openvswitch/db.sock")


def leftover_bridges() -> list[str]:
    if not OVSDB_SOCKET.exists():   # Open vSwitch is not running: no bridge can be left
        return []
    try:
        r = subprocess.run(["ovs-vsctl", "--timeout=5", "list-br"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return []
    return r.stdout.split() if r.returncode == 0 else []


def find_leftovers() -> list[str]:
    """One line per thing a run left behind; empty when the machine is clean."""
    found = [f"process {pid}: {cmd[:120]}" for pid, cmd in leftover_processes()]
    found += [f"link {name}" for name in leftover_links()]
    found += [f"Open vSwitch bridge {name}" for name in leftover_bridges()]
    return found


def remove_leftovers() -> list[str]:
    """Kill our processes, delete our links and bridges; returns what was there."""
    found = find_leftovers()
    for pid, _ in leftover_processes():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for name in leftover_bridges():
        subprocess.run(["ovs-vsctl", "--timeout=5", "--if-exists", "del-br", name], capture_output=True, timeout=20)
    for name in leftover_links():
        subprocess.run(["ip", "link", "del", name], capture_output=True, timeout=20)
    return found
