"""RunContext: what the steps of a run share (the store, the network and its plan, the processes, the log),
handed to each part of the pipeline instead of the runner itself."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from runners.collect.capture import CaptureSpec
from runners.errors import RunFailure
from runners.linux import procfs
from runners.linux.nsexec import ProcessRegistry
from runners.pipeline.network import Network
from runners.results.store import ResultStore

if TYPE_CHECKING:   # handed in by a backend, above this room
    from runners.backends.probe import ProbeReport


def _phases() -> dict:
    return {"build": 0.0, "shaping": 0.0, "teardown": 0.0, "runs": []}


@dataclass(eq=False)
class RunContext:
    """The runner's state as its parts (counters, pings, steering, shaping, MPTCP settings, traffic tools)
    read it. `scenario` and `plan` are the current point's; the parts themselves are set by the runner."""
    store: ResultStore
    probe: ProbeReport
    log: Callable[[str], None]
    network: Network
    procs: ProcessRegistry = field(default_factory=ProcessRegistry)
    # --capture's tcpdumps, apart: the traffic tools stop every process of `procs` when their traffic ends,
    # and a tcpdump must run on until its drain (runners.collect.capture); the runner's cleanup stops both
    capture_procs: ProcessRegistry = field(default_factory=ProcessRegistry)
    capture: CaptureSpec | None = None
    pause_after: str | None = None
    scenario: Any = None
    plan: Any = None
    after_connect: dict[str, list] = field(default_factory=dict)   # per client: commands once connected (MP_PRIO)
    traffic_ended: float | None = None
    # seconds spent in each phase, for metadata.json (what a run costs beyond its traffic)
    phases: dict = field(default_factory=_phases)
    counters: Any = None
    steering: Any = None
    pinger: Any = None
    shaper: Any = None
    mptcp: Any = None
    events: Any = None      # the run's EventScheduler while its traffic runs (runners.pipeline.events)
    fidelity: Any = None    # the run's FidelitySampler until it is judged (runners.collect.fidelity_sampler)
    # a VM's guest: the host writes its CPU rows beside the set (runners.collect.host_load)
    host_rows: bool = False
    # a job's records are on disk (the progress line): called by the store once they are written
    on_recorded: Callable[[Any, list[dict]], None] | None = None

    # the network's parts, as the collectors and tools name them
    client = property(lambda self: self.network.client)
    clients = property(lambda self: self.network.clients)
    server = property(lambda self: self.network.server)
    controller = property(lambda self: self.network.controller)

    def check_control_plane(self, when: str) -> None:
        self.network.check_control_plane(when)

    def wait_listening(self, port: int, timeout: float = 20, udp: bool = False) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if procfs.listening(self.server.pid, port, udp=udp):
                return
            time.sleep(0.05)
        raise RunFailure(f"the server did not listen on port {port} within {timeout:g}s")

    def maybe_pause(self, where: str) -> None:
        """--pause-after: stop here until the person looking around says to go on."""
        if self.pause_after == where:
            from runners.pipeline.pause import pause

            self.store.settle()   # the files of what ran so far are there to look at
            t0 = time.monotonic()
            pause(where, [self.network.get(n) for n in (*self.plan.hosts, *self.plan.routers)], log=self.log)
            self.phases["paused"] = round(self.phases.get("paused", 0.0) + time.monotonic() - t0, 3)
