"""Native backend: build the topology with Mininet on this kernel and run every run.

NativeRunner coordinates; each job is done in its own room: the network
(runners/pipeline/network.py), shaping (runners/pipeline/shaping.py), MPTCP settings
(runners/pipeline/mptcp_config.py), pings and counters (runners/collect/), the traffic
tool (runners/traffic/), the record (runners/collect/record.py, pure) and
the results store. Cleanup happens in one `finally`, which SIGINT and SIGTERM reach.
"""
from __future__ import annotations

import json
import os
import signal
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from scenarios.spec.sweep import Point
from topologies.kinds import plan as make_plan

from runners.collect import record, subflows
from runners.collect.capture import Capture, CaptureSpec, capture_nodes, incomplete as capture_incomplete, subflows_csv
from runners.collect.counters import Counters
from runners.collect.pings import Pinger
from runners.collect.steering import Steering
from runners.errors import RunFailure, Terminated
from runners.linux import procfs
from runners.linux.nsexec import ProcessRegistry
from runners.pipeline.controlplane import ControlPlaneError
from runners.pipeline.drain import rest_between_runs
from runners.pipeline.job import Job, topology_signature
from runners.pipeline.mptcp_config import MptcpConfig
from runners.pipeline.network import Network
from runners.pipeline.shaping import Shaper
from runners.results.derived import subflow_warning
from runners.results.store import ResultStore
from runners.traffic import TOOLS, TrafficReport, TrafficRun

if TYPE_CHECKING:   # the probe's report is handed in by a backend, above this room
    from runners.backends.probe import ProbeReport


@contextmanager
def sigterm_raises():
    """SIGTERM, and SIGHUP (the terminal closed: an ssh session lost, a tmux window killed), end the run
    through its cleanup; Python's default would end the process and leave the network running."""
    def handler(signum, frame):
        raise Terminated()
    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def never_failing(log: Callable[[str], None]) -> Callable[[str], None]:
    """The run's log, which must not raise: after a hang-up the terminal answers writes with EIO, and a
    cleanup that logged its steps stopped at the first."""
    def say(msg: str) -> None:
        try:
            log(msg)
        except (OSError, ValueError):
            pass
    return say


@contextmanager
def signals_blocked():
    """Cleanup must not be cut short by a second Ctrl-C."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


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


class NativeRunner:
    """Runs jobs on a Mininet network that it builds, reshapes and tears down as the jobs need.

    Use as a context manager: leaving it (normally, on an exception, on
    Ctrl-C or on SIGTERM) stops every process and the network. Its parts
    reach what they share (network, plan, scenario, store, processes, log)
    through it.
    """

    def __init__(self, store: ResultStore, probe: ProbeReport, log: Callable[[str], None] = print,
                 on_run: Callable[[Job, dict], None] | None = None, base_dir: Path | None = None,
                 capture: CaptureSpec | None = None, pause_after: str | None = None):
        self.store, self.probe, self.log, self.on_run = store, probe, never_failing(log), on_run
        self.capture, self.pause_after = capture, pause_after
        self.network = Network(store.dir / "controller", Path(base_dir or "."), log)
        self.procs = ProcessRegistry()
        self.scenario = self.plan = None
        self.signature: tuple | None = None
        self.counters, self.steering, self.pinger = Counters(self), Steering(self), Pinger(self)
        self.shaper, self.mptcp = Shaper(self), MptcpConfig(self)
        self.after_connect: dict[str, list] = {}     # per client: commands once connected (MP_PRIO)
        self.traffic_ended: float | None = None
        self._sigterm = None
        # seconds spent in each phase, for metadata.json (what a run costs beyond its traffic)
        self.phases: dict = {"build": 0.0, "shaping": 0.0, "teardown": 0.0, "runs": []}

    # the network's parts, as the collectors and tools name them
    client = property(lambda self: self.network.client)
    clients = property(lambda self: self.network.clients)
    server = property(lambda self: self.network.server)
    controller = property(lambda self: self.network.controller)

    def __enter__(self) -> "NativeRunner":
        self._sigterm = sigterm_raises()
        self._sigterm.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        with signals_blocked():
            self.cleanup()
        self._sigterm.__exit__(*exc)

    def run_jobs(self, jobs: list[Job]) -> None:
        for job in jobs:
            try:
                self._prepare(job.point)
                results = self._one_run(job)
            except ControlPlaneError as e:   # OVS or the controller: a run failure like any other
                raise RunFailure(str(e)) from None
            except RunFailure as e:
                self._blame_the_control_plane(job, e)
                raise
            if self.on_run:
                for path, result in zip(job.paths, results):
                    self.on_run(job.alone(path), result)

    def prepare(self, point: Point) -> None:
        """The network for this point: built (or kept), shaped and verified, sysctls set."""
        try:
            self._prepare(point)
        except ControlPlaneError as e:
            raise RunFailure(str(e)) from None

    def run_one(self, job: Job) -> dict:
        """One run on the network in place (`run-scenario shell`'s traffic command), stored like any."""
        self.prepare(job.point)
        try:
            return self._one_run(job)[0]
        except ControlPlaneError as e:
            raise RunFailure(str(e)) from None

    def _maybe_pause(self, where: str) -> None:
        if self.pause_after == where:
            from runners.pipeline.pause import pause
            t0 = time.monotonic()
            pause(where, [self.network.get(n) for n in (*self.plan.hosts, *self.plan.routers)], log=self.log)
            self.phases["paused"] = round(self.phases.get("paused", 0.0) + time.monotonic() - t0, 3)

    def _blame_the_control_plane(self, job: Job, failure: RunFailure) -> None:
        """A run that failed because OVS or the controller died says so, not only what broke next."""
        if self.network.up:
            try:
                self.check_control_plane(f"during run {job.run_id}")
            except ControlPlaneError as e:
                raise RunFailure(f"{e} (then: {failure})") from None

    def cleanup(self) -> None:
        t0 = time.monotonic()
        self.procs.stop_all()
        if self.network.up:
            self.shaper.applied.clear()
            self.mptcp.forget()
        self.network.stop()
        self.signature = None
        self.phases["teardown"] = round(self.phases["teardown"] + time.monotonic() - t0, 3)

    def check_control_plane(self, when: str) -> None:
        self.network.check_control_plane(when)

    def wait_listening(self, port: int, timeout: float = 20, udp: bool = False) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if procfs.listening(self.server.pid, port, udp=udp):
                return
            time.sleep(0.05)
        raise RunFailure(f"the server did not listen on port {port} within {timeout:g}s")

    def _prepare(self, point: Point) -> None:
        """Rebuild only when the topology changes; reshape and re-set sysctls only when they differ."""
        self.scenario, self.plan = point.scenario, make_plan(point.scenario)
        sig = topology_signature(point)
        built = sig != self.signature
        if built:
            self.cleanup()
            t0 = time.monotonic()
            self.log(f"building topology {self.scenario.topology.kind} with {len(self.plan.paths)} paths")
            self.network.build(self.plan)
            self.phases["build"] = round(self.phases["build"] + time.monotonic() - t0, 3)
            self.store.set_metadata(build_seconds=round(time.monotonic() - t0, 2), address_plan=self.plan.to_dict())
            self.signature = sig
            self._maybe_pause("build")
        t0 = time.monotonic()
        self.mptcp.apply_sysctls(self.scenario)
        if self.shaper.shape() or built:
            self.pinger.warm_up()   # the paths' neighbours known before any echo is timed (warm_up_ping_argv)
        self.phases["shaping"] = round(self.phases["shaping"] + time.monotonic() - t0, 3)
        self._maybe_pause("shaping")

    def _one_run(self, job: Job) -> list[dict]:
        """network -> mptcp -> tool's servers -> pause -> pings -> counters -> traffic -> counters -> records:
        one record, or one per path for TCP baselines run together."""
        sc, mptcp = self.scenario, job.mode == "mptcp"
        together = {p: job.alone(p).run_id for p in job.together}
        on = f"paths {', '.join(job.together)} at the same time" if together else f"primary path {job.primary}"
        self.log(f"run {'+'.join(together.values()) or job.run_id}: {job.mode} with {on}"
                 + (f" [{job.point.label}]" if job.multi_point else ""))
        started, clock = time.time(), StepClock()
        self.check_control_plane(f"before run {job.run_id}")
        # TCP baselines leave the endpoints alone: a plain TCP socket never uses them. The endpoints
        # in place are saved with the "before" counters (mptcp-endpoints.txt).
        self.after_connect = self.mptcp.apply_endpoints(sc, self.plan, job.primary) if mptcp else {}
        self.steering.clear_flows()
        clock.mark("endpoints")
        upload = sc.traffic.direction == "upload"
        req = TrafficRun(job.run_id, job.primary, mptcp, self.server if upload else self.client, upload, together)
        # the tool's servers start first: their start-up (~1 s in a TCG guest) overlaps the pause and the pings
        tool = TOOLS[sc.traffic.tool](self)
        tool.start_servers(req)
        clock.mark("servers")
        endpoints = self.counters.read_endpoints_meanwhile()   # the endpoints in place, during the pause
        self._rest_after_last_traffic()
        # nothing of the testbed's own may still be starting when the pings go: under emulation a busy
        # CPU delays packets, and the pings would read it as RTT
        endpoints_text = endpoints.result(timeout=60)
        tool.servers_ready(req)
        clock.mark("pause")
        # a switch may have forgotten its flows since the last warm-up (a controller's are cleared above)
        pings = self.pinger.ping_paths(job.run_id, warm_up=bool(self.plan.switches))
        clock.mark("pings")
        before = self.counters.snapshot(job.run_id, "before", endpoints_text)
        clock.mark("snapshot_before")
        dumps = self._start_capture(job.run_id)
        traffic = tool.run(req)
        self.traffic_ended = clock.mark("traffic")
        captured = self._finish_capture(job.run_id, dumps)
        for run_id in together.values() or [job.run_id]:
            self.store.save_raw(run_id, "path-samples.json", json.dumps(traffic.path_samples) + "\n")
        after = self.counters.snapshot(job.run_id, "after")
        clock.mark("snapshot_after")
        seen = record.Observations(before=before, after=after, pings=pings, path_samples=traffic.path_samples,
                                   ss_samples=traffic.ss_samples, server_receives=upload)
        results = [self._record(job.alone(p), started, traffic.by_path[p], seen, alongside=job.together)
                   for p in job.together] or [self._record(job, started, traffic.report, seen)]
        clock.mark("assemble")
        for result in results:
            if captured is not None:
                result["capture"] = captured
            if together:   # the pings, counter snapshots and capture of the job are kept once, with its first run
                result["shared_raw"] = f"raw/{job.run_id}"
            self.store.add_run(result)
        self._maybe_pause("run")
        clock.mark("store")
        seconds = max(r["metrics"].get("seconds") or 0.0 for r in results)
        self.phases["runs"].append({"id": "+".join(together.values()) or job.run_id, "wall": round(clock.elapsed, 3),
                                    "traffic": round(seconds, 3), "overhead": round(clock.elapsed - seconds, 3),
                                    "steps": clock.steps()})
        return results

    def _start_capture(self, run_id: str) -> Capture | None:
        if self.capture is None:
            return None
        dumps = Capture(self.capture, self.procs, self.log)
        dumps.start([self.network.get(n) for n in capture_nodes(self.capture, self.plan)],
                    self.store.raw_dir(run_id) / "pcap")
        return dumps

    def _finish_capture(self, run_id: str, dumps: Capture | None) -> dict | None:
        """Stop the run's tcpdumps; subflows-pcap.csv from them (a tshark failure is a warning)."""
        if dumps is None:
            return None
        files = dumps.stop()
        for f in files:
            if capture_incomplete(f):
                self.log(f"warning: run {run_id}: {f['file']} lacks packets: tcpdump wrote {f.get('packets')} of "
                         f"{f.get('received_by_filter')} (the kernel dropped {f.get('dropped_by_kernel', 0)})")
        out = {"files": files}
        path_of = {p.client_ip: p.name for p in self.plan.paths}
        for _, paths in self.plan.client_paths:
            path_of.update({p.client_ip: p.name for p in paths})
        try:
            text = subflows_csv(self.store.raw_dir(run_id), files, list(self.plan.all_clients), path_of)
        except (RuntimeError, OSError, ValueError) as e:
            self.log(f"warning: run {run_id}: subflows-pcap.csv not written: {e}")
            text = None
        if text is not None:
            self.store.save_raw(run_id, "subflows-pcap.csv", text)
            out["subflows_csv"] = f"raw/{run_id}/subflows-pcap.csv"
        return out

    def _record(self, job: Job, started: float, report: TrafficReport, seen: record.Observations,
                alongside: tuple[str, ...] = ()) -> dict:
        """The run's record; run alongside other paths' flows, it keeps its own path's counters only."""
        sc = self.scenario
        result = record.build(record.RunIdentity(job.run_id, job.mode, job.rep, job.primary, started), report, seen,
                              record_setting(sc, self.plan, job, len(self.clients), alongside))
        if result["metrics"]["subflows"] is None:
            self.log(f"warning: run {job.run_id}: no `ss` sample saw the MPTCP connection while it ran (the CPU "
                     "was too busy: capture under emulation?); its subflow count is unknown")
        if subflow_warning(result):
            self.log(f"warning: {subflow_warning(result)}")
        if report.clients:
            result["clients"] = report.clients
        if self.plan.switches:
            result["links"] = self.counters.link_bytes(seen.before, seen.after)
            steering = self.steering.report(job.run_id)
            if steering is not None:
                result["steering"] = steering
        self.check_control_plane(f"during run {job.run_id}")
        result.update(point=job.point.id, point_label=job.point.label, params=job.point.params,
                      kernel=os.uname().release)
        if job.mode == "mptcp" and sc.efficiency_paths:
            result["efficiency_paths"] = sc.efficiency_paths
        return result

    def _rest_after_last_traffic(self) -> None:
        rest_between_runs(self.scenario.runs.pause / 1000.0, self.traffic_ended, self.counters.queues_empty,
                          self.log)
