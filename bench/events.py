"""Benchmark of paths that change during a run (issue 30): writes numbers, asserts nothing.

  - timing: applied minus planned time of 200 netem changes (a flapping blackhole, each a line to
    `tc -batch`) and of 20 interface changes (down/up, each a line to `ip -batch`), p50 and max
  - shape: a rate raised from 10 to 20 Mbit/s in place: how many 100 ms samples until the path carries
    more than 15 Mbit/s, and the qdisc's drops over the run (the change itself must drop nothing)
  - trace: a TCP upload on a path that follows the random-walk trace (1 s steps) for 60 s: per second,
    the rate the receiver got against the trace's (from the 3rd second: what a user sees, TCP's ramp after
    each step up included), and the rate A's shaping (a TBF above netem) sent at in the seconds its queue stayed backlogged
    (the emulator's own following of the trace: the target's "while the sender is backlogged")
  - failover: failover.yaml's MPTCP run, 5 repetitions: recovery_s, mean and coefficient of variation

Usage: python -m bench.events [--backend auto|native|vm] [--out DIR] [--only GROUPS]
Writes DIR/<UTC stamp>/bench.json and bench.md (DIR defaults to bench/out).
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # run as a script too

from bench.run import Bench, group_main  # noqa: E402
from runners.paths import REPO  # noqa: E402
from runners.results.fidelity import backlog_floor  # noqa: E402

GROUPS = ("timing", "shape", "trace", "failover")
TWO_PATHS = """\
name: {name}
topology:
  kind: dual-homed
  paths:
    - {{name: A, bw: {a_bw}, delay: 10ms, queue: 100{a_more}}}
    - {{name: B, bw: 10, delay: 10ms, queue: 100}}
mptcp: {{primary: A}}
traffic: {{duration: {duration}, direction: upload}}
runs: {{compare: [{mode}], repeat: {repeat}, pause: 200ms}}
"""


def scenario(name: str, events: list[str], mode: str = "mptcp", duration: int = 25, a_bw: int = 10,
             a_more: str = "", repeat: int = 1) -> str:
    text = TWO_PATHS.format(name=name, a_bw=a_bw, a_more=a_more, duration=duration, mode=mode, repeat=repeat)
    return text + ("events:\n" + "".join(f"  - {e}\n" for e in events) if events else "")


def backlogged_errors(rows: list[list], wanted_mbps: list[float], delay_ms: float, seconds) -> dict[int, float]:
    """{second: |rate the shaping qdisc sent at - the trace's rate| / the trace's rate} for each of `seconds` in which
    the direction's queue was backlogged for at least 0.8 s of sample intervals. `rows` are the fidelity
    sampler's [t, bytes, packets, drops, backlog, qlen] of one qdisc on the traffic's clock. Backlogged, as
    runners.results.fidelity has it: more bytes queued at both ends of an interval than the delay line holds
    at that second's rate, plus two frames. An interval across a step is left out (two rates in it)."""
    busy: dict[int, list[float]] = {}
    for a, b in zip(rows, rows[1:]):
        sec = int(a[0])
        if int(b[0]) != sec or not 0 <= sec < len(wanted_mbps) or b[0] <= a[0]:
            continue
        floor = backlog_floor({"rate_mbit": wanted_mbps[sec], "delay_ms": delay_ms})
        if a[4] >= floor and b[4] >= floor:
            got = busy.setdefault(sec, [0.0, 0.0])
            got[0] += b[0] - a[0]
            got[1] += b[1] - a[1]
    return {sec: abs(sent * 8 / held / 1e6 - wanted_mbps[sec]) / wanted_mbps[sec]
            for sec, (held, sent) in sorted(busy.items())
            if sec in seconds and held >= 0.8 and wanted_mbps[sec] > 0.5}


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


class EventBench(Bench):
    def timing(self) -> None:
        doc, _ = self.run_scenario("ev-timing", scenario("ev-timing", [
            "{name: a-flap, at: 1s, every: 200ms, until: 21s, path: A, do: [blackhole, restore]}",
            "{name: b-flap, at: 2s, every: 2s, until: 22s, path: B, do: [down, up]}"]))
        changes = [c for r in doc["runs"] for c in r["events"]["changes"] if c.get("applied_s") is not None]
        for label, kinds in (("netem line (tc -batch)", ("blackhole", "restore")), ("ip line (ip -batch)", ("down", "up"))):
            drift = [c["drift_ms"] for c in changes if c["action"] in kinds]
            took = [c["took_ms"] for c in changes if c["action"] in kinds]
            self.add("timing", f"drift p50, {label}", "0 ms", round(_pct(drift, 0.5), 1), "ms",
                     note=f"max {max(drift):.1f} ms over {len(drift)} changes; took p50 {_pct(took, 0.5):.1f} ms, "
                          f"max {max(took):.1f} ms")

    def shape(self) -> None:
        doc, _ = self.run_scenario("ev-shape", scenario("ev-shape", ["{name: a-up, at: 5s, path: A, shape: {bw: 20}}"],
                                                        mode="tcp", duration=10))
        run = doc["runs"][0]
        change = run["events"]["changes"][0]
        series = run["path_series_mbps"]
        after = [s for s in series if s["t"] > change["applied_s"]]
        k = next((i for i, s in enumerate(after) if s["A"] > 15), None)
        self.add("shape", "samples until the new rate shows", "<= 2", k + 1 if k is not None else None, "samples",
                 note="100 ms samples of the receiver's counters after the change")
        raw = self.work / "ev-shape"
        d = sorted(p for p in raw.iterdir() if p.name != "latest")[-1] / "raw" / run["id"]
        drops = {}
        for label in ("before", "after"):
            qd = json.loads((d / f"qdiscs-{label}.json").read_text())
            drops[label] = sum(q.get("drops", 0) for qs in qd.values() for q in qs if q.get("root"))
        self.add("shape", "the shaping qdiscs' drops over the run", 0, drops["after"] - drops["before"], "packets",
                 note="a rate raised in place: any drop would be the change's own")

    def trace(self) -> None:
        from scenarios.spec.traces import load_trace, rate_steps
        trace_file = REPO / "scenarios" / "traces" / "random-walk.trace"
        doc, _ = self.run_scenario("ev-trace", scenario(
            "ev-trace", [], mode="tcp", duration=60, a_bw=8,
            a_more=f", trace: {{to_server: {trace_file}, step: 1s}}"))
        run = doc["runs"][0]
        series = sorted(run["path_series_mbps"], key=lambda s: s["t"])
        wanted = rate_steps(load_trace(trace_file), 1000, 60_000)
        per_second: dict[int, list[float]] = {}
        for s in series:
            per_second.setdefault(int(s["t0"] if "t0" in s else s["t"]), []).append(s["A"])
        errors = []
        for sec in range(3, 59):
            got = per_second.get(sec)
            if got and wanted[sec] > 0.5:
                # both count frames: the shaper's rate the bytes it sends, the series the receiver's interface bytes
                errors.append(abs(statistics.mean(got) - wanted[sec]) / wanted[sec])
        within = sum(1 for e in errors if e <= 0.10) / len(errors) if errors else None
        self.add("trace", "seconds within 10 % of the trace (receiver)", "100 %",
                 None if within is None else round(100 * within, 1), "%",
                 note=f"median error {100 * statistics.median(errors):.1f} % over {len(errors)} s; "
                      f"{run['metrics'].get('event_drift_max_ms')} ms largest step drift")
        raw = sorted(p for p in (self.work / "ev-trace").iterdir() if p.name != "latest")[-1] / "raw" / run["id"]
        rows = json.loads((raw / "fidelity-samples.json").read_text())["qdiscs"].get("h1/h1-eth0", [])
        held = backlogged_errors(rows, wanted, delay_ms=10.0, seconds=range(3, 59))
        within = sum(1 for e in held.values() if e <= 0.10) / len(held) if held else None
        self.add("trace", "backlogged seconds within 10 % of the trace (the shaper sent)", "100 %",
                 None if within is None else round(100 * within, 1), "%",
                 note=(f"median error {100 * statistics.median(held.values()):.1f} %, worst "
                       f"{100 * max(held.values()):.1f} % over the {len(held)} s A's queue stayed backlogged"
                       if held else "A's queue was never backlogged for a whole second"))

    def failover(self) -> None:
        text = (REPO / "scenarios" / "failover.yaml").read_text().replace("compare: [mptcp, tcp]", "compare: [mptcp]") \
            .replace("repeat: 1", "repeat: 5").replace("name: failover", "name: ev-failover")
        doc, _ = self.run_scenario("ev-failover", text)
        values = [r["metrics"]["recovery_s"] for r in doc["runs"]]
        got = [v for v in values if v is not None]
        cov = statistics.stdev(got) / statistics.mean(got) if len(got) > 1 else None
        self.add("failover", "recovery_s CoV, 5 runs", "<= 10 %", None if cov is None else round(100 * cov, 1), "%",
                 note=f"recovery_s {', '.join('none' if v is None else f'{v:.2f}' for v in values)} s")


if __name__ == "__main__":
    print(time.strftime("bench.events %Y-%m-%dT%H:%M:%SZ", time.gmtime()), flush=True)
    sys.exit(group_main("bench.events", __doc__, GROUPS, EventBench,
                        lambda groups: [(REPO / "scenarios" / "failover.yaml").read_text()]))
