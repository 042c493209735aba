"""What every traffic tool shares: the run it is asked for, its result, and the helpers around a client
process (per-path sampling, waiting with the controller watched, samples of the MPTCP subflows)."""
from __future__ import annotations

import json
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from scenarios.spec.model import IPERF_PORTS, Scenario
from scenarios.spec.traces import uses_traces

from runners.errors import RunFailure
from runners.linux import sockdiag

BASE_PORT = IPERF_PORTS[0]   # iperf3's first server port, and the command tool's {port}


@dataclass(frozen=True)
class TrafficRun:
    run_id: str
    primary: str
    mptcp: bool
    receiver: object    # the Mininet host that receives the data
    upload: bool        # the client sends
    # TCP baselines run at the same time (runs.tcp_together): path -> that path's run id, in path order
    together: dict[str, str] = field(default_factory=dict)


@dataclass
class TrafficReport:
    """What a tool says about its transfer; collect.record.build turns it into the run's metrics.

    A tool that cannot measure its own goodput sets counters_only: the receiver's per-path counters
    over `seconds` are then the run's throughput.
    """
    seconds: float
    throughput_mbps: float = 0.0
    bytes_received: int = 0
    version: str | None = None
    sender_throughput_mbps: float | None = None
    bytes_sent: int | None = None
    retransmits: int | None = None
    sender_mean_rtt_ms: float | None = None
    congestion: str | None = None
    connected: list[dict] = field(default_factory=list)    # the data connection's 4-tuple(s)
    intervals: list[dict] = field(default_factory=list)    # {"start", "end", "mbps", "retransmits", "omitted"}
    intervals_side: str = "receiver's"                      # which end counted the intervals
    counters_only: bool = False
    cut_short: str | None = None   # why the tool gave no report of its own (a path change broke the transfer)
    clients: dict | None = None                             # several clients: each one's own numbers
    throughput_per_client_mbps: float | None = None
    clients_start_spread_s: float | None = None             # several clients: how far apart their transfers began

    @classmethod
    def from_iperf3(cls, parsed: dict) -> "TrafficReport":
        """From iperf3.parse_iperf3 (or aggregate_clients) output."""
        return cls(**{f: parsed[f] for f in cls.__dataclass_fields__ if f in parsed})


@dataclass
class TrafficResult:
    report: TrafficReport
    path_samples: list[dict]     # cumulative received bytes per path, sampled during the transfer
    subflow_samples: list[dict]  # the client's subflows, sampled (watch_subflows)
    by_path: dict[str, TrafficReport] = field(default_factory=dict)   # a run together: each path's flow


def subflow_samples_json(subflow_samples: list[dict]) -> str:
    """raw/<run>/subflows.json: each sample of the client's subflows with every field read of each
    (runners.linux.sockdiag.parse_socket), and the time its read began on the run's clock (`t`)."""
    return json.dumps([{"t": s.get("t"), "subflows": s["sockets"]} for s in subflow_samples], indent=1) + "\n"


class PathSampler(threading.Thread):
    """Samples per-path received bytes every `interval` s: per-path throughput over time."""

    def __init__(self, read: Callable[[], dict[str, int]], interval: float):
        super().__init__(daemon=True)
        self.read, self.interval = read, interval
        self.t0 = time.monotonic()   # the run's clock: the samples' and the events' time base
        self.samples: list[dict] = []
        self._halt = threading.Event()
        self.error: str | None = None
        self.companion = None   # sampled with it, stopped with it: the run's fidelity sampler (runners.collect)

    def run(self) -> None:
        t0 = self.t0
        while not self._halt.is_set():
            try:
                before = time.monotonic()
                counts = self.read()
                after = time.monotonic()
                # stamped at the middle of the read: a /proc read or a netlink dump takes microseconds
                # natively but milliseconds under TCG (and an nft listing, read by a process until
                # 2026-11-28, 0.3-0.7 s); stamping before it put samples late and made rates exceed the
                # link's. read_ms bounds the timing error of each sample.
                self.samples.append({"t": round((before + after) / 2 - t0, 4),
                                     "read_ms": round((after - before) * 1000, 2), **counts})
            except Exception as e:  # keep sampling; report at the end
                self.error = str(e)
            self._halt.wait(self.interval)

    @property
    def stopped(self) -> bool:
        return self._halt.is_set()

    def stop(self, log: Callable[[str], None]) -> list[dict]:
        self._halt.set()
        if self.companion is not None:
            self.companion.stop()
        self.join(timeout=15)
        if self.error:
            log(f"warning: the per-path sampler failed at least once ({len(self.samples)} samples kept): "
                f"{self.error}")
        return self.samples


class Reaper:
    """A thread per client process, started as soon as the clients are, that reads its output and notes
    when it exited (time.monotonic()). Several clients' windows are put on one clock by their ends
    (iperf3's own timestamps count whole seconds): a client that exited while the runner sampled the
    subflows or waited on another one is timed when it exited, not when the runner came to it."""

    def __init__(self, procs: dict) -> None:
        self.done: dict[str, tuple | BaseException] = {}
        self.threads = {tag: threading.Thread(target=self._reap, args=(tag, p), daemon=True)
                        for tag, p in procs.items()}
        for th in self.threads.values():
            th.start()

    def _reap(self, tag: str, proc) -> None:
        try:
            out, err = proc.communicate()
            self.done[tag] = (out, err, time.monotonic())
        except BaseException as e:   # handed to the runner's thread by wait_clients
            self.done[tag] = e


class TrafficTool:
    """One traffic generator, made for one run. Register a subclass in runners.traffic.TOOLS by name.

    `host` is the run's RunContext (runners.pipeline.context): its network (client, clients, server),
    plan, scenario, process registry, results store and log, the counters' path_rx, wait_listening and
    check_control_plane.
    """

    name = ""

    def __init__(self, host):
        self.host = host

    def start_servers(self, req: TrafficRun) -> None:
        """Before the pause between runs: a server's start-up overlaps it. Nothing by default."""

    def servers_ready(self, req: TrafficRun) -> None:
        """Return once the servers started by start_servers are ready (before the pings). Nothing by default."""

    def run(self, req: TrafficRun) -> TrafficResult:
        raise NotImplementedError

    def sampler(self, req: TrafficRun) -> PathSampler:
        """Per-path samples from now on, the run's clock; a run's events start on it too."""
        s = PathSampler(lambda: self.host.counters.path_rx(req.receiver, req.upload),
                        sample_interval(self.host.scenario))
        s.start()
        if getattr(self.host, "fidelity", None) is not None:   # CPU and queues on the same clock
            s.companion = self.host.fidelity
            s.companion.begin(s.t0)
        if getattr(self.host, "events", None) is not None:
            self.host.events.begin(s.t0)
        return s

    def timeout(self) -> float:
        t = self.host.scenario.traffic
        if t.duration is not None:
            return t.duration + t.omit + 60
        slowest = self.host.scenario.topology.min_rate
        return 3 * (t.bytes + fixed_size_extra(self.host.scenario)) * 8 / (slowest * 1e6) + 60

    def wait_client(self, proc, deadline: float, run_id: str, what: str) -> tuple[bytes, bytes]:
        """Wait for a client, reading its output, and fail at once if the controller or ovs-vswitchd dies meanwhile."""
        while True:
            try:
                return proc.communicate(timeout=0.5)
            except subprocess.TimeoutExpired:
                if time.monotonic() > deadline:
                    raise RunFailure(f"run {run_id}: {what} did not finish in {self.timeout():.0f}s") from None
                self.host.check_control_plane(f"during run {run_id}")

    def wait_clients(self, reaper: Reaper, deadline: float, run_id: str,
                     whats: dict[str, str]) -> dict[str, tuple[bytes, bytes, float]]:
        """The clients' output, and when each exited (time.monotonic()), as `reaper` (started with them)
        saw it. Fails as wait_client does."""
        done = reaper.done
        for tag, th in reaper.threads.items():
            th.join(timeout=0.5)
            while th.is_alive():
                if time.monotonic() > deadline:
                    raise RunFailure(f"run {run_id}: {whats[tag]} did not finish in {self.timeout():.0f}s")
                self.host.check_control_plane(f"during run {run_id}")
                th.join(timeout=0.5)
            if isinstance(done[tag], BaseException):
                raise done[tag]
        return done   # type: ignore[return-value]

    def watch_subflows(self, client_proc, t0: float | None = None, mptcp: bool = True,
                       run_id: str = "") -> list[dict]:
        """Sample the client's MPTCP subflows (sock_diag) while the tool runs; the record keeps the sample
        with the most subflows, and a recovery that did not come is explained by their windows. Each
        sample is stamped with the time its read began on the run's clock, `t`: from `t0` (the sampler's
        start; without it, from this call). The tool's wait for its clients must count its deadline from
        the same start: a run whose paths change is sampled here up to its planned end.
        A TCP run has no subflows to sample. A read that fails is said, and ends the sampling: the run
        goes on with the samples it has (none: its subflow count is unknown, not 0).

        When each sample is taken: subflow_schedule. A run whose paths change is sampled to its end, so
        the controller and ovs-vswitchd are checked here as the wait for the client checks them.
        """
        samples: list[dict] = []
        t0 = time.monotonic() if t0 is None else t0
        changing = changes_during_run(self.host.scenario)
        t = self.host.scenario.traffic
        # a dense schedule ends where the wait for the client takes over: its deadline is the tool's
        ends = t0 + (t.duration + t.omit if t.duration is not None else self.timeout())
        client = self.host.client.name
        for wait in subflow_schedule(t.duration, changing) if mptcp else ():
            end = time.monotonic() + wait
            if changing and end > ends:
                break
            while client_proc.poll() is None and time.monotonic() < end:
                time.sleep(0.05)
            if client_proc.poll() is not None:
                break
            if changing:
                self.host.check_control_plane(f"during run {run_id}")
            before = time.monotonic()
            try:
                found = self.host.network.subflow_reader(client).subflows()
            except OSError as e:
                self.host.log(f"warning: {client}: its MPTCP subflows could not be read over sock_diag ({e}); "
                              f"no more subflow samples in this run ({len(samples)} taken)")
                break
            samples.append({"sockets": found, "subflows": [sockdiag.as_ss_subflow(e) for e in found],
                            "windows": [w for w in map(sockdiag.send_window, found) if w is not None],
                            # when the read began: a sample counts as after a change only if all of it is
                            "t": round(before - t0, 3)})
        return samples


# A run whose paths change has its subflows sampled this often to its end: a window that holds the sender
# back can set in seconds after the change, after a burst (lab 6, 2026-11-28: B held to 42 kB from 4.2 s on,
# after 0.3 s at its full rate), and three samples in 20 s could fall in the burst. A sock_diag read costs
# milliseconds, not the 0.3-0.5 s of a TCG guest's CPU that `ss` did.
EVENT_SUBFLOW_INTERVAL_S = 0.5


def subflow_schedule(duration: float | None, changing: bool):
    """The waits between the subflow samples of a run: after min(2 s, duration/2), when the joins are done,
    then two more in a timed run (the schedule the recorded runs were made with), or, when the paths
    change during the run, one every EVENT_SUBFLOW_INTERVAL_S until the run ends. Fixed-size transfers may
    last well under a second, so they are sampled from 0.3 s on, more often."""
    if duration is not None:
        first = [min(2.0, duration / 2)]
        yield from first + ([] if changing else [max(0.5, duration / 5)] * 2)
    else:
        yield from (0.3, 0.3, 0.4, 0.5) + (() if changing else (1.0, 2.0))
    while changing:
        yield EVENT_SUBFLOW_INTERVAL_S


# Around path changes the per-path series must show what happened within a tenth of a second
# (issue 30): a scenario with events is sampled at least this often, whatever traffic.interval says.
EVENT_SAMPLE_INTERVAL_S = 0.1


def changes_during_run(scenario: Scenario) -> bool:
    """Events, or a path or link that follows a rate trace: the paths change while the traffic runs."""
    return bool(scenario.events) or uses_traces(scenario)


def sample_interval(scenario: Scenario) -> float:
    t = scenario.traffic.interval
    return min(t, EVENT_SAMPLE_INTERVAL_S) if changes_during_run(scenario) else t


# ... and the sender writes this much more than `bytes` (at least), because iperf3 ends the test
# once its last byte is *written*: what still sits in the send buffer then never arrives
# (esnet/iperf#382). The extra must cover that backlog, i.e. the sender's send buffer.
MIN_EXTRA_BYTES = 1 << 20


def fixed_size_extra(scenario: Scenario) -> int:
    """Bytes sent beyond `traffic.bytes` so that the receiver's count reaches `bytes`.

    The backlog left at the last write is at most the send buffer: its initial
    size (`sockets.send`), which cwnd-limited senders rarely grow, with a margin.
    """
    send = scenario.sockets.send
    initial = int(send[1]) if send else 0
    return max(MIN_EXTRA_BYTES, initial * 3 // 2)


def server_receives(scenario: Scenario) -> bool:
    return scenario.traffic.direction == "upload"
