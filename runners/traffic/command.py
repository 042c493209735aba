"""A user's own tool (traffic.command) in place of iperf3; the same counters are read around it.

Its result is what the client prints as JSON (`result: json`), or the receiver's per-path counters
(`result: counters`), which collect.record turns into the run's throughput.
"""
from __future__ import annotations

import json
import time

from scenarios.spec import placeholders
from scenarios.spec.model import Scenario
from topologies.plan import TopologyPlan

from runners.errors import RunFailure
from runners.linux.nsexec import Argv, run
from runners.traffic.base import (BASE_PORT, Reaper, TrafficReport, TrafficResult, TrafficRun, TrafficTool,
                                  subflow_samples_json)


class CommandTool(TrafficTool):
    name = "command"

    def run(self, req: TrafficRun) -> TrafficResult:
        h = self.host
        tool = h.scenario.traffic.command
        values = command_values(h.scenario, h.plan, req.primary, BASE_PORT)

        def argv(words):
            filled = fill(words, values)
            return ["mptcpize", "run", *filled] if (req.mptcp and tool.mptcpize) else filled
        self._setup(req, values)
        server = h.procs.start(h.server, argv(tool.server)) if tool.server else None
        sampler = None
        try:
            self._wait_server(req, server)
            sampler = self.sampler(req)
            t0 = time.monotonic()
            client = h.procs.start(h.client, argv(tool.client))
            # its output is read as it comes: a chatty command must not block on a full pipe while its
            # subflows are sampled (to the run's end when its paths change)
            reaper = Reaper({"client": client})
            subflow_samples = self.watch_subflows(client, sampler.t0, req.mptcp, req.run_id)
            try:
                got = self.wait_clients(reaper, t0 + self.timeout(), req.run_id, {"client": "the client command"})
                c_out, c_err, ended = got["client"]
            finally:
                samples = sampler.stop(h.log)
            seconds = ended - t0   # when it exited, as its reader saw it
        finally:
            if sampler is not None and not sampler.stopped:   # the client failed to start
                sampler.stop(h.log)
            h.procs.stop_all()
        self._save(req, server, c_out, c_err, subflow_samples)
        if client.returncode != 0:
            raise RunFailure(f"run {req.run_id}: the client command failed (exit {client.returncode}): "
                             f"{c_err.decode(errors='replace').strip()[:300]}")
        return TrafficResult(self._report(req, c_out.decode(errors="replace"), seconds), samples, subflow_samples)

    def _setup(self, req: TrafficRun, values: dict) -> None:
        h = self.host
        tool = h.scenario.traffic.command
        for node, cmds in ((h.client, tool.setup_client), (h.server, tool.setup_server)):
            for words in cmds:
                res = run(node, fill(words, values), check=False, timeout=120)
                h.store.save_raw(req.run_id, f"setup-{node.name}.txt", f"$ {' '.join(res.argv)}\n{res.out}{res.err}")
                if res.rc != 0:
                    raise RunFailure(f"run {req.run_id}: setup command `{' '.join(res.argv)}` failed "
                                     f"(exit {res.rc}): {(res.err or res.out).strip()[:300]}")

    def _wait_server(self, req: TrafficRun, server) -> None:
        tool = self.host.scenario.traffic.command
        if tool.ready_port:
            self.host.wait_listening(tool.ready_port, udp=True)
        elif server is not None:
            time.sleep(1.0)
        if server is not None and server.poll() is not None:
            out, err = server.communicate()
            raise RunFailure(f"run {req.run_id}: the server command exited at once ({server.returncode}): "
                             f"{(err or out).decode(errors='replace').strip()[:300]}")

    def _save(self, req: TrafficRun, server, c_out: bytes, c_err: bytes, subflow_samples: list[dict]) -> None:
        store = self.host.store
        if server is not None:
            s_out, s_err = server.communicate()
            store.save_raw(req.run_id, "tool-server.txt",
                           s_out.decode(errors="replace") + s_err.decode(errors="replace"))
        store.save_raw(req.run_id, "tool-client.txt", c_out.decode(errors="replace") + c_err.decode(errors="replace"))
        if req.mptcp:
            store.save_raw(req.run_id, "subflows.json", subflow_samples_json(subflow_samples))

    def _report(self, req: TrafficRun, c_text: str, seconds: float) -> TrafficReport:
        tool = self.host.scenario.traffic.command
        report = TrafficReport(seconds=seconds, version=" ".join(tool.client[:1]),
                               counters_only=tool.result == "counters")
        if tool.result == "json":
            try:
                doc = json.loads(c_text)
                report.seconds = float(doc.get("seconds", seconds))
                if "throughput_mbps" in doc:
                    report.throughput_mbps = float(doc["throughput_mbps"])
                else:
                    report.throughput_mbps = float(doc["bytes"]) * 8 / report.seconds / 1e6
                report.bytes_received = int(doc.get("bytes", 0))
            except (ValueError, KeyError, TypeError) as e:
                raise RunFailure(f"run {req.run_id}: result: json, but the client printed no usable JSON ({e})") \
                    from None
        return report


def command_values(scenario: Scenario, plan: TopologyPlan, primary: str, port: int) -> dict[str, str]:
    """What the placeholders of a `traffic.command` tool stand for, in this run."""
    t = scenario.traffic
    first = plan.path(primary)
    values = {"server_ip": first.server_ip, "client_ip": first.client_ip, "port": str(port),
              "duration": f"{t.duration:g}" if t.duration is not None else "",
              "bytes": str(t.bytes) if t.bytes is not None else "", "interval": f"{t.interval:g}"}
    for p in plan.paths:
        values[f"server_ip:{p.name}"] = p.server_ip
        values[f"client_ip:{p.name}"] = p.client_ip
    return values


def fill(argv: list[str], values: dict[str, str]) -> Argv:
    """Substitute placeholders word by word; the result is still an argument list, never a shell line."""
    return [placeholders.fill(w, values) for w in argv]
