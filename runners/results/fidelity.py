"""Did the emulator keep up? A run's fidelity: `ok`, `warn` or `unfaithful`, each reason in words, and the
figures behind it (docs/fidelity.md). Pure: runners.collect.fidelity_sampler hands in what was read, and
the tests feed it recorded runs.

When a machine cannot keep up, Mininet and netem do not fail: links get slower, RTTs longer, events late.
The checks, each against a tolerance below (chosen from measured runs; docs/fidelity.md has the figures):
  - cpu: the machine's CPUs during the traffic (0.1 s samples of /proc/stat): no idle time in most of
    them means every part of the emulation waited for a CPU; steal, the hypervisor taking the CPU away;
  - shaping: while a shaped direction is backlogged (more bytes queued than its delay line holds), it
    sends at its configured rate (Mininet-HiFi's invariant), within RATE_TOLERANCE;
  - loss: netem's drops against the configured loss; drops beyond it only where the queue filled up;
  - drops: packets dropped outside the shaping (the kernel's input backlog, the interfaces); segments
    the sender retransmitted beyond what the shaping dropped (spurious: timeouts and reordering from a
    late emulation);
  - delay: the RTT floor of the pings before the run against the configured RTT; and during the traffic,
    the sender's mean RTT against what the configured delays and the sampled queues explain (an emulator
    that falls behind delays every packet, whether or not the queues fill);
  - events: each change and trace step applied within the drift bound of its planned time;
  - kernel: a debug kernel (kmemleak, lockdep, KASAN), several times slower at networking.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

OK, WARN, UNFAITHFUL = "ok", "warn", "unfaithful"
RANK = {OK: 0, WARN: 1, UNFAITHFUL: 2}

ECHO_BYTES = 98            # a ping echo on the wire: 56 data bytes, ICMP 8, IPv4 20, Ethernet 14
MTU_FRAME = 1514           # the largest frame netem counts (segmentation offload is one segment per packet)

# cpu: a 0.1 s sample with less idle time than this (of all CPUs together) is saturated
CPU_SATURATED_IDLE = 0.05
CPU_WARN_SHARE = 0.20        # saturated in this share of the traffic's samples: warn
CPU_UNFAITHFUL_SHARE = 0.50  # ... unfaithful
ONE_CPU_WARN_SHARE = 0.25    # one CPU (a flow's softirq, its sender) saturated in this share: warn
# steal (a hypervisor running something else on the machine's CPUs) is already missing from the idle time
# the checks above and the host's read, so it warns on its own only where it left the emulation next to no
# CPU to spare (less than HOST_SPARE_CORES idle), or where it is heavy: a cloud machine's few per cent of
# steal beside idle CPUs (5 % on 2026-11-27, every run of the default scenario then sending at its rate)
# cost the emulation nothing the rate, delay and retransmission checks could see.
STEAL_WARN = 0.05            # the hypervisor took this share of the CPU time, with little idle left: warn
STEAL_HEAVY = 0.25           # ... this share, whatever was left idle: warn
# a VM's host: other processes used more than this many CPUs' worth during the traffic while it had less than
# HOST_SPARE_CORES idle: warn (and the set's line, runners.backends.vm.host). Both, so that a browser on a
# 16-core workstation is not taken for a host the emulation waited on.
HOST_OTHERS_WARN_CORES = 0.5
HOST_SPARE_CORES = 0.5
MIN_CPU_SAMPLES = 5
# shaping: the dequeue rate while backlogged, against the configured rate
RATE_TOLERANCE = 0.05
MIN_BACKLOGGED_S = 1.0     # judged only over at least this much backlogged time
SAMPLE_S = 0.1             # the sampler's interval (runners.collect.fidelity_sampler)
AT_LIMIT = 0.95            # a queue holding this share of its limit is at the limit
NEAR_LIMIT = 0.50          # a queue that reached this share of its limit may have overflowed between samples
# loss: netem's drop share against the configured loss, over at least MIN_LOSS_PACKETS
LOSS_SIGMAS, LOSS_RELATIVE, MIN_LOSS_PACKETS = 3.0, 0.10, 1000
UNEXPLAINED_DROP_SHARE = 0.005   # drops beyond the loss, with a queue never near its limit: warn above this
# retransmitted segments beyond the packets the run's shaped directions dropped: warn above the larger
# of these (the labs and the default scenario: at most +25; 4 x 300 Mbit/s: +62 on TCP, +451 on MPTCP)
SPURIOUS_RETRANS, SPURIOUS_RETRANS_SHARE = 50, 0.0002
# delay: the ping RTT floor minus the configured RTT, with an allowance per shaped hop the echo crosses
# (the TCG micro-VM reads +0.6..+4.5 ms on two hops, +3.3..+7.4 ms on a routed path's six)
RTT_BELOW_MS = 0.5
RTT_WARN_MS, RTT_WARN_PER_HOP_MS, RTT_WARN_SHARE = 3.0, 1.0, 0.02
RTT_UNFAITHFUL_MS, RTT_UNFAITHFUL_PER_HOP_MS, RTT_UNFAITHFUL_SHARE = 10.0, 2.0, 0.10
# the sender's mean RTT during the traffic minus the most any of the run's paths explains (its delays,
# its longest sampled queues, a full frame's transmission at each hop): the default scenario and the
# labs stay below it, a 300 Mbit/s path of 5 ms each way reads +5.3 ms over 10.4 ms (docs/fidelity.md)
LOAD_RTT_WARN_MS, LOAD_RTT_WARN_SHARE = 2.0, 0.10
LOAD_RTT_UNFAITHFUL_MS, LOAD_RTT_UNFAITHFUL_SHARE = 2.0, 0.25
# events: when the run's section gives none, runners.collect.event_record's bound
DRIFT_BOUND_MS = 100.0

TOLERANCES = {
    "cpu_saturated_idle": CPU_SATURATED_IDLE, "cpu_warn_share": CPU_WARN_SHARE,
    "cpu_unfaithful_share": CPU_UNFAITHFUL_SHARE, "steal_warn": STEAL_WARN, "rate_tolerance": RATE_TOLERANCE,
    "min_backlogged_s": MIN_BACKLOGGED_S, "loss_sigmas": LOSS_SIGMAS, "loss_relative": LOSS_RELATIVE,
    "spurious_retrans": SPURIOUS_RETRANS, "spurious_retrans_share": SPURIOUS_RETRANS_SHARE,
    "rtt_below_ms": RTT_BELOW_MS, "rtt_warn_ms": RTT_WARN_MS, "rtt_warn_per_hop_ms": RTT_WARN_PER_HOP_MS,
    "rtt_warn_share": RTT_WARN_SHARE, "rtt_unfaithful_ms": RTT_UNFAITHFUL_MS,
    "rtt_unfaithful_per_hop_ms": RTT_UNFAITHFUL_PER_HOP_MS, "rtt_unfaithful_share": RTT_UNFAITHFUL_SHARE,
    "one_cpu_warn_share": ONE_CPU_WARN_SHARE, "load_rtt_warn_ms": LOAD_RTT_WARN_MS,
    "load_rtt_warn_share": LOAD_RTT_WARN_SHARE, "load_rtt_unfaithful_ms": LOAD_RTT_UNFAITHFUL_MS,
    "load_rtt_unfaithful_share": LOAD_RTT_UNFAITHFUL_SHARE, "host_others_warn_cores": HOST_OTHERS_WARN_CORES,
    "host_spare_cores": HOST_SPARE_CORES, "steal_heavy": STEAL_HEAVY,
}


@dataclass
class Evidence:
    """What one run's judgement reads (all plain data)."""
    directions: list[dict]          # shaped directions: id "node/dev", rate_mbit, delay_ms, loss_pct, limit_pkts, paths
    paths: dict[str, dict]          # path -> {"rtt_ms": configured (None: unknown), "echo_ms", "hops": direction ids}
    pings: dict[str, dict]          # path -> runners.collect.pings' parse (rtt_min_ms)
    samples: dict | None = None     # fidelity-samples.json (None: not sampled)
    qdisc_before: dict[str, dict] = field(default_factory=dict)   # "node/dev" -> {"packets", "drops"}
    qdisc_after: dict[str, dict] = field(default_factory=dict)
    link_drops: dict[str, int] = field(default_factory=dict)      # "side/dev" -> packets dropped
    events: dict | None = None      # the record's `events` section
    kernel_debug: list[str] = field(default_factory=list)
    sampling: str | None = None     # why nothing was sampled, when it was turned off
    run_paths: list[str] = field(default_factory=list)   # the paths the run's traffic used
    sender_rtt_ms: float | None = None                    # the sender's mean smoothed RTT (iperf3)
    retrans_segs: int | None = None                       # segments the sender's namespace retransmitted
    host_cpu: dict | None = None        # a VM's host over the traffic (runners.linux.host_cpu.window_shares)
    host_cpu_note: str | None = None    # why a VM's host figures are missing


class Findings:
    """The checks' outcomes as they are found: the worst status wins; each reason is kept in words, with
    its level."""

    def __init__(self):
        self.status, self.found, self.notes, self.checks = OK, [], [], {}

    def flag(self, status: str, reason: str) -> None:
        if RANK[status] > RANK[self.status]:
            self.status = status
        self.found.append((status, reason))

    def section(self) -> dict:
        found = sorted(self.found, key=lambda f: -RANK[f[0]])   # the worst first, in the order found
        return {"status": self.status, "reasons": [r for _, r in found], "levels": [s for s, _ in found],
                "notes": self.notes, "checks": self.checks, "tolerances": TOLERANCES}


def judge(ev: Evidence) -> dict:
    """The run's `fidelity` section: status, reasons (words, worst first), notes (what was not judged and
    why), each check's figures, and the tolerances they were held to."""
    v = Findings()
    window = traffic_window(ev.samples)
    changed_at = first_change_s(ev.events)
    _cpu(v, ev, window)
    _shaping(v, ev, first_change_s(ev.events, ignoring=RATE_KEPT), changed_at)
    _loss(v, ev, changed_at)
    _drops(v, ev)
    _retransmissions(v, ev, changed_at)
    _delay(v, ev)
    _load_rtt(v, ev, window, changed_at)
    _events(v, ev.events)
    _host(v, ev)
    if ev.kernel_debug:
        v.checks["kernel"] = {"debug": list(ev.kernel_debug)}
        v.flag(WARN, f"a debug kernel ({', '.join(ev.kernel_debug)}): its network stack is several times slower")
    if ev.sampling:
        v.notes.append(f"CPU and queues not sampled ({ev.sampling})")
    elif ev.samples is None:
        v.notes.append("CPU and queues not sampled: the traffic tool started no per-path sampler")
    elif ev.samples.get("errors"):
        v.notes.append("sampling failed at times: " + "; ".join(ev.samples["errors"]))
    return v.section()


def traffic_window(samples: dict | None) -> tuple[float, float] | None:
    """(first, last) time a shaped qdisc sent more than two full frames within one 0.1 s sample: the
    traffic, without the tool's start-up and end; None without qdisc samples."""
    busy = [(a[0], b[0]) for rows in ((samples or {}).get("qdiscs") or {}).values()
            for a, b in zip(rows, rows[1:]) if b[1] - a[1] > 2 * MTU_FRAME]
    return (min(s for s, _ in busy), max(e for _, e in busy)) if busy else None


# Actions that leave every shaped direction's rate as configured: a link down or up (its qdisc stays, reset),
# a blackhole (netem's loss 100 % with its rate kept: what was queued still leaves at the rate) and its
# restore, a priority flag or an endpoint. The shaping check holds across them.
RATE_KEPT = frozenset({"down", "up", "blackhole", "restore", "backup", "nobackup", "endpoint-remove",
                       "endpoint-add"})


def first_change_s(events: dict | None, ignoring: frozenset = frozenset()) -> float | None:
    """When the run's first change (event or trace step) was applied: the shaping differs after it. With
    `ignoring` (RATE_KEPT), the first change of another action: a `shape`, a trace step, or an action not
    known to keep the rates, until which the shaping is held to the configured rates."""
    changes = [c for c in (events or {}).get("changes", []) if c.get("action") not in ignoring]
    times = [c["applied_s"] for c in changes + (events or {}).get("trace_steps", [])
             if c.get("applied_s") is not None]
    return min(times) if times else None


def cpu_intervals(samples: dict, window: tuple[float, float] | None) -> list[dict]:
    """Per 0.1 s sample inside the window: the shares of idle (with iowait), softirq and steal of all CPUs
    together, and the least idle CPU's idle share."""
    fields = samples.get("cpu_fields") or ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"]
    idle, iowait, softirq, steal = (fields.index(k) for k in ("idle", "iowait", "softirq", "steal"))
    out = []
    rows = samples.get("cpu") or []
    for a, b in zip(rows, rows[1:]):
        mid = (a[0] + b[0]) / 2
        if window is not None and not window[0] <= mid <= window[1]:
            continue
        deltas = [[y - x for x, y in zip(ca, cb)] for ca, cb in zip(a[1:], b[1:])]
        totals = [sum(d) for d in deltas]
        total = sum(totals)
        if total <= 0:
            continue
        out.append({"idle": sum(d[idle] + d[iowait] for d in deltas) / total,
                    "softirq": sum(d[softirq] for d in deltas) / total,
                    "steal": sum(d[steal] for d in deltas) / total,
                    "busiest_idle": min((d[idle] + d[iowait]) / t for d, t in zip(deltas, totals) if t > 0)})
    return out


def _cpu(v: Findings, ev: Evidence, window) -> None:
    if ev.samples is None:
        return
    iv = cpu_intervals(ev.samples, window)
    if len(iv) < MIN_CPU_SAMPLES:
        v.notes.append(f"CPU not judged: {len(iv)} sample(s) during the traffic")
        return
    n = len(iv)
    saturated = sum(i["idle"] < CPU_SATURATED_IDLE for i in iv) / n
    one_saturated = sum(i["busiest_idle"] < CPU_SATURATED_IDLE for i in iv) / n
    mean = {k: sum(i[k] for i in iv) / n for k in ("idle", "softirq", "steal")}
    v.checks["cpu"] = {"samples": n, "window_s": [round(w, 2) for w in window] if window else None,
                       "idle_pct": _pct(mean["idle"]), "softirq_pct": _pct(mean["softirq"]),
                       "steal_pct": _pct(mean["steal"]), "saturated_pct": _pct(saturated),
                       "one_cpu_saturated_pct": _pct(one_saturated)}
    text = (f"the CPUs had no idle time (< {CPU_SATURATED_IDLE:.0%}) in {saturated:.0%} of the traffic's "
            f"{n} samples (mean idle {mean['idle']:.0%}, softirq {mean['softirq']:.0%})")
    if saturated >= CPU_UNFAITHFUL_SHARE:
        v.flag(UNFAITHFUL, text + ": the emulation waited for CPU")
    elif saturated >= CPU_WARN_SHARE:
        v.flag(WARN, text)
    elif one_saturated >= ONE_CPU_WARN_SHARE:
        v.flag(WARN, f"one CPU had no idle time in {one_saturated:.0%} of the traffic's {n} samples (mean idle "
                     f"{mean['idle']:.0%}, softirq {mean['softirq']:.0%})")
    cpus = len(ev.samples["cpu"][0]) - 1
    if steal_mattered(mean["steal"], mean["idle"] * cpus):
        v.flag(WARN, f"the hypervisor took {mean['steal']:.0%} of the CPU time (steal), with "
                     f"{mean['idle']:.0%} left idle")


def _host(v: Findings, ev: Evidence) -> None:
    """A VM's host: under TCG the guest's CPUs are the host's, so what other processes took there while
    the traffic ran slowed the emulation, whatever the guest's own samples show."""
    if ev.host_cpu_note:
        v.notes.append(f"the host's CPU not judged: {ev.host_cpu_note}")
    host = ev.host_cpu
    if not host:
        return
    v.checks["host_cpu"] = host
    if host_contended(host):
        v.flag(WARN, f"other processes on the VM's host used {host['others_cores']:g} of its {host['cpus']} CPUs "
                     f"during the traffic and left {host['host_idle_pct']:g} % idle (the testbed "
                     f"{host['testbed_cores']:g}): the emulated CPUs ran on what was left")
    if steal_mattered(host["steal_cores"] / host["cpus"], _idle_cores(host)):
        v.flag(WARN, f"the hypervisor under the VM's host took {host['steal_cores']:g} of its {host['cpus']} CPUs "
                     f"during the traffic (steal) and left {host['host_idle_pct']:g} % idle")


def steal_mattered(steal_share: float, idle_cores: float) -> bool:
    """Whether a hypervisor's steal may have slowed the emulation: heavy, or beside less than HOST_SPARE_CORES
    of idle CPU (with more to spare, the machine's scheduler ran the emulation on a CPU the steal left)."""
    return steal_share >= STEAL_HEAVY or (steal_share >= STEAL_WARN and idle_cores < HOST_SPARE_CORES)


def host_contended(host: dict) -> bool:
    """Whether other processes took a real share of a VM's host while it had next to no CPU to spare
    (runners.linux.host_cpu's figures)."""
    return host["others_cores"] > HOST_OTHERS_WARN_CORES and _idle_cores(host) < HOST_SPARE_CORES


def _idle_cores(host: dict) -> float:
    """How many of a VM's host's CPUs were idle over the traffic (what HOST_SPARE_CORES is compared with)."""
    return host["cpus"] * host["host_idle_pct"] / 100


def _pct(x: float) -> float:
    return round(100 * x, 1)


def backlog_floor(d: dict) -> float:
    """Bytes queued beyond the delay line's: above this the direction sends back to back at its rate."""
    return d["rate_mbit"] * 1e6 / 8 * d["delay_ms"] / 1e3 + 2 * MTU_FRAME


def direction_figures(d: dict, rows: list[list], until: float | None) -> dict:
    """One direction's samples -> its backlogged time, the rate it sent at meanwhile, its queue's peak and
    the share of samples at its limit (`until`: only samples before the first change of a rate).

    Backlogged: more bytes queued than the delay line holds at the rate (plus two frames) at every sample
    since at least the delay and one sample before the interval. A burst that just arrived is held for
    the delay before its first packet leaves, however long the queue: a long path's bursts (an MPTCP
    subflow's, 80 ms each way) read as 78 % of the rate when that first delay counted."""
    rows = [r for r in rows if until is None or r[0] <= until]
    floor, busy_s, busy_bytes = backlog_floor(d), 0.0, 0
    since = None   # when the current backlogged stretch began
    for a, b in zip(rows, rows[1:]):
        if a[4] < floor:
            since = None
            continue
        since = a[0] if since is None else since
        if b[4] >= floor and b[0] > a[0] and a[0] - since >= d["delay_ms"] / 1e3 + SAMPLE_S:
            busy_s += b[0] - a[0]
            busy_bytes += b[1] - a[1]
    qlens = [r[5] for r in rows]
    out = {"rate_mbit": d["rate_mbit"], "backlogged_s": round(busy_s, 2), "qlen_max": max(qlens, default=0),
           "limit_pkts": d["limit_pkts"],
           "at_limit_pct": _pct(sum(q >= AT_LIMIT * d["limit_pkts"] for q in qlens) / len(qlens)) if qlens else None}
    if busy_s > 0:
        mbps = busy_bytes * 8 / busy_s / 1e6
        out.update(sent_mbps=round(mbps, 3), rate_ratio=round(mbps / d["rate_mbit"], 4))
    return out


def _name(d: dict) -> str:
    return f"{d['id']}" + (f" (path {', '.join(d['paths'])})" if d.get("paths") else "")


def _shaping(v: Findings, ev: Evidence, until: float | None, changed_at: float | None) -> None:
    series = (ev.samples or {}).get("qdiscs") or {}
    if not series:
        return
    figures = {}
    for d in ev.directions:
        if d["id"] not in series or not d["rate_mbit"]:
            continue
        f = figures[d["id"]] = direction_figures(d, series[d["id"]], until)
        if f["backlogged_s"] < MIN_BACKLOGGED_S or "rate_ratio" not in f:
            continue
        ratio = f["rate_ratio"]
        said = (f"{_name(d)} sent {f['sent_mbps']:.3g} Mbit/s while backlogged ({f['backlogged_s']:.1f} s), "
                f"{ratio:.0%} of its {d['rate_mbit']:g} Mbit/s")
        if ratio < 1 - RATE_TOLERANCE:
            v.flag(UNFAITHFUL, said + ": the shaper fell behind")
        elif ratio > 1 + RATE_TOLERANCE:
            v.flag(WARN, said + ": faster than configured")
    v.checks["shaping"] = figures
    if until is not None:
        v.notes.append(f"shaping judged before the first change of a rate only ({until:.2f} s)")
    elif changed_at is not None:
        v.notes.append("shaping judged over the whole run: its changes (down, up, blackhole, restore, "
                       "backup, endpoints) leave the rates as configured")


def _loss(v: Findings, ev: Evidence, changed_at: float | None) -> None:
    """netem's drops in each direction against its configured loss; drops beyond it are the queue's when
    the queue came near its limit, and unexplained otherwise."""
    if changed_at is not None:
        v.notes.append("loss not judged: the run's changes alter the shaping during it")
        return
    shaping = (v.checks.get("shaping") or {})
    figures = {}
    for d in ev.directions:
        b, a = ev.qdisc_before.get(d["id"]), ev.qdisc_after.get(d["id"])
        if not b or not a:
            continue
        sent, dropped = a["packets"] - b["packets"], a["drops"] - b["drops"]
        n = sent + dropped
        if n < MIN_LOSS_PACKETS:
            continue
        p, got = d["loss_pct"] / 100, dropped / n
        tol = LOSS_SIGMAS * math.sqrt(p * (1 - p) / n) + LOSS_RELATIVE * p
        peak = (shaping.get(d["id"]) or {}).get("qlen_max")
        near = None if peak is None else peak >= NEAR_LIMIT * d["limit_pkts"]
        figures[d["id"]] = {"packets": n, "dropped": dropped, "configured_pct": d["loss_pct"],
                            "netem_pct": round(100 * got, 3), "tolerance_pct": round(100 * tol, 3)}
        if p > 0 and got < p - tol:
            v.flag(UNFAITHFUL, f"{_name(d)}: netem dropped {got:.2%} of {n} packets for a configured "
                               f"{d['loss_pct']:g} % (segmentation offload back on?)")
        elif got > p + tol and got - p > UNEXPLAINED_DROP_SHARE and near is False:
            v.flag(WARN, f"{_name(d)}: netem dropped {got:.2%} of {n} packets (configured {d['loss_pct']:g} %) "
                         f"while its queue never passed {peak} of {d['limit_pkts']} packets")
    v.checks["loss"] = figures


def _drops(v: Findings, ev: Evidence) -> None:
    softnet = (ev.samples or {}).get("softnet") or {}
    b, a = softnet.get("before"), softnet.get("after")
    out, theirs = {}, {}
    if ev.link_drops:
        out["interfaces"] = dict(ev.link_drops)
        downed = downed_devices(ev)
        theirs = {k: n for k, n in ev.link_drops.items() if k.split("/", 1)[-1] in downed}
        others = {k: n for k, n in ev.link_drops.items() if k not in theirs}
        if theirs:
            out["by_changes"] = theirs
            v.notes.append("interfaces of a path a change took down dropped what they held (not judged): "
                           + ", ".join(f"{k} {n}" for k, n in theirs.items()))
        if others:
            v.flag(WARN, "interfaces dropped packets: " + ", ".join(f"{k} {n}" for k, n in others.items()))
    if b and a:
        out.update({k: a[k] - b[k] for k in ("dropped", "time_squeeze")})
        if out["dropped"] and out["dropped"] <= sum(theirs.values()):
            # A device going down stops taking packets before its flags say so: what its peer sends in
            # between is dropped at the input backlog and counted there, as well as by the sender as its
            # own drop (softnet 1-9 drops in 9 of 20 failovers, never more than the downed devices counted,
            # with the CPUs idle; TCG, 2026-11-27). The change's doing, as the interfaces' drops above.
            out["dropped_by_changes"] = out["dropped"]
            v.notes.append(f"the kernel's input backlog dropped {out['dropped']} packet(s) as a change took a "
                           "path down (packets sent to a device going down; not judged)")
        elif out["dropped"]:
            v.flag(WARN, f"the kernel dropped {out['dropped']} packet(s) at its full input backlog "
                         "(net.core.netdev_max_backlog): the CPUs fell behind the traffic")
    v.checks["drops"] = out


def downed_devices(ev: Evidence) -> set[str]:
    """The shaped devices of each path that an applied change took down. A link going down discards what
    its queue held, and the kernel counts that as the interface's drops (1-5 packets a failover in lab 6,
    TCG, 2026-11-26): the change's doing, not the emulator falling behind."""
    paths = {str(c["target"])[len("path "):] for c in (ev.events or {}).get("changes", [])
             if c.get("action") == "down" and c.get("applied_s") is not None
             and str(c.get("target", "")).startswith("path ")}
    return {d["id"].split("/", 1)[-1] for d in ev.directions if paths & set(d.get("paths") or [])}


def _retransmissions(v: Findings, ev: Evidence, changed_at: float | None) -> None:
    """Segments retransmitted beyond the packets the run's shaped directions dropped (all of them, the
    ACKs' too: a generous count) were lost nowhere: timeouts and reordering of a late emulation."""
    if ev.retrans_segs is None or changed_at is not None:
        return
    hops = {h for p in ev.run_paths for h in (ev.paths.get(p) or {}).get("hops") or ()}
    counted = [h for h in hops if h in ev.qdisc_before and h in ev.qdisc_after]
    if not counted or len(counted) < len(hops):
        return
    dropped = sum(ev.qdisc_after[h]["drops"] - ev.qdisc_before[h]["drops"] for h in counted)
    packets = sum(ev.qdisc_after[h]["packets"] - ev.qdisc_before[h]["packets"] for h in counted)
    excess = ev.retrans_segs - dropped
    v.checks["retransmissions"] = {"retransmitted": ev.retrans_segs, "shaping_dropped": dropped,
                                   "packets": packets, "excess": excess}
    if excess > max(SPURIOUS_RETRANS, SPURIOUS_RETRANS_SHARE * packets):
        v.flag(WARN, f"the sender retransmitted {ev.retrans_segs} segments where the shaping dropped {dropped} "
                     "packets: the rest were timeouts or reordering, not losses")


def _delay(v: Findings, ev: Evidence) -> None:
    figures = {}
    for name, conf in ev.paths.items():
        floor = (ev.pings.get(name) or {}).get("rtt_min_ms")
        if conf.get("rtt_ms") is None or floor is None:
            v.notes.append(f"path {name}'s RTT not judged: " + ("no echo came back" if floor is None else
                                                                "its links are the switches' choice"))
            continue
        want, hops = conf["rtt_ms"] + conf.get("echo_ms", 0.0), len(conf.get("hops") or ())
        excess = floor - want
        figures[name] = {"configured_ms": round(want, 3), "floor_ms": floor, "excess_ms": round(excess, 3),
                         "hops": hops}
        said = f"path {name}'s RTT floor {floor:g} ms against a configured {want:.3g} ms"
        if excess < -RTT_BELOW_MS:
            v.flag(UNFAITHFUL, said + ": below it, so its delay is not in place")
        elif excess > RTT_UNFAITHFUL_MS + RTT_UNFAITHFUL_PER_HOP_MS * hops + RTT_UNFAITHFUL_SHARE * want:
            v.flag(UNFAITHFUL, said + f" (+{excess:.1f} ms)")
        elif excess > RTT_WARN_MS + RTT_WARN_PER_HOP_MS * hops + RTT_WARN_SHARE * want:
            v.flag(WARN, said + f" (+{excess:.1f} ms)")
    v.checks["delay"] = figures


def explained_rtt_ms(ev: Evidence, path: str, window, until: float | None) -> float | None:
    """The most RTT a path's configuration and sampled queues explain: over each of its directions, the
    longest that netem held a packet at any of the traffic's samples (its delay, or the time to send its
    backlog, whichever is longer) plus a full frame's transmission; None without samples of every
    direction. The longest, not the mean: the sender's mean RTT is iperf3's, read once a second, and a
    queue's sawtooth made a mean bound miss by up to 31 % in the shipped labs."""
    hops = (ev.paths.get(path) or {}).get("hops")
    series = (ev.samples or {}).get("qdiscs") or {}
    by_id = {d["id"]: d for d in ev.directions}
    if not hops or any(h not in series or h not in by_id or not by_id[h]["rate_mbit"] for h in hops):
        return None
    total = 0.0
    for h in hops:
        d, bps = by_id[h], by_id[h]["rate_mbit"] * 1e6 / 8
        rows = [r for r in series[h] if (window is None or window[0] <= r[0] <= window[1])
                and (until is None or r[0] <= until)]
        if not rows:
            return None
        total += (max(max(d["delay_ms"] / 1e3, r[4] / bps) for r in rows) + MTU_FRAME / bps) * 1e3
    return total


def _load_rtt(v: Findings, ev: Evidence, window, until: float | None) -> None:
    """The sender's mean RTT during the traffic against the most any of the run's paths explains: beyond
    it, the emulation itself held the packets."""
    if not ev.sender_rtt_ms or not ev.run_paths or ev.samples is None:
        return
    if until is not None:
        v.notes.append("the RTT during the traffic not judged: the run's changes alter its paths meanwhile")
        return
    explained = [explained_rtt_ms(ev, p, window, until) for p in ev.run_paths]
    if any(e is None for e in explained):
        v.notes.append("the RTT during the traffic not judged: a path's queues were not sampled")
        return
    most = max(explained)
    excess = ev.sender_rtt_ms - most
    v.checks["load_rtt"] = {"sender_ms": round(ev.sender_rtt_ms, 3), "explained_ms": round(most, 3),
                            "excess_ms": round(excess, 3)}
    said = (f"the sender's mean RTT {ev.sender_rtt_ms:.3g} ms during the traffic, {excess:+.1f} ms beyond "
            f"the {most:.3g} ms its paths' delays and queues explain")
    if excess > LOAD_RTT_UNFAITHFUL_MS + LOAD_RTT_UNFAITHFUL_SHARE * most:
        v.flag(UNFAITHFUL, said + ": the emulation delayed the packets")
    elif excess > LOAD_RTT_WARN_MS + LOAD_RTT_WARN_SHARE * most:
        v.flag(WARN, said)


def _events(v: Findings, events: dict | None) -> None:
    if not events:
        return
    bound = events.get("drift_bound_ms") or DRIFT_BOUND_MS
    changes, steps = events.get("changes", []), events.get("trace_steps", [])
    drifts = [c["drift_ms"] for c in changes + steps if c.get("drift_ms") is not None]
    v.checks["events"] = {"drift_max_ms": max(drifts) if drifts else None, "bound_ms": bound,
                          "late": sum(d > bound for d in drifts)}
    for c in changes:
        if c.get("applied_s") is None:
            v.flag(WARN, f"event {c.get('event')} was not applied: {c.get('not_applied') or c.get('error') or '?'}")
        elif (c.get("drift_ms") or 0) > bound:
            v.flag(WARN, f"event {c.get('event')} applied {c['drift_ms']:.0f} ms after its time (bound {bound:g} ms)")
    late = [s["drift_ms"] for s in steps if (s.get("drift_ms") or 0) > bound]
    if late:
        v.flag(WARN, f"{len(late)} of {len(steps)} trace steps applied more than {bound:g} ms late "
                     f"(the latest {max(late):.0f} ms)")


# ------------------------------------------------------------------ reading records (analysis, console)

def status_of(run: dict) -> str | None:
    """A record's fidelity status; None for a run recorded before fidelity was judged."""
    return (run.get("fidelity") or {}).get("status")


def unfaithful(run: dict) -> bool:
    return status_of(run) == UNFAITHFUL


def reasons_text(run: dict) -> str:
    return "; ".join((run.get("fidelity") or {}).get("reasons") or [])
