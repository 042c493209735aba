"""One run on the network in place, in flow order: MPTCP endpoints -> the tool's servers -> the rest between
runs -> pings -> counters before -> capture and traffic -> counters after -> the records, stored.

Each step's builders and parsers live with the step (runners.collect, runners.traffic); this module only
calls them in order, through the RunContext the runner shares with its parts."""
from __future__ import annotations

import json
import os
import time

from runners.collect import event_record, fidelity_sampler, mptcp_monitor, record, subflows
from runners.collect.capture import Capture, capture_nodes, incomplete as capture_incomplete
from runners.pipeline.context import RunContext
from runners.pipeline.drain import rest_between_runs
from runners.pipeline.events import RunEvents
from runners.pipeline.job import Job
from runners.results.derived import subflow_warning
from runners.traffic import TOOLS, TrafficReport, TrafficRun
from runners.traffic.base import changes_during_run


class StepClock:
    """When each step of a run ended: the run's overhead beyond its traffic, step by step, in metadata."""

    def __init__(self):
        self.marks = [("start", time.monotonic())]

    def mark(self, step: str) -> float:
        now = time.monotonic()
        self.marks.append((step, now))
        return now

    def steps(self) -> dict[str, float]:
        return {name: round(t - prev, 3) for (_, prev), (name, t) in zip(self.marks, self.marks[1:])}

    @property
    def elapsed(self) -> float:
        return self.marks[-1][1] - self.marks[0][1]


def record_setting(sc, plan, job: Job, n_clients: int, alongside: tuple[str, ...]) -> record.Setting:
    """What a run's record needs of the scenario and plan. Run alongside other paths' flows, it keeps its
    own path's counters only; an MPTCP run gets the subflows its endpoints and limits should give."""
    paths = tuple(p for p in plan.paths if p.name == job.primary) if alongside else plan.paths
    return record.Setting(paths=paths, byte_counters=plan.byte_counters, n_clients=n_clients,
                          fixed_size_bytes=sc.traffic.bytes if sc.traffic.tool == "iperf3" else None,
                          alongside=tuple(p for p in alongside if p != job.primary),
                          subflows=subflows.expected_subflows(sc, plan, job.primary) if job.mode == "mptcp" else None,
                          tool=sc.traffic.tool)


def one_run(ctx: RunContext, job: Job) -> list[dict]:
    """network -> mptcp -> tool's servers -> pause -> pings -> counters -> traffic -> counters -> records:
    one record, or one per path for TCP baselines run together."""
    sc, mptcp = ctx.scenario, job.mode == "mptcp"
    together = {p: job.alone(p).run_id for p in job.together}
    on = f"paths {', '.join(job.together)} at the same time" if together else f"primary path {job.primary}"
    started, clock = time.time(), StepClock()
    ctx.check_control_plane(f"before run {job.run_id}")
    # TCP baselines leave the endpoints alone: a plain TCP socket never uses them. The endpoints
    # in place are saved with the "before" counters (mptcp-endpoints.txt).
    ctx.after_connect = ctx.mptcp.apply_endpoints(sc, ctx.plan, job.primary) if mptcp else {}
    ctx.steering.clear_flows()
    clock.mark("endpoints")
    upload = sc.traffic.direction == "upload"
    req = TrafficRun(job.run_id, job.primary, mptcp, ctx.server if upload else ctx.client, upload, together)
    # the tool's servers start first: their start-up (~1 s in a TCG guest) overlaps the pause and the pings
    tool = TOOLS[sc.traffic.tool](ctx)
    tool.start_servers(req)
    clock.mark("servers")
    endpoints = ctx.counters.read_endpoints_meanwhile()   # the endpoints in place, during the pause
    _rest_after_last_traffic(ctx)
    # nothing of the testbed's own may still be starting when the pings go: under emulation a busy
    # CPU delays packets, and the pings would read it as RTT
    endpoints_text = endpoints.result(timeout=60)
    tool.servers_ready(req)
    clock.mark("pause")
    # the last run's records were written meanwhile (add_runs in the background): on disk before this
    # run measures anything, and their 9p round trips done before the pings time theirs
    ctx.store.settle()   # ... and the line that says the last run finished printed, before this one's
    ctx.log(f"run {'+'.join(together.values()) or job.run_id}: {job.mode} with {on}"
            + (f" [{job.point.label}]" if job.multi_point else ""))
    clock.mark("store_wait")
    # a switch may have forgotten its flows since the last warm-up (a controller's are cleared above)
    pings = ctx.pinger.ping_paths(job.run_id, warm_up=bool(ctx.plan.switches))
    clock.mark("pings")
    before = ctx.counters.snapshot(job.run_id, "before", endpoints_text)
    clock.mark("snapshot_before")
    dumps = _start_capture(ctx, job.run_id)
    try:
        events = RunEvents(ctx, job.primary, mptcp) if changes_during_run(sc) else None
        fidelity_sampler.for_run(ctx)   # CPU and queues, started and stopped by the tool's per-path sampler
        try:
            traffic = tool.run(req)
        finally:
            if events is not None:
                events.end(time.monotonic() - (events.scheduler.t0 or time.monotonic()))
        ctx.traffic_ended = clock.mark("traffic")
        captured = _finish_capture(ctx, job.run_id, dumps)
    finally:
        if dumps is not None:   # a run that failed or was stopped: its tcpdumps end here, pcaps kept
            dumps.close()
    if captured is not None:
        clock.mark("capture")
    for run_id in together.values() or [job.run_id]:
        ctx.store.save_raw(run_id, "path-samples.json", json.dumps(traffic.path_samples) + "\n")
    after = ctx.counters.snapshot(job.run_id, "after")
    clock.mark("snapshot_after")
    seen = record.Observations(before=before, after=after, pings=pings, path_samples=traffic.path_samples,
                               subflow_samples=traffic.subflow_samples, server_receives=upload)
    results = [_record(ctx, job.alone(p), started, traffic.by_path[p], seen, alongside=job.together)
               for p in job.together] or [_record(ctx, job, started, traffic.report, seen)]
    if events is not None:
        _events_into(ctx, events, results, seen, job)
    fidelity_sampler.judge(ctx, results, seen, job.run_id)   # did the emulator keep up? (docs/fidelity.md)
    clock.mark("assemble")
    for result in results:
        if captured is not None:
            result["capture"] = captured
        if together:   # the pings, counter snapshots and capture of the job are kept once, with its first run
            result["shared_raw"] = f"raw/{job.run_id}"
    # written while the next run sets up (its store_wait), and said finished once written
    ctx.store.add_runs(results, background=True,
                       then=(lambda: ctx.on_recorded(job, results)) if ctx.on_recorded else None)
    ctx.maybe_pause("run")
    clock.mark("store")
    seconds = max(r["metrics"].get("seconds") or 0.0 for r in results)
    ctx.phases["runs"].append({"id": "+".join(together.values()) or job.run_id, "wall": round(clock.elapsed, 3),
                                "traffic": round(seconds, 3), "overhead": round(clock.elapsed - seconds, 3),
                                "steps": clock.steps()})
    return results


def _events_into(ctx: RunContext, events: RunEvents, results: list[dict], seen: record.Observations,
                 job: Job) -> None:
    """Each record's `events` section and event metrics; the monitors' raw lines beside the run."""
    addresses = {}
    for p in ctx.plan.paths:   # an IPv4 path seen from an IPv6 socket shows v4-mapped addresses
        addresses.update({a: p.name for ip in (p.client_ip, p.server_ip) for a in (ip, f"::ffff:{ip}")})
    if events.monitor_lines is not None:
        ctx.store.save_raw(job.run_id, "mptcp-monitor.txt", mptcp_monitor.raw_text(events.monitor_lines))
    for result in results:
        mptcp = result["mode"] == "mptcp"
        paths = [p.name for p in ctx.plan.paths] if mptcp else [result["primary"]]
        section, metrics = event_record.build(ctx.scenario, events.applied, seen.path_samples, paths, mptcp,
                                              events.monitor_lines, addresses, seen.before, seen.after,
                                              seen.subflow_samples)
        result["events"] = section
        result["metrics"].update({k: v for k, v in metrics.items() if k != "no_recovery"})
        if "no_recovery" in metrics:
            result["no_recovery"] = metrics["no_recovery"]
        if metrics["events_late"]:
            ctx.log(f"warning: run {result['id']}: {metrics['events_late']} event(s) applied more than "
                    f"{event_record.DRIFT_BOUND_MS:g} ms late (largest drift {metrics['event_drift_max_ms']:g} ms)")


def _start_capture(ctx: RunContext, run_id: str) -> Capture | None:
    if ctx.capture is None:
        return None
    dumps = Capture(ctx.capture, ctx.capture_procs, ctx.log)
    dumps.start([ctx.network.get(n) for n in capture_nodes(ctx.capture, ctx.plan)],
                ctx.store.raw_dir(run_id) / "pcap")
    return dumps


def _finish_capture(ctx: RunContext, run_id: str, dumps: Capture | None) -> dict | None:
    """Stop the run's tcpdumps; the record of their files, with what the report needs to read the subflows
    from them (runners.analysis.pcap_subflows)."""
    if dumps is None:
        return None
    files = dumps.stop()
    for f in files:
        if capture_incomplete(f):
            ctx.log(f"warning: run {run_id}: {f['file']} lacks packets: tcpdump wrote {f.get('packets')} of "
                     f"{f.get('received_by_filter')} (the kernel dropped {f.get('dropped_by_kernel', 0)})")
    path_of = {p.client_ip: p.name for p in ctx.plan.paths}
    for _, paths in ctx.plan.client_paths:
        path_of.update({p.client_ip: p.name for p in paths})
    return {"files": files, "client_nodes": list(ctx.plan.all_clients), "paths_by_address": path_of}


def _record(ctx: RunContext, job: Job, started: float, report: TrafficReport, seen: record.Observations,
            alongside: tuple[str, ...] = ()) -> dict:
    """The run's record; run alongside other paths' flows, it keeps its own path's counters only."""
    sc = ctx.scenario
    result = record.build(record.RunIdentity(job.run_id, job.mode, job.rep, job.primary, started), report, seen,
                          record_setting(sc, ctx.plan, job, len(ctx.clients), alongside))
    if result["metrics"]["subflows"] is None:
        ctx.log(f"warning: run {job.run_id}: no subflow sample saw the MPTCP connection while it ran (the "
                 "client ended before the first, or a read failed); its subflow count is unknown")
    if subflow_warning(result):
        ctx.log(f"warning: {subflow_warning(result)}")
    if report.clients:
        result["clients"] = report.clients
    if ctx.plan.switches:
        result["links"] = ctx.counters.link_bytes(seen.before, seen.after)
        steering = ctx.steering.report(job.run_id)
        if steering is not None:
            result["steering"] = steering
    ctx.check_control_plane(f"during run {job.run_id}")
    result.update(point=job.point.id, point_label=job.point.label, params=job.point.params,
                  kernel=os.uname().release)
    if job.mode == "mptcp" and sc.efficiency_paths:
        result["efficiency_paths"] = sc.efficiency_paths
    return result


def _rest_after_last_traffic(ctx: RunContext) -> None:
    rest_between_runs(ctx.scenario.runs.pause / 1000.0, ctx.traffic_ended, ctx.counters.queues_empty,
                      ctx.log)
