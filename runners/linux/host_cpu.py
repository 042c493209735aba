"""How the host's CPUs were shared while a VM ran a set: the testbed's own processes (this one, and qemu
under it or under the warm VM's process) against everything else.

Under TCG the guest's time is the host's CPU: a compile, a browser or a second VM on the host slows the
emulated CPUs, and the guest's own fidelity checks see only the result (queues that fall behind, idle
time that is not there). This is the host's side of that, read from /proc: once at the start and the
end of a set (metadata's `vm.host_cpu`), and every SAMPLE_INTERVAL_S while the guest runs, as rows in
SAMPLES_FILE in the folder the guest writes its results into, where the guest reads them to judge each
run over its own traffic (runners.collect.fidelity_sampler). Pure functions over /proc's text, one
reader, and the recorder.
"""
from __future__ import annotations

import json
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple, Optional

PROC = Path("/proc")
SAMPLES_FILE = "host-cpu.jsonl"
# a whole /proc scan costs about 1 ms of CPU per 65 processes (2026-11-26): 0.2 % of one CPU at this interval
SAMPLE_INTERVAL_S = 0.5


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
    testbed = max(0, tree_jiffies(after.procs, roots) - tree_jiffies(before.procs, roots))
    return _share_figures(after.t - before.t, after.busy - before.busy, after.steal - before.steal,
                          after.total - before.total, testbed, after.cpus)


def _share_figures(seconds: float, busy: int, steal: int, total: int, testbed: int, cores: int) -> Optional[dict]:
    if total <= 0:
        return None
    return {"seconds": round(seconds, 1), "cpus": cores,
            "testbed_cores": round(cores * min(testbed, busy) / total, 2),
            "others_cores": round(cores * max(0, busy - testbed) / total, 2),
            "steal_cores": round(cores * steal / total, 2),
            "host_idle_pct": round(100 * (total - busy - steal) / total, 1)}


def sample_row(snap: CpuSnapshot, wall: float, roots: set[int], session: str) -> dict:
    """One row of SAMPLES_FILE: the host's wall clock (what the guest maps its runs onto), its CPU
    counters, the testbed's processes' jiffies so far, and the recording it belongs to (a resumed set or a
    kernel sweep appends the rows of several)."""
    return {"t": round(wall, 3), "busy": snap.busy, "steal": snap.steal, "total": snap.total,
            "testbed": tree_jiffies(snap.procs, roots), "cpus": snap.cpus, "session": session}


def read_rows_since(path: Path, since: float, chunk: int = 1 << 16) -> list[dict]:
    """The file's rows from a little before `since` (the host's clock) to its end: its tail, read back a
    chunk at a time until a row at or before `since` is in it (a long set's file is not read whole for each
    run). Raises OSError."""
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        back = min(size, chunk)
        while True:
            f.seek(size - back)
            text = f.read(back).decode("utf-8", "replace")
            rows = parse_rows(text if back == size else text.split("\n", 1)[-1])
            if back == size or (rows and rows[0]["t"] <= since):
                return rows
            back = min(size, back * 4)


def parse_rows(text: str) -> list[dict]:
    """SAMPLES_FILE's rows in order; a line being written (the last, cut short) or not a row is skipped."""
    rows = []
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and all(isinstance(row.get(k), (int, float)) for k in
                                         ("t", "busy", "steal", "total", "testbed", "cpus")):
            rows.append(row)
    return rows


def window_shares(rows: list[dict], start: float, end: float, slack: float = 0.0) -> Optional[dict]:
    """The host's shares (as `shares` gives them) from the last row at or before `start` to the first after
    it at or after `end` of the same recording (the host's clock): a window a little wider than asked, by at
    most a sample interval at each end. With `slack`, when no row closes the window yet, it may end at the
    last row up to `slack` s before `end`. None when the rows do not reach both ends, or the testbed's
    processes' count went down in between."""
    first = max((i for i, r in enumerate(rows) if r["t"] <= start), default=None)
    if first is None:
        return None
    a = rows[first]
    after = [r for r in rows[first + 1:] if r.get("session") == a.get("session")]
    b = next((r for r in after if r["t"] >= end), None)
    if b is None and after and after[-1]["t"] >= end - slack:
        b = after[-1]
    if b is None or b["testbed"] < a["testbed"]:
        return None
    got = _share_figures(b["t"] - a["t"], b["busy"] - a["busy"], b["steal"] - a["steal"], b["total"] - a["total"],
                         b["testbed"] - a["testbed"], int(b["cpus"]))
    if got is not None:
        got["window"] = [a["t"], b["t"]]
    return got


class Recorder(threading.Thread):
    """Appends a row to `path` every `interval` s until stopped (a row at the start and one at the end
    too), each written whole and flushed, so that the guest reading the file meanwhile sees whole rows.
    `roots` are the testbed's processes (this one; the warm VM's). A file that cannot be written ends the
    recording quietly: the runs are then judged without the host's figures, and say so."""

    def __init__(self, path: Path, roots: set[int], interval: float = SAMPLE_INTERVAL_S):
        super().__init__(daemon=True, name="host-cpu-recorder")
        self.path, self.roots, self.interval = Path(path), set(roots), interval
        self.session = f"{os.getpid()}-{time.time():.3f}"
        self.rows = 0
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            with open(self.path, "a", encoding="utf-8") as f:
                while True:
                    self._write(f)
                    if self._halt.wait(self.interval):
                        self._write(f)
                        return
        except OSError:
            return

    def _write(self, f) -> None:
        wall, snap = time.time(), snapshot()
        if snap is not None:
            f.write(json.dumps(sample_row(snap, wall, self.roots, self.session)) + "\n")
            f.flush()
            self.rows += 1

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)


@contextmanager
def recording(folder: Path, roots: set[int], interval: float = SAMPLE_INTERVAL_S):
    """A Recorder into `folder`'s SAMPLES_FILE while the body runs (the guest's job)."""
    recorder = Recorder(Path(folder) / SAMPLES_FILE, roots, interval)
    recorder.start()
    try:
        yield recorder
    finally:
        recorder.stop()
