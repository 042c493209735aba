"""iperf3: one server per flow (one port each), all flows at once, under MPTCP (mptcpize, or iperf3's own
--mptcp) or not. A flow per client: the report is the aggregate, with a per-client table. TCP baselines
run together (runs.tcp_together): a flow per path from the one client, a report per path."""
from __future__ import annotations

import json
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Any

from scenarios.spec.model import Scenario
from topologies.plan import TopologyPlan

from runners.errors import ParseError, RunFailure
from runners.linux.nsexec import Argv, run
from runners.traffic.barrier import StartBarrier
from runners.traffic.base import (BASE_PORT, Reaper, TrafficReport, TrafficResult, TrafficRun, TrafficTool,
    changes_during_run, fixed_size_extra, server_receives, subflow_samples_json)


@dataclass(frozen=True)
class Flow:
    """One iperf3 client and its server: on `node`, to `port`, over `path`'s addresses."""
    node: object     # the client's Mininet host
    port: int
    path: str
    tag: str         # names its raw files and its report: "" alone, else the client's or the path's name
    where: str       # for messages: "h1", or "path A"


# how long past its duration an iperf3 client of a run with events may take before it is stopped
EVENTS_GRACE_S = 5.0


class Iperf3Tool(TrafficTool):
    name = "iperf3"

    def __init__(self, host):
        super().__init__(host)
        self.servers: dict = {}
        self.stopped_by_us: set[int] = set()
        self.barrier: StartBarrier | None = None
        self.reaper: Reaper | None = None        # the clients' output and exit times, read as they come
        # iperf3 3.12 has no --mptcp: mptcpize wraps it instead
        self.iperf = Iperf(native_mptcp=bool(host.probe.facts.get("iperf3_native_mptcp")))

    def flows(self, req: TrafficRun) -> list[Flow]:
        """A flow per client over the primary path, or, run together, a flow per path from the client."""
        h = self.host
        if req.together:
            return [Flow(h.client, BASE_PORT + i, path, path, f"path {path}") for i, path in enumerate(req.together)]
        many = len(h.clients) > 1
        return [Flow(node, BASE_PORT + i, req.primary, node.name if many else "", node.name)
                for i, node in enumerate(h.clients)]

    def start_servers(self, req: TrafficRun) -> None:
        h = self.host
        self.servers = {f.tag: h.procs.start(h.server, iperf_server_argv(self.iperf, f.port, req.mptcp,
                                                                                   h.scenario))
                        for f in self.flows(req)}

    def servers_ready(self, req: TrafficRun) -> None:
        for f in self.flows(req):
            self.host.wait_listening(f.port)

    def run(self, req: TrafficRun) -> TrafficResult:
        h = self.host
        flows = self.flows(req)
        sampler = None
        try:   # the runner waited for servers_ready before its pings
            sampler = self.sampler(req)
            clients = self._start_clients(req, flows)
            self._after_connect(clients, flows, req.run_id)
            subflow_samples = self.watch_subflows(clients[flows[0].tag], sampler.t0, req.mptcp,
                                                 req.run_id)
            try:
                outs = self._wait_clients(flows, req.run_id, sampler.t0)
            finally:
                samples = sampler.stop(h.log)
            if outs is None:
                return self._cut_short(req, samples, subflow_samples, f"the iperf3 client had not finished "
                                       f"{EVENTS_GRACE_S:g} s after the traffic's end and was stopped")
            self._collect_servers(outs)
        finally:
            if sampler is not None and not sampler.stopped:   # the clients failed to start: no reads after
                sampler.stop(h.log)                           # the run (the network may be going down)
            h.procs.stop_all()
            if self.barrier is not None:
                self.barrier.close()    # after the clients: one that opened the FIFO late still got its line
                self.barrier = None
        for run_id in (req.together.values() or [req.run_id]) if req.mptcp else ():
            h.store.save_raw(run_id, "subflows.json", subflow_samples_json(subflow_samples))
        by_tag = {f.tag: f for f in flows}
        for tag, out in outs.items():
            self._save(req, tag, *out)
        self._no_killed_process(req, clients, by_tag)
        try:
            reports = {tag: self._report(req, by_tag[tag], *out) for tag, out in outs.items()}
        except RunFailure as e:
            if not changes_during_run(h.scenario):
                raise
            return self._cut_short(req, samples, subflow_samples, f"iperf3 failed: {e}")
        if req.together:
            by_path = {tag: TrafficReport.from_iperf3(r) for tag, r in reports.items()}
            return TrafficResult(by_path[flows[0].tag], samples, subflow_samples, by_path)
        # a fixed-size transfer's seconds are its completion time, not the time to the client's exit
        ends = ({tag: ended for tag, (_, _, ended) in self.reaper.done.items()}
                if h.scenario.traffic.duration is not None else None)
        report = aggregate_clients(reports, ends) if len(flows) > 1 else reports[""]
        if report.get("clients_start_spread_s", 0) > 0.5:
            late = max(report["clients"].items(), key=lambda kv: kv[1].get("started_after_s", 0))[0]
            h.log(f"run {req.run_id}: the clients' transfers began up to {report['clients_start_spread_s']:.2f} s "
                  f"apart ({late} last; a lost SYN waits 1 s): the aggregate counts their bytes over the span "
                  "they covered together")
        return TrafficResult(TrafficReport.from_iperf3(report), samples, subflow_samples)

    def _start_clients(self, req: TrafficRun, flows: list[Flow]) -> dict:
        h = self.host
        argvs = {}
        for f in flows:
            cp = h.plan.for_client(f.node.name).path(f.path)
            s_ip, c_ip = cp.server_ip, cp.client_ip
            if needs_v6_socket(h.plan, f.path, req.mptcp):
                s_ip, c_ip = v4_mapped(s_ip), v4_mapped(c_ip)
            argvs[f] = iperf_client_argv(self.iperf, h.scenario, s_ip, c_ip, f.port, req.mptcp)
        if len(argvs) == 1:
            clients = {f.tag: h.procs.start(f.node, argv) for f, argv in argvs.items()}
        else:
            self.barrier = StartBarrier(len(argvs))
            clients = {f.tag: h.procs.start(f.node, self.barrier.wrap(argv)) for f, argv in argvs.items()}
            self.barrier.release(list(clients.values()))
        self.reaper = Reaper(clients)
        return clients

    def _wait_clients(self, flows: list[Flow], run_id: str, t0: float) -> dict[str, list[bytes]] | None:
        """Each client's output; None when a run with events outlived its duration by EVENTS_GRACE_S,
        counted from the traffic's start `t0` (a path change cut iperf3's control connection, as it does
        a TCP baseline on a path taken down). Any other run fails after the tool's timeout from `t0`."""
        t = self.host.scenario.traffic
        cut = changes_during_run(self.host.scenario) and t.duration is not None
        deadline = t0 + t.duration + t.omit + EVENTS_GRACE_S if cut else t0 + self.timeout()
        try:
            got = self.wait_clients(self.reaper, deadline, run_id,
                                    {f.tag: f"iperf3 client on {f.where}" for f in flows})
            return {tag: [out, err, b"", b""] for tag, (out, err, _) in got.items()}
        except RunFailure:
            if not cut:
                raise
            return None

    def _cut_short(self, req: TrafficRun, samples: list[dict], subflow_samples: list[dict], why: str) -> TrafficResult:
        """A transfer a path change broke (a TCP baseline on a path taken down): its goodput is the
        receiver's counters over the planned duration, and the record says why."""
        t = self.host.scenario.traffic
        self.host.log(f"run {req.run_id}: {why} (a change of its path broke the transfer): goodput from the "
                      "receiver's counters")
        seconds = float(t.duration) if t.duration is not None else max((s["t"] for s in samples), default=0.0)
        report = TrafficReport(seconds=seconds, counters_only=True, cut_short=why)
        by_path = {p: TrafficReport(seconds=seconds, counters_only=True, cut_short=why) for p in req.together}
        return TrafficResult(report, samples, subflow_samples, by_path)

    def _collect_servers(self, outs: dict[str, list[bytes]]) -> None:
        for name, server in self.servers.items():
            try:
                s_out, s_err = server.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
                self.stopped_by_us.add(server.pid)
                s_out, s_err = server.communicate()
            outs[name][2:] = [s_out, s_err]

    def _save(self, req: TrafficRun, tag: str, c_out: bytes, c_err: bytes, s_out: bytes, s_err: bytes) -> None:
        """One client's and its server's output, kept raw whatever happened: in its own run's folder when
        run together, else suffixed with the client's name when there are several."""
        h = self.host
        run_id = req.together.get(tag, req.run_id)
        suffix = f"-{tag}" if tag and not req.together else ""
        h.store.save_raw(run_id, f"iperf3-client{suffix}.json", c_out.decode(errors="replace"))
        h.store.save_raw(run_id, f"iperf3-server{suffix}.json", s_out.decode(errors="replace"))
        if c_err.strip() or s_err.strip():
            h.store.save_raw(run_id, f"iperf3-stderr{suffix}.txt",
                             f"# client\n{c_err.decode(errors='replace')}\n# server\n{s_err.decode(errors='replace')}")

    def _no_killed_process(self, req: TrafficRun, clients: dict, flows: dict[str, Flow]) -> None:
        """A client or server killed by a signal is the run's failure, said as such (a killed pair used
        to read as 'iperf3 did not print JSON')."""
        for side, procs in (("client", clients), ("server", self.servers)):
            for tag, proc in procs.items():
                if (proc.returncode is not None and proc.returncode < 0 and -proc.returncode != signal.SIGTERM
                        and proc.pid not in self.stopped_by_us):
                    raise RunFailure(f"run {req.run_id}: the iperf3 {side} on {flows[tag].where} died "
                                     f"(killed by {signal.Signals(-proc.returncode).name})")

    def _report(self, req: TrafficRun, flow: Flow, c_out: bytes, c_err: bytes, s_out: bytes, s_err: bytes) -> dict:
        """Parse the client's JSON (and, for a download or a fixed size, the server's)."""
        h = self.host
        c_text, s_text = c_out.decode(errors="replace"), s_out.decode(errors="replace")
        run_id = req.together.get(flow.tag, req.run_id)
        try:
            report = parse_iperf3(c_text)
        except ParseError as e:
            raise RunFailure(f"run {run_id}: the iperf3 client on {flow.where}: {e} "
                             f"(stderr: {c_err.decode(errors='replace').strip()[:300]})") from None
        if h.scenario.traffic.bytes is not None:
            self._completion(run_id, flow.where, report, s_text if req.upload else c_text)
        if not req.upload:
            # a download's client only received: the sender's RTT is in the server's JSON
            report["sender_mean_rtt_ms"] = sender_mean_rtt_ms(s_text)
        else:
            # an upload's client intervals count bytes written into its socket, which run ahead of
            # the network at the start (26 Mbit/s "on" two 10 Mbit/s paths): the server received
            received = intervals(s_text)
            if received:
                report["intervals"] = received
        report["intervals_side"] = "receiver's"
        return report

    def _completion(self, run_id: str, where: str, report: dict, receiver_text: str) -> None:
        """A fixed-size transfer's time and throughput: until the receiver had all `traffic.bytes`.

        The sender wrote more (base.fixed_size_extra), so the receiver's count passes
        `bytes` before iperf3 ends. If it still did not, the report keeps iperf3's
        own end and delivered_fraction shows what arrived.
        """
        amount = self.host.scenario.traffic.bytes
        seconds, got = completion_time(receiver_text, amount)
        if seconds is not None:
            report.update(seconds=seconds, throughput_mbps=amount * 8 / seconds / 1e6, bytes_received=amount)
        else:
            report["bytes_received"] = min(report["bytes_received"], amount)
            self.host.log(f"run {run_id}: {where}: the receiver got {got} of {amount} bytes before iperf3 ended "
                          "(a send buffer larger than the extra bytes sent): timed to iperf3's own end")

    def _after_connect(self, clients: dict, flows: list[Flow], run_id: str) -> None:
        """Once iperf3's data connection is up (control + data to the server port), send MP_PRIO etc."""
        h = self.host
        if not any(h.after_connect.get(f.node.name) for f in flows):
            return
        for f in flows:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and clients[f.tag].poll() is None:
                out = run(f.node, ["ss", "-H", "-t", "-n", "state", "established", "dport", "=", f":{f.port}"],
                          check=False).out
                if len([ln for ln in out.splitlines() if ln.strip()]) >= 2:
                    break
                time.sleep(0.05)
            done = []
            for argv in h.after_connect.get(f.node.name, []):
                res = run(f.node, argv, check=False)
                done.append(f"$ {' '.join(argv)} -> {res.rc} {res.err.strip()}")
            h.store.save_raw(run_id, f"after-connect-{f.node.name}.txt", "\n".join(done) + "\n")


@dataclass(frozen=True)
class Iperf:
    """How to run iperf3 under MPTCP on this machine."""

    binary: str = "iperf3"
    native_mptcp: bool = False      # iperf3 >= 3.19 has -m/--mptcp
    mptcpize: str = "mptcpize"

    def wrap(self, argv: Argv, mptcp: bool) -> Argv:
        if not mptcp:
            return argv
        if self.native_mptcp:
            return argv[:1] + ["--mptcp"] + argv[1:]
        return [self.mptcpize, "run"] + argv


# Fixed-size transfers: the receiver reports this often, so that the time its count reached
# `traffic.bytes` (the completion time) is known to a tenth of a second.
COMPLETION_INTERVAL = 0.1


def iperf_server_argv(iperf: Iperf, port: int, mptcp: bool, scenario: Scenario | None = None) -> Argv:
    argv = [iperf.binary, "-s", "-1", "-J", "-p", str(port)]
    if scenario is not None and scenario.traffic.bytes is not None and server_receives(scenario):
        argv += ["-i", f"{COMPLETION_INTERVAL:g}"]   # the server receives: its intervals time the completion
    return iperf.wrap(argv, mptcp)


def v4_mapped(ip: str) -> str:
    return f"::ffff:{ip}"


def needs_v6_socket(plan: TopologyPlan, primary: str, mptcp: bool) -> bool:
    """An AF_INET MPTCP socket can never add IPv6 subflows; an AF_INET6 one (v4-mapped) can add both."""
    return mptcp and plan.path(primary).family == "ipv4" and any(p.family == "ipv6" for p in plan.paths)


def iperf_client_argv(iperf: Iperf, scenario: Scenario, server_ip: str, client_ip: str,
                      port: int, mptcp: bool) -> Argv:
    t = scenario.traffic
    interval = t.interval
    if t.bytes is not None and not server_receives(scenario):
        interval = min(interval, COMPLETION_INTERVAL)   # the client receives: its intervals time the completion
    argv = [iperf.binary, "-c", server_ip, "-B", client_ip, "-p", str(port), "-J",
            "-i", f"{interval:g}", "--connect-timeout", "10000"]
    if t.bytes is not None:
        argv += ["-n", str(t.bytes + fixed_size_extra(scenario))]
    else:
        argv += ["-t", f"{t.duration:g}"]
    if t.omit:
        argv += ["-O", f"{t.omit:g}"]
    if t.direction == "download":
        argv.append("-R")
    return iperf.wrap(argv, mptcp)


def parse_iperf3(text: str) -> dict[str, Any]:
    """Totals and per-interval throughput from one iperf3 `-J` report."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ParseError(f"iperf3 did not print JSON: {e}; output starts {text[:200]!r}") from None
    if not isinstance(doc, dict):
        raise ParseError("iperf3 JSON is not an object")
    if doc.get("error"):
        raise ParseError(f"iperf3 reported an error: {doc['error']}")
    end = doc.get("end") or {}
    sent = end.get("sum_sent") or {}
    received = end.get("sum_received") or {}
    if not received:
        raise ParseError("iperf3 JSON has no end.sum_received (the test did not finish)")
    start = doc.get("start") or {}
    test = start.get("test_start") or {}
    out: dict[str, Any] = {
        "version": start.get("version"),
        "reverse": bool(test.get("reverse", 0)),
        "throughput_mbps": received.get("bits_per_second", 0.0) / 1e6,
        "sender_throughput_mbps": sent.get("bits_per_second", 0.0) / 1e6,
        "bytes_received": int(received.get("bytes", 0)),
        "bytes_sent": int(sent.get("bytes", 0)),
        "seconds": float(received.get("seconds", 0.0)),
        "retransmits": sent.get("retransmits"),
        "connected": [{"local": c.get("local_host"), "local_port": c.get("local_port"),
                       "remote": c.get("remote_host"), "remote_port": c.get("remote_port")}
                      for c in start.get("connected") or []],
        "congestion": end.get("sender_tcp_congestion"),
    }
    out["sender_mean_rtt_ms"] = _sender_mean_rtt_ms(end)
    out["intervals"] = _intervals(doc)
    return out


def _intervals(doc: dict) -> list[dict]:
    return [{"start": iv["sum"]["start"], "end": iv["sum"]["end"],
             "mbps": iv["sum"]["bits_per_second"] / 1e6,
             "retransmits": iv["sum"].get("retransmits"),
             "omitted": bool(iv["sum"].get("omitted", False))}
            for iv in doc.get("intervals") or [] if "sum" in iv]


def intervals(text: str) -> list[dict] | None:
    """The per-interval totals of one side's iperf3 JSON (None without usable JSON)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return None
    return _intervals(doc) if isinstance(doc, dict) else None


def _sender_mean_rtt_ms(end: dict) -> float | None:
    """The sending side's mean smoothed RTT over its streams, in ms. A side that only received
    (the client of a download: "sender": false) has no RTT of its own: None, not its 0."""
    rtts = [s["sender"]["mean_rtt"] for s in end.get("streams") or []
            if isinstance(s.get("sender"), dict) and s["sender"].get("sender", True)
            and s["sender"].get("mean_rtt") is not None]
    return (sum(rtts) / len(rtts) / 1000.0) if rtts else None


def sender_mean_rtt_ms(text: str) -> float | None:
    """From either side's iperf3 JSON: the sender's mean RTT (None if this side did not send, or no JSON)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return None
    return _sender_mean_rtt_ms(doc.get("end") or {}) if isinstance(doc, dict) else None


def completion_time(receiver_text: str, amount: int) -> tuple[float | None, int]:
    """When the receiver's count reached `amount` bytes: (seconds from the test start, bytes it got).

    From the receiver's own iperf3 intervals, interpolated inside the interval
    that crossed `amount` (they are COMPLETION_INTERVAL long). None when it never
    got that far. Why: iperf3 -n ends once the sender has *written* the bytes,
    so its own end is not when they arrived (esnet/iperf#382).
    """
    try:
        doc = json.loads(receiver_text)
    except json.JSONDecodeError as e:
        raise ParseError(f"the receiver's iperf3 did not print JSON: {e}; output starts "
                         f"{receiver_text[:200]!r}") from None
    got = 0
    for iv in (doc.get("intervals") or []) if isinstance(doc, dict) else []:
        s = iv.get("sum") or {}
        n = int(s.get("bytes", 0))
        if n > 0 and got + n >= amount:
            start, end = float(s["start"]), float(s["end"])
            return start + (end - start) * (amount - got) / n, got + n
        got += n
    return None, got


def aggregate_clients(reports: dict[str, dict], ends: dict[str, float] | None = None) -> dict[str, Any]:
    """Several clients' iperf3 reports (run at once) -> one report: sums, plus a per-client table.

    Throughput is the aggregate the servers received: all clients' bytes over the span from the first
    client's start to the last one's end, placed on one clock by `ends` (when each client exited,
    time.monotonic()) less its receiver's seconds. A sum of each client's own average overstated it when
    their windows differed: a SYN lost in the queue the first clients already filled delays a client
    by 1 s (TCP's initial retransmission timeout), and four TCP clients then "received" 30.6 Mbit/s
    through one 25 Mbit/s link in a 4 s run (2026-11-27). An exit comes after iperf3's exchange of
    results, which the first to finish sends through the queue the others still fill: its start may be
    placed a little late, the aggregate read a little high. Without `ends` (fixed-size transfers, whose
    seconds are each one's completion time), the sum of the averages.
    `throughput_per_client_mbps` is the mean of each client's own average (E5's per-client number),
    `clients_start_spread_s` how far apart their transfers began. Intervals add up by index.
    """
    names = list(reports)
    first = reports[names[0]]
    out = dict(first)
    own_sum = sum(r["throughput_mbps"] for r in reports.values())
    out["throughput_mbps"] = own_sum
    out["sender_throughput_mbps"] = sum(r["sender_throughput_mbps"] or 0.0 for r in reports.values())
    out["bytes_received"] = sum(r["bytes_received"] for r in reports.values())
    out["bytes_sent"] = sum(r["bytes_sent"] or 0 for r in reports.values())
    out["seconds"] = max(r["seconds"] for r in reports.values())
    starts = {n: ends[n] - reports[n]["seconds"] for n in names} if ends and set(names) <= set(ends) else {}
    if starts:
        first_start = min(starts.values())
        # at least the longest client's own seconds, which it covers: the differences of clock readings
        # near 1000 s lose the last digits (1234.567891 - (1234.567891 - 4.336016) = 4.3360159999...)
        span = max(max(ends[n] for n in names) - first_start, out["seconds"])
        out["seconds"] = span
        out["throughput_mbps"] = out["bytes_received"] * 8 / span / 1e6
        out["sender_throughput_mbps"] = out["bytes_sent"] * 8 / span / 1e6
        out["clients_start_spread_s"] = max(starts.values()) - first_start
    rts = [r["retransmits"] for r in reports.values()]
    out["retransmits"] = None if any(x is None for x in rts) else sum(rts)
    rtts = [r["sender_mean_rtt_ms"] for r in reports.values() if r.get("sender_mean_rtt_ms") is not None]
    out["sender_mean_rtt_ms"] = sum(rtts) / len(rtts) if rtts else None
    n = min(len(r["intervals"]) for r in reports.values())
    out["intervals"] = [{**first["intervals"][i],
                         "mbps": sum(r["intervals"][i]["mbps"] for r in reports.values()),
                         "retransmits": None if any(r["intervals"][i].get("retransmits") is None
                                                    for r in reports.values())
                         else sum(r["intervals"][i]["retransmits"] for r in reports.values())}
                        for i in range(n)]
    out["throughput_per_client_mbps"] = own_sum / len(reports)
    out["clients"] = {name: {**{k: r.get(k) for k in ("throughput_mbps", "bytes_received", "seconds", "retransmits",
                                                      "sender_mean_rtt_ms")},
                             **({"started_after_s": starts[name] - first_start} if starts else {})}
                      for name, r in reports.items()}
    return out
