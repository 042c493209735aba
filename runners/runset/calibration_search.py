"""`run-scenario calibrate`'s search, pure: which probes to run, in which order, and what their outcomes
say. The CLI (runners.cli.calibrate) runs each probe as a one-run scenario and hands back its record.

A probe is one short run (PROBE_SECONDS of traffic): n disjoint paths at a rate each, a TCP flow on each,
all at once (runs.tcp_together), or n clients on a switch at a rate each. It is reproduced (rule()) when
each of its runs' fidelity is `ok` and together they carried at least MIN_CARRIED of the configured rate:
a sender the machine cannot drive to the rate never fills the queues, so the shaping checks have nothing
to judge, yet the path did not deliver what it was configured to.

The search for each dimension: from a start, double while probes pass (halve while they fail) until
one passes and the next fails, then bisect (geometrically for rates, to two significant digits) until
the two are within RESOLUTION of each other; then probe the value found once more (CONFIRM), and if it
fails, go on below it. Every probe is skipped once the time budget would be exceeded, and the bracket
found so far is kept (its `confirmed` says whether the value passed twice)."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Callable

from runners.results.fidelity import RANK

# 8 s, not 3: in 3 s runs in the TCG micro-VM the shaping check's second or two of backlog read a shaper
# at 90-95 % of its rate as often as not (docs/fidelity.md: two calibrations of 3 s probes, 2026-11-25;
# the probes of several paths were MPTCP then, whose eight subflows had not all joined in 3 s).
# Eight-second probes fit the same budget with fewer bisection steps.
PROBE_SECONDS = 8.0
# left out of the probe's figures (iperf3 --omit): TCP's start. A 3 s run of one 100 Mbit/s path carried
# 83 % of it in the TCG micro-VM with the start counted, against 95 % (its payload's share) over 10 s
PROBE_OMIT_S = 1
PROBE_DELAY_MS = 5.0        # one way, every probe's links: a 10 ms RTT, queues fill within a second
PROBE_QUEUE = 100
MIN_CARRIED = 0.85          # of the configured rate: TCP's payload is 95.6 % of what netem counts
RESOLUTION = 0.10           # bisect until the passing and the failing rate are within 10 %
# the limit found is probed a second time, and must pass again. In the TCG micro-VM a shaper fell behind
# gradually (93-96 % of its rate over 59-84 Mbit/s on one path of two), so one probe near the limit passed
# or failed by chance: two calibrations back to back found 59 and 76 Mbit/s for 2 paths (docs/fidelity.md)
CONFIRM = True
RATE_FLOOR, RATE_CEILING, RATE_START = 1.0, 10000.0, 100.0   # Mbit/s per path
# Mbit/s per client: the default scenario's rate. At E5's 25 Mbit/s even 4 clients were unfaithful in
# the TCG micro-VM (CPUs saturated in half the samples), which leaves no count to compare plans with
HOST_RATE = 10.0
MAX_CLIENTS = 16            # a switched topology's most clients
MIN_CLIENTS = 2
def rule(seconds: float = PROBE_SECONDS) -> str:
    """The rule in words, for probes of `seconds` of traffic."""
    return (f"a probe ({seconds:g} s of traffic after {PROBE_OMIT_S} s of start left out; a TCP flow on each path "
            f"or from each client, all at once) is reproduced when its fidelity is ok (each path's flow is a run "
            f"of its own, and each must be) and together they carried at least {MIN_CARRIED:.0%} of the "
            f"configured rate; the limit is the highest reproduced, bisected to within {RESOLUTION:.0%} of the "
            f"lowest not reproduced, and reproduced again by a second probe" + ("" if CONFIRM else " (not asked)"))


@dataclass
class Outcome:
    """One probe's record, as the search reads it."""
    kind: str                  # "paths" or "hosts"
    count: int                 # paths at once, or clients
    rate: float                # Mbit/s per path or per client
    status: str | None         # the run's fidelity status (None: the run failed)
    carried_mbps: float | None
    reasons: list[str] = field(default_factory=list)
    delay_excess_ms: list[float] = field(default_factory=list)   # per path: RTT floor minus configured
    seconds: float = 0.0
    folder: str = ""

    @property
    def configured_mbps(self) -> float:
        return self.count * self.rate

    @property
    def passed(self) -> bool:
        return (self.status == "ok" and self.carried_mbps is not None
                and self.carried_mbps >= MIN_CARRIED * self.configured_mbps)

    def why(self) -> str:
        """Why it did not pass, in words ('' when it did)."""
        if self.passed:
            return ""
        if self.status is None:
            return "; ".join(self.reasons) or "the run failed"
        if self.status != "ok":
            return f"fidelity {self.status}: " + "; ".join(self.reasons)
        return (f"carried {self.carried_mbps or 0:.3g} of {self.configured_mbps:g} Mbit/s "
                f"(< {MIN_CARRIED:.0%})")

    def to_dict(self) -> dict:
        return {"kind": self.kind, "count": self.count, "rate_mbit": self.rate, "status": self.status,
                "carried_mbps": self.carried_mbps, "passed": self.passed, "why": self.why(),
                "delay_excess_ms": self.delay_excess_ms, "seconds": round(self.seconds, 2), "folder": self.folder}


def outcome_of(kind: str, count: int, rate: float, doc: dict | None, failure: str = "") -> Outcome:
    """A probe's outcome from its results.json (None: the run wrote none). Flows run together are one run
    record each: the probe is as faithful as its worst, carried their sum, and says every reason once. Each
    record judges every path's idle RTT (the pings are the job's): one figure per path, not per record."""
    runs = (doc or {}).get("runs") or []
    if not runs:
        return Outcome(kind, count, rate, None, None, [failure or "no run was recorded"])
    missing = []
    if kind == "paths" and len(runs) != count:
        missing.append(f"{len(runs)} of {count} flows recorded")
    missing += [f"run {r.get('id', '?')} {r.get('status')}" for r in runs if r.get("status") != "ok"]
    missing += [f"run {r.get('id', '?')} has no throughput" for r in runs
                if r.get("status") == "ok" and (r.get("metrics") or {}).get("throughput_mbps") is None]
    missing += [f"run {r.get('id', '?')} has no fidelity record" for r in runs
                if r.get("status") == "ok" and not (r.get("fidelity") or {}).get("status")]
    fids = [r.get("fidelity") or {} for r in runs]
    # the worst status; one the fidelity check does not know counts worse than unfaithful
    status = None if missing else max((f["status"] for f in fids), key=lambda x: RANK.get(x, len(RANK)))
    carried = None if missing else round(sum(r["metrics"]["throughput_mbps"] for r in runs), 3)
    reasons = list(dict.fromkeys(x for f in fids for x in f.get("reasons") or ())) + missing
    delay = {name: d.get("excess_ms") for f in fids for name, d in ((f.get("checks") or {}).get("delay") or {}).items()}
    return Outcome(kind, count, rate, status, carried, reasons, [x for x in delay.values() if x is not None])


def two_digits(x: float) -> float:
    """`x` rounded to two significant digits (283 -> 280): rates a reader can compare."""
    if x <= 0:
        return x
    scale = 10 ** (math.floor(math.log10(x)) - 1)
    return round(x / scale) * scale


def rate_middle(lo: float, hi: float) -> float | None:
    """The next rate to try between a passing `lo` and a failing `hi`; None once within RESOLUTION."""
    if hi <= lo * (1 + RESOLUTION):
        return None
    mid = two_digits(math.sqrt(lo * hi))
    return mid if lo < mid < hi else None


def count_middle(lo: int, hi: int) -> int | None:
    return (lo + hi) // 2 if hi - lo > 1 else None


@dataclass
class Bracket:
    value: float | None = None       # the highest that passed
    failed_at: float | None = None   # the lowest that failed above it
    probes: int = 0
    confirmed: bool = False          # `value` passed a second probe too (CONFIRM)
    refuted: list[float] = field(default_factory=list)   # values that passed once and then failed

    def to_dict(self) -> dict:
        return {"value": self.value, "failed_at": self.failed_at, "probes": self.probes,
                "confirmed": self.confirmed, "refuted": self.refuted}


def bracket(passes: Callable[[float], bool], start: float, floor: float, ceiling: float,
            grow: Callable[[float], float], shrink: Callable[[float], float],
            middle: Callable[[float, float], float | None], out_of_time: Callable[[], bool],
            confirm: bool = CONFIRM) -> Bracket:
    """The highest value that passes: up by `grow` while probes pass, down by `shrink` while they fail,
    then `middle` between the two until it says they are close enough. With `confirm`, the value found
    is probed once more: one that fails then is refuted, and the search goes on below it from the highest
    value that never failed. Stops early when out of time, keeping what it found."""
    b = Bracket()
    seen: dict[float, list[bool]] = {}

    def probe(x: float) -> bool:
        b.probes += 1
        seen.setdefault(x, []).append(passes(x))
        return seen[x][-1]

    _find(b, probe, start, floor, ceiling, grow, shrink, out_of_time)
    _bisect(b, probe, middle, out_of_time)
    while confirm and b.value is not None and not b.confirmed and not out_of_time():
        if probe(b.value):
            b.confirmed = True
            break
        b.refuted.append(b.value)
        b.failed_at = b.value
        below = [x for x, rs in seen.items() if x < b.value and all(rs)]
        b.value = max(below) if below else None
        if b.value is None:
            _find(b, probe, max(shrink(b.failed_at), floor), floor, ceiling, grow, shrink, out_of_time)
        _bisect(b, probe, middle, out_of_time)
    return b


def _find(b: Bracket, probe: Callable[[float], bool], x: float, floor: float, ceiling: float,
          grow: Callable[[float], float], shrink: Callable[[float], float], out_of_time: Callable[[], bool]) -> None:
    """Up while probes pass, down while they fail, from `x`, until one passed and one above it failed
    (or the floor failed, or the ceiling passed)."""
    while not out_of_time():
        if probe(x):
            b.value = x
        else:
            b.failed_at = x
        if b.value is not None and b.failed_at is not None:
            return
        if b.failed_at is None:            # all passed so far
            if b.value >= ceiling:
                return
            x = min(grow(b.value), ceiling)
        else:                              # all failed so far
            if b.failed_at <= floor:
                return
            x = max(shrink(b.failed_at), floor)


def _bisect(b: Bracket, probe: Callable[[float], bool], middle: Callable[[float, float], float | None],
            out_of_time: Callable[[], bool]) -> None:
    while b.value is not None and b.failed_at is not None and not out_of_time():
        m = middle(b.value, b.failed_at)
        if m is None:
            return
        if probe(m):
            b.value = m
        else:
            b.failed_at = m


def search_paths(measure: Callable[[int, float], bool], counts, out_of_time: Callable[[], bool],
                 start: float = RATE_START, ceiling: float = RATE_CEILING) -> dict[str, dict]:
    """Per count of paths at once, the highest rate per path that passes. The first count starts at
    `start`; each next one at the aggregate the previous one carried, shared among its paths."""
    found: dict[str, dict] = {}
    guess = start
    for n in counts:
        b = bracket(lambda r, n=n: measure(n, r), two_digits(max(RATE_FLOOR, guess)), RATE_FLOOR, ceiling,
                    lambda r: two_digits(r * 2), lambda r: two_digits(r / 2), rate_middle, out_of_time)
        found[str(n)] = b.to_dict()
        carried = b.value if b.value is not None else (b.failed_at or guess) / 2
        nxt = next((m for m in counts if m > n), None)
        if nxt:
            guess = carried * n / nxt
    return found


def search_hosts(measure: Callable[[int], bool], out_of_time: Callable[[], bool], start: int = 4) -> dict:
    """The most clients on one switch, each at HOST_RATE, that pass."""
    b = bracket(lambda n: measure(int(n)), start, MIN_CLIENTS, MAX_CLIENTS, lambda n: min(MAX_CLIENTS, n * 2),
                lambda n: max(MIN_CLIENTS, n // 2), count_middle, out_of_time)
    return b.to_dict()


def delay_figures(outcomes: list[Outcome]) -> dict:
    """The RTT floor above the configured RTT, over the idle paths of every probe that passed (the pings
    before its traffic). The smallest RTT its median is within 10 % of is the readers' (calibration.
    rtt_within_10pct)."""
    xs = [x for o in outcomes if o.passed for x in o.delay_excess_ms]
    if not xs:
        return {"samples": 0}
    return {"samples": len(xs), "min_ms": round(min(xs), 2), "median_ms": round(statistics.median(xs), 2),
            "max_ms": round(max(xs), 2)}


def paths_yaml(count: int, rate: float, seconds: float = PROBE_SECONDS, mptcp: bool = False) -> str:
    """A probe of `count` disjoint paths at `rate` each: a TCP flow on each, all at once (`mptcp`: one MPTCP
    connection over them, a plan like a user's). Not MPTCP: what is measured is the emulator's shaping of
    that many queues, and MPTCP's subflows join one after another (in the TCG micro-VM 8 x 2.5 Mbit/s
    carried under 85 % of its rate in 8 s, so a calibration said eight paths carried nothing;
    docs/fidelity.md). A plan is held to it by its flows at once, MPTCP's or TCP's (runners.runset.limits)."""
    names = [chr(ord("A") + i) for i in range(count)]
    lines = [f"name: calibrate-{count}-paths", "topology:", "  kind: dual-homed", "  paths:"]
    lines += [f"    - {{name: {x}, bw: {rate:g}, delay: {PROBE_DELAY_MS:g}ms, queue: {PROBE_QUEUE}}}" for x in names]
    lines += ["traffic:", f"  duration: {seconds:g}", f"  omit: {PROBE_OMIT_S}", "runs:"]
    if mptcp:
        lines += ["  compare: [mptcp]"]
    else:
        lines += ["  compare: [tcp]"] + (["  tcp_on: every-path", "  tcp_together: true"] if count > 1 else [])
    lines += ["  pause: 200ms"]
    return "\n".join(lines) + "\n"


def hosts_yaml(clients: int, rate: float = HOST_RATE, seconds: float = PROBE_SECONDS) -> str:
    """A probe of `clients` clients on one Linux bridge, each on its own link at `rate`, all sending TCP
    at once to the server, whose link is not shaped (so the clients' links are the bottlenecks)."""
    names = [f"h{i}" for i in range(2, clients + 2)]
    lines = [f"name: calibrate-{clients}-clients", "topology:", "  kind: switched", "  server: h1",
             f"  clients: [{', '.join(names)}]", "  switches:", "    - {name: s1, type: bridge}", "  links:",
             "    - {name: srv, between: [h1, s1]}"]
    lines += [f"    - {{name: l{h}, between: [{h}, s1], bw: {rate:g}, delay: {PROBE_DELAY_MS:g}ms, "
              f"queue: {PROBE_QUEUE}}}" for h in names]
    lines += ["  paths:", "    - {name: A, client_if: 0, server_if: 0}", "traffic:", f"  duration: {seconds:g}",
              f"  omit: {PROBE_OMIT_S}", "runs:", "  compare: [tcp]", "  pause: 200ms"]
    return "\n".join(lines) + "\n"
