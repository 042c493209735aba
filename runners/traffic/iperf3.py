"""iperf3: one server per client (one port each), all clients at once, under MPTCP (mptcpize, or
iperf3's own --mptcp) or not. With several clients the report is the aggregate, with a per-client table."""
from __future__ import annotations

import signal
import subprocess
import time

from .. import commands
from .. import parsers
from ..errors import RunFailure
from ..nsexec import run
from .barrier import StartBarrier
from .base import BASE_PORT, TrafficReport, TrafficResult, TrafficRun, TrafficTool


class Iperf3Tool(TrafficTool):
    name = "iperf3"

    def __init__(self, host):
        super().__init__(host)
        self.servers: dict = {}
        self.stopped_by_us: set[int] = set()
        self.barrier: StartBarrier | None = None
        # iperf3 3.12 has no --mptcp: mptcpize wraps it instead
        self.iperf = commands.Iperf(native_mptcp=bool(host.probe.facts.get("iperf3_native_mptcp")))

    def start_servers(self, mptcp: bool) -> None:
        h = self.host
        self.servers = {node.name: h.procs.start(h.server, commands.iperf_server_argv(self.iperf, BASE_PORT + i, mptcp,
                                                                                h.scenario))
                        for i, node in enumerate(h.clients)}

    def run(self, req: TrafficRun) -> TrafficResult:
        h = self.host
        try:
            for i in range(len(h.clients)):
                h.wait_listening(BASE_PORT + i)
            sampler = self.sampler(req)
            clients = self._start_clients(req)
            self._after_connect(clients, req.run_id)
            ss_samples = self.watch_subflows(clients[h.client.name])
            try:
                outs = self._wait_clients(clients, req.run_id)
            finally:
                samples = sampler.stop(h.log)
            self._collect_servers(outs)
        finally:
            h.procs.stop_all()
            if self.barrier is not None:
                self.barrier.close()    # after the clients: one that opened the FIFO late still got its line
                self.barrier = None
        h.store.save_raw(req.run_id, "ss-subflows.txt", "\n\n".join(s["raw"] for s in ss_samples))
        for name, out in outs.items():
            self._save(req, name, *out)
        self._no_killed_process(req, clients)
        reports = {name: self._report(req, name, *out) for name, out in outs.items()}
        report = parsers.aggregate_clients(reports) if len(h.clients) > 1 else reports[h.client.name]
        return TrafficResult(TrafficReport.from_iperf3(report), samples, ss_samples)

    def _start_clients(self, req: TrafficRun) -> dict:
        h = self.host
        argvs = {}
        for i, node in enumerate(h.clients):
            cp = h.plan.for_client(node.name).path(req.primary)
            s_ip, c_ip = cp.server_ip, cp.client_ip
            if commands.needs_v6_socket(h.plan, req.primary, req.mptcp):
                s_ip, c_ip = commands.v4_mapped(s_ip), commands.v4_mapped(c_ip)
            argvs[node] = commands.iperf_client_argv(self.iperf, h.scenario, s_ip, c_ip, BASE_PORT + i, req.mptcp)
        if len(argvs) == 1:
            return {node.name: h.procs.start(node, argv) for node, argv in argvs.items()}
        self.barrier = StartBarrier(len(argvs))
        clients = {node.name: h.procs.start(node, self.barrier.wrap(argv)) for node, argv in argvs.items()}
        self.barrier.release(list(clients.values()))
        return clients

    def _wait_clients(self, clients: dict, run_id: str) -> dict[str, list[bytes]]:
        deadline = time.monotonic() + self.timeout()
        return {name: [*self.wait_client(proc, deadline, run_id, f"iperf3 client on {name}"), b"", b""]
                for name, proc in clients.items()}

    def _collect_servers(self, outs: dict[str, list[bytes]]) -> None:
        for name, server in self.servers.items():
            try:
                s_out, s_err = server.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
                self.stopped_by_us.add(server.pid)
                s_out, s_err = server.communicate()
            outs[name][2:] = [s_out, s_err]

    def _save(self, req: TrafficRun, name: str, c_out: bytes, c_err: bytes, s_out: bytes, s_err: bytes) -> None:
        """One client's and its server's output, kept raw whatever happened."""
        h = self.host
        tag = f"-{name}" if len(h.clients) > 1 else ""
        h.store.save_raw(req.run_id, f"iperf3-client{tag}.json", c_out.decode(errors="replace"))
        h.store.save_raw(req.run_id, f"iperf3-server{tag}.json", s_out.decode(errors="replace"))
        if c_err.strip() or s_err.strip():
            h.store.save_raw(req.run_id, f"iperf3-stderr{tag}.txt",
                             f"# client\n{c_err.decode(errors='replace')}\n# server\n{s_err.decode(errors='replace')}")

    def _no_killed_process(self, req: TrafficRun, clients: dict) -> None:
        """A client or server killed by a signal is the run's failure, said as such (a killed pair used
        to read as 'iperf3 did not print JSON')."""
        for side, procs in (("client", clients), ("server", self.servers)):
            for name, proc in procs.items():
                if (proc.returncode is not None and proc.returncode < 0 and -proc.returncode != signal.SIGTERM
                        and proc.pid not in self.stopped_by_us):
                    raise RunFailure(f"run {req.run_id}: the iperf3 {side} on {name} died "
                                     f"(killed by {signal.Signals(-proc.returncode).name})")

    def _report(self, req: TrafficRun, name: str, c_out: bytes, c_err: bytes, s_out: bytes, s_err: bytes) -> dict:
        """Parse the client's JSON (and, for a download or a fixed size, the server's)."""
        h = self.host
        c_text, s_text = c_out.decode(errors="replace"), s_out.decode(errors="replace")
        try:
            report = parsers.parse_iperf3(c_text)
        except parsers.ParseError as e:
            raise RunFailure(f"run {req.run_id}: {name}: {e} "
                             f"(stderr: {c_err.decode(errors='replace').strip()[:300]})") from None
        if h.scenario.traffic.bytes is not None:
            self._completion(req.run_id, name, report, s_text if req.upload else c_text)
        if not req.upload:
            # a download's client only received: the sender's RTT is in the server's JSON
            report["sender_mean_rtt_ms"] = parsers.sender_mean_rtt_ms(s_text)
        else:
            # an upload's client intervals count bytes written into its socket, which run ahead of
            # the network at the start (26 Mbit/s "on" two 10 Mbit/s paths): the server received
            received = parsers.intervals(s_text)
            if received:
                report["intervals"] = received
        report["intervals_side"] = "receiver's"
        return report

    def _completion(self, run_id: str, name: str, report: dict, receiver_text: str) -> None:
        """A fixed-size transfer's time and throughput: until the receiver had all `traffic.bytes`.

        The sender wrote more (commands.fixed_size_extra), so the receiver's count passes
        `bytes` before iperf3 ends. If it still did not, the report keeps iperf3's
        own end and delivered_fraction shows what arrived.
        """
        amount = self.host.scenario.traffic.bytes
        seconds, got = parsers.completion_time(receiver_text, amount)
        if seconds is not None:
            report.update(seconds=seconds, throughput_mbps=amount * 8 / seconds / 1e6, bytes_received=amount)
        else:
            report["bytes_received"] = min(report["bytes_received"], amount)
            self.host.log(f"run {run_id}: {name}: the receiver got {got} of {amount} bytes before iperf3 ended "
                          "(a send buffer larger than the extra bytes sent): timed to iperf3's own end")

    def _after_connect(self, clients: dict, run_id: str) -> None:
        """Once iperf3's data connection is up (control + data to the server port), send MP_PRIO etc."""
        h = self.host
        if not any(h.after_connect.get(n) for n in clients):
            return
        for i, (name, proc) in enumerate(clients.items()):
            node = h.network.get(name)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and proc.poll() is None:
                out = run(node, ["ss", "-H", "-t", "-n", "state", "established", "dport", "=", f":{BASE_PORT + i}"],
                          check=False).out
                if len([ln for ln in out.splitlines() if ln.strip()]) >= 2:
                    break
                time.sleep(0.05)
            done = []
            for argv in h.after_connect.get(name, []):
                res = run(node, argv, check=False)
                done.append(f"$ {' '.join(argv)} -> {res.rc} {res.err.strip()}")
            h.store.save_raw(run_id, f"after-connect-{name}.txt", "\n".join(done) + "\n")
