"""The MPTCP path manager's own timeline during a run with events: `ip mptcp monitor` in the client's and
the server's namespaces, each line stamped as it arrives on the run's clock (the events' time base),
kept raw and summarised as the time from each event to the MPTCP events that followed it."""
from __future__ import annotations

import re
import subprocess
import threading
import time
from typing import Optional

from runners.linux.nsexec import ProcessRegistry

# line-buffered: piped, ip's stdout would otherwise reach us in blocks, and the stamps would be late
MONITOR_ARGV = ["stdbuf", "-oL", "ip", "mptcp", "monitor"]
# what the summary reports, by `ip mptcp monitor`'s names (SF_*: subflows; ANNOUNCED/REMOVED: addresses)
SUMMARISED = ("SF_ESTABLISHED", "SF_CLOSED", "SF_PRIO", "ANNOUNCED", "REMOVED", "CLOSED")
_LINE = re.compile(r"^\[\s*([A-Z_]+(?: \d+)?)\]\s*(.*)$")


class MptcpMonitor:
    """One `ip mptcp monitor` per node, read by a thread each, each line stamped on arrival."""

    def __init__(self, nodes: list):
        self.procs = ProcessRegistry()
        self.lines: dict[str, list[tuple[float, str]]] = {n.name: [] for n in nodes}
        self.threads = []
        for node in nodes:
            proc = self.procs.start(node, MONITOR_ARGV, stderr=subprocess.DEVNULL)
            th = threading.Thread(target=self._read, args=(proc, self.lines[node.name]), daemon=True)
            th.start()
            self.threads.append(th)

    def _read(self, proc, into: list) -> None:
        for raw in iter(proc.stdout.readline, b""):
            into.append((time.monotonic(), raw.decode(errors="replace").rstrip()))

    def stop(self, t0: float) -> dict[str, list[tuple[float, str]]]:
        """Every node's lines, stamped in seconds from `t0` (the run's clock)."""
        time.sleep(0.05)   # the last events of the run's end are already in the pipe
        self.procs.stop_all()
        for th in self.threads:
            th.join(timeout=5)
        return {node: [(round(t - t0, 4), text) for t, text in items] for node, items in self.lines.items()}


def parse_line(line: str) -> Optional[dict]:
    """`[ SF_CLOSED] token=... saddr4=10.0.1.1 ...` -> {"type": "SF_CLOSED", "token": ..., ...}."""
    m = _LINE.match(line.strip())
    if not m:
        return None
    fields = dict(w.split("=", 1) for w in m.group(2).split() if "=" in w)
    return {"type": m.group(1), **fields}


def raw_text(lines: dict[str, list[tuple[float, str]]]) -> str:
    """The monitors' lines, each with its node and its time on the run's clock."""
    return "".join(f"{t:.4f} {node} {text}\n" for node, items in lines.items() for t, text in items)


def after_event(lines: dict[str, list[tuple[float, str]]], event_s: float, until_s: Optional[float],
                addresses: dict[str, str]) -> dict[str, dict[str, float]]:
    """Per node, the time from the event to the first of each summarised MPTCP event that followed it
    (before the next change, `until_s`), named with the path whose address it involves when known:
    {"h1": {"SF_CLOSED A": 1.234, "SF_ESTABLISHED B": 0.01}}."""
    out: dict[str, dict[str, float]] = {}
    for node, items in lines.items():
        seen: dict[str, float] = {}
        for t, text in items:
            if t < event_s or (until_s is not None and t >= until_s):
                continue
            ev = parse_line(text)
            if ev is None or ev["type"] not in SUMMARISED:
                continue
            path = next((addresses[ev[k]] for k in ("saddr4", "saddr6", "daddr4", "daddr6")
                         if ev.get(k) in addresses), None)
            key = f"{ev['type']} {path}" if path else ev["type"]
            seen.setdefault(key, round(t - event_s, 4))
        if seen:
            out[node] = seen
    return out
