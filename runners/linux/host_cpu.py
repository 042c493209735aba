"""How the host's CPUs were shared while a VM ran a set: the testbed's own processes (this one, and qemu
under it or under the warm VM's process) against everything else.

Under TCG the guest's time is the host's CPU: a compile, a browser or a second VM on the host slows the
emulated CPUs, and the guest's own fidelity checks see only the result (queues that fall behind, idle
time that is not there). This is the host's side of that, read from /proc at the start and the end.
Pure functions over /proc's text, and one reader.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import NamedTuple, Optional

PROC = Path("/proc")
# the share of one CPU, averaged over the set, that other processes may use before a set says so
OTHERS_WARN_CORES = 0.5


class CpuSnapshot(NamedTuple):
    t: float                  # time.monotonic()
    busy: int                 # host jiffies not idle, iowait or steal, every CPU
    steal: int                # host jiffies a hypervisor under this host took
    total: int                # host jiffies, every CPU
    procs: dict               # {pid: (ppid, its own and its reaped children's CPU, jiffies)}
    cpus: int


def host_jiffies(proc_stat: str) -> tuple[int, int, int]:
    """(busy, steal, total) from /proc/stat's `cpu` line (user nice system idle iowait irq softirq steal
    ...; guest time is counted in user already, so it is left out). Busy is neither idle, iowait nor
    steal: what a hypervisor under this host took is no process's here."""
    for line in proc_stat.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            values = [int(v) for v in fields[1:9]]
            idle, steal = values[3] + values[4], values[7]
            return sum(values) - idle - steal, steal, sum(values)
    raise ValueError("/proc/stat has no cpu line")


def parse_pid_stat(text: str) -> tuple[int, int]:
    """(ppid, CPU jiffies) from /proc/PID/stat: its own utime and stime, and cutime and cstime, the CPU of
    the children it has reaped (gone from /proc: a VM that powered off is counted in its parent's). The
    command may hold spaces and parentheses."""
    rest = text[text.rindex(")") + 2:].split()
    return int(rest[1]), sum(int(v) for v in rest[11:15])


def tree_jiffies(stats: dict[int, tuple[int, int]], roots: set[int]) -> int:
    """CPU jiffies of the processes in `roots` and all their descendants, from {pid: (ppid, jiffies)}."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    seen, todo, total = set(), [r for r in roots if r in stats], 0
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += stats[pid][1]
        todo += children.get(pid, [])
    return total


def _all_pid_stats(proc: Path) -> dict[int, tuple[int, int]]:
    out = {}
    for d in proc.iterdir():
        if d.name.isdigit():
            try:
                out[int(d.name)] = parse_pid_stat((d / "stat").read_text())
            except (OSError, ValueError, IndexError):
                continue   # gone meanwhile, or not readable
    return out


def snapshot(proc: Path = PROC) -> Optional[CpuSnapshot]:
    """The host's CPU counters and every process's now; None where /proc cannot be read."""
    try:
        busy, steal, total = host_jiffies((proc / "stat").read_text())
        procs = _all_pid_stats(proc)
    except (OSError, ValueError):
        return None
    return CpuSnapshot(time.monotonic(), busy, steal, total, procs, os.cpu_count() or 1)


def shares(before: CpuSnapshot, after: CpuSnapshot, roots: set[int]) -> Optional[dict]:
    """Between two snapshots: the CPU of the testbed's processes (`roots` and their descendants; one that
    started in between counts from 0; one that ended counts in its parent once reaped) and of every other
    process (interrupt time included), in CPUs' worth on average; what a hypervisor under the host took
    (`steal_cores`); and the host's idle share. One that ended and was not reaped yet is
    not counted, so `others_cores` may be a little high, never low."""
    total = after.total - before.total
    if total <= 0:
        return None
    busy, steal = after.busy - before.busy, after.steal - before.steal
    testbed = max(0, tree_jiffies(after.procs, roots) - tree_jiffies(before.procs, roots))
    cores = after.cpus
    return {"seconds": round(after.t - before.t, 1), "cpus": cores,
            "testbed_cores": round(cores * min(testbed, busy) / total, 2),
            "others_cores": round(cores * max(0, busy - testbed) / total, 2),
            "steal_cores": round(cores * steal / total, 2),
            "host_idle_pct": round(100 * (total - busy - steal) / total, 1)}
