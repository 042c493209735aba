"""What a run set would do and how long it would take, before anything starts (`--dry-run`, `list`).

Pure: the job table comes from the same planner the runner uses (runners.runset.jobs), and the time from
per-phase costs: the ones a finished set of the same scenario measured (its metadata.json), else
defaults measured on this project's CI machine kind (TCG micro-VM, 2026-11-25: the five labs, whose
handouts give each time beside its estimate).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from runners.collect.event_record import capacity_after
from runners.pipeline.job import topology_signature
from runners.runset.jobs import plan_jobs, runs_in
from runners.traffic.base import changes_during_run
from runners.traffic.iperf3 import EVENTS_GRACE_S


@dataclass(frozen=True)
class Costs:
    """Seconds, per phase, of one run set on one backend."""
    start: float          # the interpreter, the probe and, for the VM, its boot and power-off
    build: float          # one network: build, shaping and teardown
    run_overhead: float   # a run beyond its traffic and pause: endpoints, pings, counters, records
    report: float
    source: str
    # a network of OpenFlow switches: Open vSwitch's and the controller's start (os-ken's imports alone
    # take many seconds under TCG), their slower build and teardown; and per run and switch, the flows
    # cleared and learnt again, the warm-up pings through them and their flow counters read
    controller: float = 0.0
    switch_run: float = 0.0
    # round trips of a path per run (round_trip_seconds): the tool's control exchanges, a transfer's start
    control_rtts: float = 0.0
    start_rtts: float = 0.0
    # --capture: per run, tcpdump's start and stop (the drain waits for 2.5 s of quiet files, natively
    # too) and reading the captures back (subflows-pcap.csv, on the host), which grows with the packets
    capture_run: float = 0.0
    capture_per_mb: float = 0.0
    # a run with events or a trace: the batch processes and MPTCP monitors started and stopped, the network
    # put back, a record with 100 ms samples; a TCP run left without a live path waits out the tool's grace
    events_run: float = 0.0

    def describe(self, switched: bool = True) -> str:
        """The costs in a line; `switched`: with those of switches and a controller."""
        switches = (f", a controller's network {self.controller:.0f} s more and {self.switch_run:.1f} s per run "
                    "and switch" if switched and (self.controller or self.switch_run) else "")
        trips = (f" and {self.control_rtts:g} round trips of its path" if self.control_rtts else "")
        return (f"start {self.start:.0f} s, {self.build:.0f} s per network, {self.run_overhead:.1f} s per run "
                f"beyond its traffic{trips}{switches}, report {self.report:.0f} s ({self.source})")


# Measured on 2026-11-25 in the TCG micro-VM (2 cores, no KVM, kernel 6.1), the five labs run as a student
# would (labs/*.md give each lab's time): the host's start 1.2-2.0 s, the boot 10.1-11.1 s, the guest's
# Python 4.9-6.0 s and prepare 2.1-2.9 s; build, shaping and teardown 4.0-7.0 s; per run 2.2-2.8 s beyond
# its traffic, its pause and its round trips: 7 of its slowest path (iperf3's control connection before
# and its results after: lab 2's runs with the primary on the 500 ms path took 4.5 s longer than on the
# 30 ms one) and, for a fixed size, 4 more of its first path (the transfer's start). Lab 5's network
# under an os-ken controller: prepare 22 s, build 37 s and teardown 4 s against 2.4, 1.6-3.8 and 0.2-0.5
# s, and 0.7 s per run and switch (flows cleared and relearnt, counters read); on 2026-11-26, after switch
# ports went with their veth pairs at teardown, three sets of lab 5 (10 Mbit/s WAN links) spent 24.7-28.9 s
# beyond a plain network's (prepare 10.0-12.2 s, build, shaping and teardown 22.8-24.6 s). --capture: 2.7-2.9 s
# per 5 s run in the guest (tcpdump's start and drain; one of four 6.9 s), and 0.6-0.8 s on the host reading
# the pcaps back, for TCP's 4.9 MB and MPTCP's 6.9 MB (2026-11-27; 13.2 and 19.9 s per run when the guest
# read them, for lab 1's 6.1 and 11.8 MB). A busy machine (another
# engineer's VM or tests) made the boot and the guest's start up to 15 s slower. A warm VM: hand-over
# 0.8 s + 0.4 s prepare (the benchmark, 2026-11-25). Natively there is no emulation: the native row is an
# estimate (these, at most), until a set of the scenario has run.
DEFAULTS = {
    "vm": Costs(start=20.5, build=5.7, run_overhead=2.5, report=0.3, source="defaults measured in the TCG VM",
                controller=27.0, switch_run=0.7, control_rtts=7, start_rtts=4, capture_run=2.5,
                capture_per_mb=0.2, events_run=1.5),
    "warm vm": Costs(start=1.2, build=5.7, run_overhead=2.5, report=0.3, source="defaults measured in the TCG VM",
                     controller=27.0, switch_run=0.7, control_rtts=7, start_rtts=4, capture_run=2.5,
                     capture_per_mb=0.2, events_run=1.5),
    "native": Costs(start=2.0, build=2.6, run_overhead=1.7, report=0.3, source="defaults (estimated)",
                    controller=20.0, switch_run=0.3, control_rtts=7, start_rtts=4, capture_run=3.0,
                    capture_per_mb=0.1, events_run=0.5),
}


def measured_costs(metadata: dict, where: str) -> Costs | None:
    """The costs a finished set recorded (metadata.json's phases), or None when it holds too little."""
    phases = metadata.get("phases") or {}
    runs = [r for r in phases.get("runs", []) if "wall" in r and "traffic" in r]
    if not runs or "build" not in phases:
        return None
    start = sum(phases.get(k, 0.0) for k in ("python_start", "prepare", "vm_boot_and_exit", "warm_vm_job_overhead"))
    # the round trips each run spends (round_trip_seconds) are in this median: the estimate from a
    # measured set adds none (measured_costs's Costs has control_rtts 0)
    overhead = statistics.median(max(0.0, r["wall"] - r["traffic"]) for r in runs)
    backend = metadata.get("backend", "?")
    return Costs(start=start, build=phases["build"] + phases.get("shaping", 0.0) + phases.get("teardown", 0.0), run_overhead=overhead,
                 report=phases.get("report", 4.0),
                 source=f"measured by {where} ({backend}, {str(metadata.get('finished_utc', '?'))[:10]})")


@dataclass(frozen=True)
class Row:
    point: str
    label: str
    modes: str
    primaries: str
    repeats: int
    runs: int
    seconds: float


def job_table(exp, repeat: int | None, costs: Costs, capture: bool = False) -> tuple[list[Row], int, float]:
    """(one row per point, the number of networks built, the estimated wall seconds); `capture`: with
    --capture."""
    repeats = repeat or exp.scenario.runs.repeat
    jobs = plan_jobs(exp.points, range(1, repeats + 1), 0, len(exp.points) > 1)
    rows = []
    for pt in exp.points:
        mine = [j for j in jobs if j.point.id == pt.id]
        per_job = costs.run_overhead + len(_switches(pt)) * costs.switch_run
        rows.append(Row(point=pt.id, label=pt.label, modes=", ".join(pt.scenario.runs.compare),
                        primaries=", ".join(sorted({p for j in mine for p in j.paths})), repeats=repeats,
                        runs=runs_in(mine),
                        seconds=sum(traffic_seconds(j) + pt.scenario.runs.pause / 1000.0 + per_job
                                    + round_trip_seconds(j, costs) + events_seconds(j, costs)
                                    + (capture_seconds(j, costs) if capture else 0.0) for j in mine)))
    # each kernel of a kernel sweep is a boot of its own, and builds its own networks
    networks = {(p.kernel, topology_signature(p)): p for p in exp.points}
    controlled = sum(1 for p in networks.values() if getattr(p.scenario.topology, "controller", None))
    kernels = len({p.kernel for p in exp.points})
    total = (kernels * costs.start + len(networks) * costs.build + controlled * costs.controller
             + sum(r.seconds for r in rows) + costs.report)
    return rows, len(networks), total


def _switches(point) -> list:
    return list(getattr(point.scenario.topology, "switches", None) or [])


# a full-size frame (1514 bytes on the wire) carries 1448 bytes of TCP payload: TCP on a 10 Mbit/s path
# gets 9.4-9.45 Mbit/s (labs 1 and 5)
PAYLOAD_SHARE = 1448 / 1514


def traffic_seconds(job) -> float:
    """A run's expected traffic: its duration, or a fixed size at the rate it should get. MPTCP gets the
    sum of its paths' rates when they share no link (lab 2's 32 MiB took 15.4-16.2 s on two 10 Mbit/s
    paths), else its best path's; TCP run together, the slowest path's. (session.job_seconds, which
    guards the 24-hour limit, leans long instead: MPTCP at its best path's rate.)"""
    sc = job.point.scenario
    if sc.traffic.duration is not None:
        return sc.traffic.duration + sc.traffic.omit
    return sc.traffic.bytes * 8 / (expected_rate(job) * 1e6 * PAYLOAD_SHARE)


def expected_rate(job) -> float:
    """The Mbit/s a run's paths allow it (traffic_seconds)."""
    topo = job.point.scenario.topology
    if job.mode == "tcp":
        return min(topo.path_rate(p) for p in job.paths)
    links = [topo.links_of(p) for p in topo.path_names]
    disjoint = None not in links and sum(len(x) for x in links) == len(set().union(*links))
    rates = [topo.path_rate(p) for p in topo.path_names]
    return sum(rates) if disjoint else max(rates)


def events_seconds(job, costs: Costs) -> float:
    """What a run's events or traces add to it: their fixed cost, and a TCP run's wait for a tool that its
    path's failure stopped (no live path when the traffic ends)."""
    sc = job.point.scenario
    if not changes_during_run(sc):
        return 0.0
    stranded = (job.mode == "tcp" and sc.traffic.duration is not None and
                capacity_after(sc, list(job.paths), False, (sc.traffic.duration + sc.traffic.omit) * 1000)[0] == 0)
    return costs.events_run + (EVENTS_GRACE_S if stranded else 0.0)


def capture_seconds(job, costs: Costs) -> float:
    """What --capture adds to a run: a fixed part and a part per megabyte sent (every path of a job run
    together sends its own)."""
    sc = job.point.scenario
    sent = sc.traffic.bytes if sc.traffic.duration is None else \
        expected_rate(job) * len(job.together or [1]) * 1e6 * PAYLOAD_SHARE * sc.traffic.duration / 8
    return costs.capture_run + costs.capture_per_mb * sent / 1e6


def round_trip_seconds(job, costs: Costs) -> float:
    """What a run spends in its paths' round trips beyond its traffic at the paths' rate: the tool's
    exchanges before and after the transfer on the slowest path the job uses and, for a fixed size,
    the start of the transfer on its first path. A 500 ms path costs seconds per run (lab 2)."""
    rtts = [path_rtt(job.point.scenario.topology, p) for p in job.paths]
    fixed_size = job.point.scenario.traffic.duration is None
    return costs.control_rtts * max(rtts) + (costs.start_rtts * rtts[0] if fixed_size else 0.0)


def path_rtt(topology, path: str) -> float:
    """A path's round trip in seconds with empty queues: twice the one-way delay of the links it crosses
    (a switched network's paths are up to its switches: its slowest link's)."""
    if hasattr(topology, "path"):
        spec = topology.path(path)
        if hasattr(spec, "delay"):                  # dual-homed: one link per path
            return 2 * spec.delay / 1000.0
        if hasattr(spec, "via"):                    # routed: the links it names
            return 2 * sum(topology.link(x).delay for x in spec.via) / 1000.0
    return 2 * max((x.delay for x in getattr(topology, "links", [])), default=0.0) / 1000.0


def render_table(exp, repeat: int | None, costs: Costs, backend: str, capture: bool = False,
                 kernels_here: dict[str, str | None] | None = None) -> str:
    """The job table; `kernels_here`: {a swept kernel: the release of its image here, None when this
    machine lacks it}, shown per point of a kernel sweep ('missing here')."""
    rows, networks, total = job_table(exp, repeat, costs, capture)
    head = ("point", "label", "modes", "primaries", "repeat", "runs", "time")
    body = [(r.point, r.label, r.modes, r.primaries, str(r.repeats), str(r.runs), duration(r.seconds)) for r in rows]
    if kernels_here and any(p.kernel for p in exp.points):
        head += ("kernel here",)
        body = [(*line, kernels_here.get(p.kernel) or "missing here") for line, p in zip(body, exp.points)]
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in (head, *body)]
    runs = sum(r.runs for r in rows)
    kernels = sorted({p.kernel for p in exp.points if p.kernel})
    on = f" and {len(kernels)} kernels ({', '.join(kernels)}: a boot each)" if kernels else ""
    lines += ["", f"{runs} runs on {networks} network(s){on}, about {duration(total)} on the {backend} backend",
              f"costs: {costs.describe(switched=any(_switches(p) for p in exp.points))}"]
    if capture:
        lines.append(f"--capture: {costs.capture_run:g} s per run and {costs.capture_per_mb:.1f} s per MB sent")
    return "\n".join(lines)


def duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 2 * 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds / 3600:.1f} h"
