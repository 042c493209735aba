"""What a path change did to a run's goodput: the stall after it, the time to recover, the bytes per path
before and after, and the backup path's share (issue 30). Pure: it reads the per-path byte samples a run
records (`path_samples`: {"t": seconds from the traffic's start, "<path>": cumulative bytes received}).

Definitions, exactly (docs/results-and-metrics.md says the same):
- The samples cut time into intervals (t[k-1], t[k]]. The bytes of an interval are the growth of the
  paths' counters over it, summed over the paths asked for. Everything is aligned on samples, so each
  figure is exact to one sample interval (100 ms or finer around events).
- `stall_s`: the longest run of consecutive intervals that each deliver less than `stall_fraction`
  (default 10 %) of `capacity_mbps` (no byte at all when nothing is live), among the intervals that end
  after the event; a run that begins before the event counts from the event. 0 when there is none. A
  few retransmitted segments during a failover (6 kB in 100 ms) do not end a stall. `stall_open`: the
  stall lasted to the last sample, so stall_s is a lower bound.
- `recovery_s`: t[k] - event for the first sample t[k] after the event at which the goodput over
  (t[j], t[k]] reaches `fraction` (default 0.8) of `capacity_mbps`, what the paths still live after the
  event can carry, and stays there at every sample up to `hold_s` (default 1 s) later (or to the last
  sample): packets already in flight when a path fails keep arriving for a while, and that tail is not a
  recovery. t[j] is the earliest sample at or after both the event and t[k] - `window_s` (default
  0.5 s), and j < k: the window never reaches back before the event, and it is shorter than `window_s`
  only in the first `window_s` after it.
- No recovery is not a number: `recovery_s` is None and `no_recovery` says why (no live path after the
  event, as for a TCP baseline on the path that failed; goodput never reached the mark; no samples after
  the event).
- `bytes_before` / `bytes_after` per path: from the first sample to the last sample at or before the
  event, and from there to the last sample. `backup_share`: the backup paths' part of all bytes after the
  event (None without backup paths or bytes after).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

DEFAULT_FRACTION = 0.8
DEFAULT_WINDOW_S = 0.5
DEFAULT_HOLD_S = 1.0
STALL_FRACTION = 0.1


@dataclass(frozen=True)
class Recovery:
    event_s: float
    stall_s: Optional[float]
    stall_open: bool
    recovery_s: Optional[float]
    no_recovery: Optional[str]
    bytes_before: dict[str, int]
    bytes_after: dict[str, int]
    backup_share: Optional[float]


def _series(samples: list[dict], paths: list[str]) -> tuple[list[float], list[dict[str, int]]]:
    """Sample times, and each path's bytes since the first sample (a counter that goes back is read as
    no growth, never as negative bytes)."""
    ordered = sorted(samples, key=lambda s: s["t"])
    times = [float(s["t"]) for s in ordered]
    since = []
    base = {p: int(ordered[0].get(p, 0)) for p in paths} if ordered else {}
    high = dict(base)
    for s in ordered:
        for p in paths:
            high[p] = max(high[p], int(s.get(p, 0)))
        since.append({p: high[p] - base[p] for p in paths})
    return times, since


def _stall(times: list[float], totals: list[int], event_s: float, floor_mbps: float) -> tuple[float, bool]:
    longest, start, open_ = 0.0, None, False
    for k in range(1, len(times)):
        if times[k] <= event_s:
            continue
        grew = totals[k] - totals[k - 1]
        if grew == 0 or grew * 8 / (times[k] - times[k - 1]) / 1e6 < floor_mbps:
            start = max(event_s, times[k - 1]) if start is None else start
            if times[k] - start >= longest:
                longest, open_ = times[k] - start, k == len(times) - 1
        else:
            start = None
    return longest, open_


def _windowed(times: list[float], totals: list[int], after: list[int], k: int, window_s: float) -> Optional[float]:
    """Goodput (Mbit/s) over the window that ends at sample k and starts no earlier than the event."""
    j = next(j for j in after if times[j] >= times[k] - window_s)
    if j >= k:
        return None
    return (totals[k] - totals[j]) * 8 / (times[k] - times[j]) / 1e6


def _recovery(times: list[float], totals: list[int], event_s: float, target_mbps: float,
              window_s: float, hold_s: float) -> Optional[float]:
    after = [k for k, t in enumerate(times) if t >= event_s]
    for k in after:
        rate = _windowed(times, totals, after, k, window_s)
        if rate is None or rate < target_mbps:
            continue
        held = all((_windowed(times, totals, after, m, window_s) or 0.0) >= target_mbps
                   for m in after if times[k] < times[m] <= times[k] + hold_s)
        if held:
            return times[k] - event_s
    return None


def recovery(samples: list[dict], paths: list[str], event_s: float, capacity_mbps: float,
             backup: tuple[str, ...] = (), fraction: float = DEFAULT_FRACTION,
             window_s: float = DEFAULT_WINDOW_S, hold_s: float = DEFAULT_HOLD_S) -> Recovery:
    """Stall, recovery and bytes around one event at `event_s`, from a run's per-path samples (see the
    module's docstring for each definition)."""
    times, since = _series(samples, paths)
    totals = [sum(s.values()) for s in since]
    at = max((k for k, t in enumerate(times) if t <= event_s), default=None)
    before = dict(since[at]) if at is not None else {p: 0 for p in paths}
    final = since[-1] if since else {p: 0 for p in paths}
    after = {p: final[p] - before[p] for p in paths}
    backups = [p for p in paths if p in backup]
    after_total = sum(after.values())
    share = sum(after[p] for p in backups) / after_total if backups and after_total else None
    if not times or times[-1] <= event_s:
        return Recovery(event_s, None, False, None, "no samples after the event", before, after, share)
    stall, stall_open = _stall(times, totals, event_s, STALL_FRACTION * max(capacity_mbps, 0.0))
    if capacity_mbps <= 0:
        return Recovery(event_s, stall, stall_open, None, "no path is live after the event", before, after, share)
    took = _recovery(times, totals, event_s, fraction * capacity_mbps, window_s, hold_s)
    why = None if took is not None else (
        f"goodput stayed below {fraction:.0%} of {capacity_mbps:g} Mbit/s for the "
        f"{times[-1] - event_s:.2f} s sampled after the event")
    return Recovery(event_s, stall, stall_open, took, why, before, after, share)
