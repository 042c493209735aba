"""The runner: jobs on a Mininet network on this kernel, built, reshaped and torn down as they need.

NativeRunner coordinates; each run's steps are one_run.py, in flow order, and each step lives in its own
room: the network
(runners/pipeline/network.py), shaping (runners/pipeline/shaping.py), MPTCP settings
(runners/pipeline/mptcp_config.py), pings and counters (runners/collect/), the traffic
tool (runners/traffic/), the record (runners/collect/record.py, pure) and
the results store. Cleanup happens in one `finally`, which SIGINT and SIGTERM reach.
"""
from __future__ import annotations

import signal
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, TYPE_CHECKING

from scenarios.spec.sweep import Point
from topologies.kinds import plan as make_plan

from runners.collect.capture import CaptureSpec
from runners.collect.counters import Counters
from runners.collect.pings import Pinger
from runners.collect.steering import Steering
from runners.errors import ControlPlaneError, RunFailure, Terminated
from runners.pipeline.context import RunContext
from runners.pipeline.job import Job, topology_signature
from runners.pipeline.mptcp_config import MptcpConfig
from runners.pipeline.network import Network
from runners.pipeline.one_run import one_run
from runners.pipeline.shaping import Shaper
from runners.results.store import ResultStore

if TYPE_CHECKING:   # handed in by a backend, above this room
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


class NativeRunner:
    """Runs jobs on a Mininet network that it builds, reshapes and tears down as the jobs need.

    Use as a context manager: leaving it (normally, on an exception, on
    Ctrl-C or on SIGTERM) stops every process and the network. Its parts
    reach what they share (network, plan, scenario, store, processes, log)
    through one RunContext, `ctx`; each run's steps are runners.pipeline.one_run.
    """

    def __init__(self, store: ResultStore, probe: ProbeReport, log: Callable[[str], None] = print,
                 on_run: Callable[[Job, dict], None] | None = None, base_dir: Path | None = None,
                 capture: CaptureSpec | None = None, pause_after: str | None = None, host_rows: bool = False):
        log = never_failing(log)   # the network's teardown logs its steps too
        network = Network(store.dir / "controller", Path(base_dir or "."), log)
        self.ctx = ctx = RunContext(store, probe, log, network, capture=capture, pause_after=pause_after,
                                    host_rows=host_rows)
        ctx.counters, ctx.steering, ctx.pinger = Counters(ctx), Steering(ctx), Pinger(ctx)
        ctx.shaper, ctx.mptcp = Shaper(ctx), MptcpConfig(ctx)
        self.on_run = on_run
        ctx.on_recorded = self._recorded if on_run else None
        self.signature: tuple | None = None
        self._sigterm = None

    # what the run set and the shell read of the runner
    store = property(lambda self: self.ctx.store)
    network = property(lambda self: self.ctx.network)
    plan = property(lambda self: self.ctx.plan)
    scenario = property(lambda self: self.ctx.scenario)
    mptcp = property(lambda self: self.ctx.mptcp)
    phases = property(lambda self: self.ctx.phases)
    clients = property(lambda self: self.ctx.clients)
    server = property(lambda self: self.ctx.server)

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
                results = one_run(self.ctx, job)
            except ControlPlaneError as e:   # OVS or the controller: a run failure like any other
                raise RunFailure(str(e)) from None
            except RunFailure as e:
                self._blame_the_control_plane(job, e)
                raise

    def _recorded(self, job: Job, results: list[dict]) -> None:
        """A job's records are on disk: its runs' lines (the store calls this once they are written)."""
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
            return one_run(self.ctx, job)[0]
        except ControlPlaneError as e:
            raise RunFailure(str(e)) from None

    def _blame_the_control_plane(self, job: Job, failure: RunFailure) -> None:
        """A run that failed because OVS or the controller died says so, not only what broke next."""
        if self.ctx.network.up:
            try:
                self.ctx.check_control_plane(f"during run {job.run_id}")
            except ControlPlaneError as e:
                raise RunFailure(f"{e} (then: {failure})") from None

    def cleanup(self) -> None:
        ctx, t0 = self.ctx, time.monotonic()
        ctx.procs.stop_all()
        ctx.capture_procs.stop_all()
        if ctx.network.up:
            ctx.shaper.applied.clear()
            ctx.mptcp.forget()
        ctx.network.stop()
        self.signature = None
        ctx.phases["teardown"] = round(ctx.phases["teardown"] + time.monotonic() - t0, 3)

    def _prepare(self, point: Point) -> None:
        """Rebuild only when the topology changes; reshape and re-set sysctls only when they differ."""
        ctx = self.ctx
        ctx.scenario, ctx.plan = point.scenario, make_plan(point.scenario)
        sig = topology_signature(point)
        built = sig != self.signature
        if built:
            ctx.store.settle()   # the last point's last run said finished before this point's network
            self.cleanup()
            t0 = time.monotonic()
            ctx.log(f"building topology {ctx.scenario.topology.kind} with {len(ctx.plan.paths)} paths")
            ctx.network.build(ctx.plan)
            ctx.phases["build"] = round(ctx.phases["build"] + time.monotonic() - t0, 3)
            ctx.store.set_metadata(build_seconds=round(time.monotonic() - t0, 2), address_plan=ctx.plan.to_dict())
            self.signature = sig
            ctx.maybe_pause("build")
        t0 = time.monotonic()
        ctx.mptcp.apply_sysctls(ctx.scenario)
        if ctx.shaper.shape() or built:
            ctx.pinger.warm_up()   # the paths' neighbours known before any echo is timed (pings.warm_up_request)
        ctx.phases["shaping"] = round(ctx.phases["shaping"] + time.monotonic() - t0, 3)
        ctx.maybe_pause("shaping")
