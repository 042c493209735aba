"""Throwaway named network namespaces (the probes') that leave nothing behind, /run/netns's mount included.

The first `ip netns add` on a machine bind-mounts /run/netns on itself (iproute2 makes it a shared mount
point, so that namespaces made later appear in every mount namespace), and `ip netns del` removes the
namespace but never that mount: a unit test's dry run as root left it behind (issue 32). A probe that
made the mount undoes it once its namespace is gone, unless another namespace is still there (then
umount fails with EBUSY, and the mount stays for its owner).
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path

from runners.linux.processes import run_command

NETNS_DIR = Path("/run/netns")
MOUNTINFO = Path("/proc/self/mountinfo")

# The probes make their namespaces side by side (threads): the first one in records whether /run/netns
# was a mount point, and the last one out undoes the mount
_lock = threading.Lock()
_in_use = {"count": 0, "mounted_before": True}


def mount_points(mountinfo: Path = MOUNTINFO) -> list[str]:
    """The mount points of this mount namespace, in the order of /proc/self/mountinfo (field 5)."""
    try:
        lines = mountinfo.read_text().splitlines()
    except OSError:
        return []
    return [line.split()[4] for line in lines if len(line.split()) > 4]


def netns_mounts(mountinfo: Path = MOUNTINFO) -> list[str]:
    """The mount points that are named network namespaces or their folder (/run/netns, /run/netns/X)."""
    return [m for m in mount_points(mountinfo) if "netns" in m]


@contextmanager
def throwaway_netns(name: str, run=run_command):
    """`ip netns add name` (its CompletedProcess is yielded), then `ip netns del name`, and /run/netns's
    mount undone when this call made it and the folder is empty again."""
    with _lock:
        if _in_use["count"] == 0:
            _in_use["mounted_before"] = str(NETNS_DIR) in mount_points()
        _in_use["count"] += 1
    try:
        yield run(["ip", "netns", "add", name], 20)
    finally:
        run(["ip", "netns", "del", name], 20)
        with _lock:
            _in_use["count"] -= 1
            last_out = _in_use["count"] == 0 and not _in_use["mounted_before"]
            if last_out and str(NETNS_DIR) in mount_points() and not _holds_anything(NETNS_DIR):
                run(["umount", str(NETNS_DIR)], 20)


def _holds_anything(folder: Path) -> bool:
    try:
        return any(folder.iterdir())
    except OSError:
        return True
