"""What a run's fidelity is judged on (runners.results.fidelity, docs/fidelity.md), read while its traffic
flows: every CPU's time (/proc/stat: the machine the namespaces run in, the guest in a VM) and the
counters of every shaped qdisc (rtnetlink: sent bytes, drops, backlog), every 0.1 s, without starting a
process; the receive backlog's drops and squeezes (/proc/net/softnet_stat) before and after.

The traffic tool's per-path sampler starts it on the run's clock and stops it with itself
(runners.traffic.base), so its samples and the per-path series share their time base. `judge` turns what
it saw, with the plan's shaping and the run's pings and events, into the run's `fidelity` section.
TESTBED_FIDELITY_SAMPLING=0 turns the sampling off (to measure what it costs); the run is then judged on
the rest.
"""
from __future__ import annotations

import json
import os
import threading
import time
from typing import Callable

from runners.collect import counters, host_load
from runners.linux import procfs
from runners.results import fidelity

SAMPLE_INTERVAL_S = 0.1
ENV_SWITCH = "TESTBED_FIDELITY_SAMPLING"
RAW_FILE = "fidelity-samples.json"


def sampling_on() -> bool:
    return os.environ.get(ENV_SWITCH, "1") != "0"


class FidelitySampler(threading.Thread):
    """Samples the CPUs and the shaped qdiscs every `interval` s from begin(t0) until stop().

    `read_qdiscs(node, devs)` gives the root qdiscs of `devs` in a node's namespace, as
    runners.linux.rtnetlink parses them; `shaped` names the (node, interface) pairs whose root qdisc is
    kept; `namespace_of(node)` says which nodes share a namespace, read once per sample (default: none do)."""

    def __init__(self, read_qdiscs: Callable[[str, set[str]], list[dict]], shaped: list[tuple[str, str]],
                 interval: float = SAMPLE_INTERVAL_S, on: bool = True,
                 namespace_of: Callable[[str], object] | None = None):
        super().__init__(daemon=True, name="fidelity-sampler")
        self.read_qdiscs, self.interval, self.on = read_qdiscs, interval, on
        self.groups = counters.by_namespace(shaped, namespace_of or (lambda node: node))
        self.t0: float | None = None
        self.wall_t0: float | None = None
        self.cpu: list[list] = []                    # [t, [ticks of cpu0], [ticks of cpu1], ...]
        self.qdiscs: dict[str, list[list]] = {}     # "node/dev" -> [[t, bytes, packets, drops, backlog, qlen]]
        self.softnet: dict[str, dict] = {}
        self.errors: list[str] = []
        self.busy_s = 0.0                            # the sampler's own reading time (wall clock)
        self.cpu_s = 0.0                             # and its thread's CPU time
        self._halt = threading.Event()

    def begin(self, t0: float) -> None:
        """Start sampling on the run's clock (the per-path sampler's t0)."""
        if not self.on or self.t0 is not None:
            return
        self.t0 = t0
        self.wall_t0 = time.time() - (time.monotonic() - t0)   # t0 on the wall clock: the host's rows use it
        self.softnet["before"] = self._softnet()
        self.start()

    def run(self) -> None:
        due = time.monotonic()
        while not self._halt.is_set():
            self._sample()
            due += self.interval
            self._halt.wait(max(0.0, due - time.monotonic()))

    def _sample(self) -> None:
        t0 = self.t0 or 0.0
        start, cpu_start = time.monotonic(), time.thread_time()
        try:
            ticks = procfs.cpu_ticks()
            self.cpu.append([round((start + time.monotonic()) / 2 - t0, 4), *ticks])
        except (OSError, ValueError) as e:
            self._error(f"/proc/stat: {e}")
        for node, devs in self.groups:
            before = time.monotonic()
            try:
                qdiscs = self.read_qdiscs(node, set(devs))
            except Exception as e:   # a namespace gone mid-run: keep what was read, say so
                self._error(f"{node}'s qdiscs: {e}")
                continue
            t = round((before + time.monotonic()) / 2 - t0, 4)
            for q in qdiscs:
                if q.get("root") and q.get("dev") in devs:
                    self.qdiscs.setdefault(f"{devs[q['dev']]}/{q['dev']}", []).append(
                        [t, q.get("bytes", 0), q.get("packets", 0), q.get("drops", 0), q.get("backlog", 0),
                         q.get("qlen", 0)])
        self.busy_s += time.monotonic() - start
        self.cpu_s += time.thread_time() - cpu_start

    def _error(self, text: str) -> None:
        if len(self.errors) < 5:
            self.errors.append(text)

    def _softnet(self) -> dict | None:
        try:
            return procfs.parse_softnet(procfs.softnet_text())
        except (OSError, ValueError) as e:
            self._error(f"/proc/net/softnet_stat: {e}")
            return None

    def stop(self) -> None:
        if self.t0 is None or self._halt.is_set():
            return
        self._halt.set()
        self.join(timeout=10)
        self.softnet["after"] = self._softnet()

    def samples(self) -> dict | None:
        """What was sampled, as `fidelity-samples.json` keeps it; None when nothing was (sampling off, or
        the tool never started its per-path sampler)."""
        if self.t0 is None:
            return None
        return {"interval_s": self.interval, "cpu_fields": list(procfs.CPU_FIELDS), "cpu": self.cpu,
                "qdisc_fields": ["t", "bytes", "packets", "drops", "backlog", "qlen"], "qdiscs": self.qdiscs,
                "softnet": self.softnet, "errors": self.errors, "wall_t0": round(self.wall_t0, 4),
                "busy_s": round(self.busy_s, 4),
                "cpu_s": round(self.cpu_s, 4)}


def for_run(ctx) -> FidelitySampler:
    """The sampler of one run on the runner's network (`ctx`: the RunContext), left on ctx for the traffic
    tool's per-path sampler to start."""
    shaped = [(i.node, i.name) for i in ctx.plan.shaped_interfaces()]
    sampler = FidelitySampler(ctx.counters.qdiscs, shaped, on=sampling_on(), namespace_of=ctx.counters.namespace_of)
    ctx.fidelity = sampler
    return sampler


def configured(plan) -> tuple[list[dict], dict[str, dict]]:
    """The plan's shaping as the judgement reads it: every shaped direction (node/interface, its rate,
    delay, loss and limit, the paths that send through it) and every path's configured RTT (the one-way
    delays of both directions summed, with an echo's serialization at each rate); a path whose links the
    switches choose has no configured RTT (None)."""
    shaping = {(i.node, i.name): i.shaping for i in plan.shaped_interfaces()}
    through: dict[tuple[str, str], list[str]] = {}
    paths = {}
    for p in plan.paths:
        hops = list(p.egress_up) + list(p.egress_down)
        for hop in hops:
            through.setdefault(hop, []).append(p.name)
        if not hops or any(h not in shaping for h in hops):
            paths[p.name] = {"rtt_ms": None}
            continue
        paths[p.name] = {"rtt_ms": sum(shaping[h].delay_ms for h in hops), "hops": [f"{n}/{d}" for n, d in hops],
                         "echo_ms": sum(fidelity.ECHO_BYTES * 8 / (shaping[h].rate_mbit * 1e3) for h in hops)}
    directions = [{"id": f"{node}/{dev}", "rate_mbit": s.rate_mbit, "delay_ms": s.delay_ms, "loss_pct": s.loss_pct,
                   "limit_pkts": s.limit_pkts, "paths": sorted(set(through.get((node, dev), [])))}
                  for (node, dev), s in shaping.items()]
    return directions, paths


def judge(ctx, results: list[dict], seen, run_id: str) -> None:
    """Each record's `fidelity` section (one judgement for a job's runs: they shared the machine), the
    samples beside the run, and a warning line when the run was not faithful."""
    sampler = getattr(ctx, "fidelity", None)
    ctx.fidelity = None
    samples = sampler.samples() if sampler is not None else None
    if samples is not None:
        ctx.store.save_raw(run_id, RAW_FILE, json.dumps(samples) + "\n")
    directions, paths = configured(ctx.plan)
    host, host_note = _host_load(ctx.store.dir, samples) if ctx.host_rows else (None, None)
    for result in results:
        section = fidelity.judge(fidelity.Evidence(
            directions=directions, paths=paths, pings=seen.pings, samples=samples,
            qdisc_before=_keyed(seen.before.get("qdiscs", {})), qdisc_after=_keyed(seen.after.get("qdiscs", {})),
            link_drops=_link_drops(seen.before, seen.after), events=result.get("events"),
            kernel_debug=ctx.probe.facts.get("kernel_debug") or [],
            sampling=None if samples is not None or sampling_on() else f"{ENV_SWITCH}=0",
            run_paths=list(result.get("paths") or []), sender_rtt_ms=result["metrics"].get("sender_mean_rtt_ms"),
            retrans_segs=result["metrics"].get("retrans_segs"), host_cpu=host, host_cpu_note=host_note))
        result["fidelity"] = section
        if section["status"] != fidelity.OK:
            ctx.log(f"warning: run {result['id']}: fidelity {section['status']}: {'; '.join(section['reasons'])}")


def _host_load(folder, samples: dict | None) -> tuple[dict | None, str | None]:
    """In a VM's guest, the host's CPU over the run's traffic (runners.collect.host_load), or why not."""
    if samples is None or samples.get("wall_t0") is None:
        return None, "not sampled in the guest"
    window = fidelity.traffic_window(samples)
    if window is None:   # nothing shaped sent: the whole sampling
        rows = samples.get("cpu") or []
        window = (rows[0][0], rows[-1][0]) if rows else None
    if window is None:
        return None, "no traffic window"
    return host_load.over_window(folder, samples["wall_t0"] + window[0], samples["wall_t0"] + window[1])


def _keyed(qdiscs: dict) -> dict[str, dict]:
    return {f"{node}/{dev}": counts for (node, dev), counts in qdiscs.items()}


def _link_drops(before: dict, after: dict) -> dict[str, int]:
    """Packets the hosts' interfaces dropped during the run (rx_dropped + tx_dropped), by side/interface."""
    out = {}
    for side in ("client", "server"):
        b, a = before.get(f"{side}_links") or {}, after.get(f"{side}_links") or {}
        for dev, counts in a.items():
            if dev in b and dev != "lo":
                n = sum(counts[k] - b[dev][k] for k in ("rx_dropped", "tx_dropped"))
                if n:
                    out[f"{side}/{dev}"] = n
    return out
