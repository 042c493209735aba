"""Native backend: build the topology with Mininet on this kernel and run every run.

Flow: plan (pure) -> Mininet hosts and links -> addresses, offloads, netem
(verified) -> per run: MPTCP endpoints, ping, counters, iperf3, counters ->
results. Cleanup happens in one `finally`, which SIGINT and SIGTERM reach.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

from scenarios.spec.model import Scenario
from scenarios.spec.sweep import Point
from topologies.kinds import plan as make_plan
from topologies.net import build_network
from .. import commands as C
from .. import parsers as P
from .. import procfs
from ..jobs import Job, topology_signature
from controller.decisions import STEER_COOKIE
from controller.launch import user_app_path
from ..controlplane import (ControlPlaneError, Controller, OvsDaemons, check_bridges, ofctl, ofctl_clear_argv,
                           ofctl_dump_argv)
from ..nsexec import ProcessRegistry, run, run_batch
from .probe import ProbeReport
from ..collect import record
from ..collect.record import Observations, RunIdentity, Setting
from ..errors import RunFailure, Terminated
from ..results import ResultStore
from ..traffic import TOOLS, TrafficRun



@contextmanager
def sigterm_raises():
    def handler(signum, frame):
        raise Terminated()
    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@contextmanager
def signals_blocked():
    """Cleanup must not be cut short by a second Ctrl-C."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class NativeRunner:
    """Runs jobs on a Mininet network that it builds, reshapes and tears down as the jobs need.

    Use as a context manager: leaving it (normally, on an exception, on
    Ctrl-C or on SIGTERM) stops every process and the network.
    """

    def __init__(self, store: ResultStore, probe: ProbeReport, log: Callable[[str], None] = print,
                 on_run: Callable[[Job, dict], None] | None = None, base_dir: Path | None = None):
        self.store = store
        self.base_dir = Path(base_dir or ".")
        self.ovs = OvsDaemons(log)
        self.controller: Controller | None = None
        self.probe = probe
        self.log = log
        self.on_run = on_run
        self.procs = ProcessRegistry()
        self.net = None
        self.signature: tuple | None = None
        self.shaping: dict[str, tuple] = {}
        self.sysctl_state: dict[str, list] = {}
        self.buffer_defaults: dict[str, dict[str, str]] = {}
        self.endpoint_state: dict[str, tuple | None] = {}
        self.traffic_ended: float | None = None
        self.iperf = C.Iperf(native_mptcp=bool(probe.facts.get("iperf3_native_mptcp")))
        self._sigterm = None
        # seconds spent in each phase, for metadata.json (what a run costs beyond its traffic)
        self.phases: dict = {"build": 0.0, "shaping": 0.0, "teardown": 0.0, "runs": []}

    # ------------------------------------------------------------ lifecycle

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
                result = self._one_run(job)
            except ControlPlaneError as e:   # OVS or the controller: a run failure like any other
                raise RunFailure(str(e)) from None
            if self.on_run:
                self.on_run(job, result)

    def cleanup(self) -> None:
        t0 = time.monotonic()
        self._stop_everything()
        self.phases["teardown"] = round(self.phases["teardown"] + time.monotonic() - t0, 3)

    def _stop_everything(self) -> None:
        self.procs.stop_all()
        if self.net is not None:
            self.log("cleaning up: stopping Mininet")
            try:
                self.net.stop()
            except Exception as e:  # still try the rest
                self.log(f"warning: Mininet stop failed: {e}")
            self.net = None
            self.signature = None
            self.shaping.clear()
            self.sysctl_state.clear()
            self.buffer_defaults.clear()
            self.endpoint_state.clear()
        if self.controller is not None:
            self.controller.stop()
            self.controller = None
        self.ovs.stop()

    # ------------------------------------------------------------ build and configure

    def _prepare(self, point: Point) -> None:
        """Rebuild only when the topology changes; reshape and re-set sysctls only when they differ."""
        sc = point.scenario
        self.scenario = sc
        self.plan = make_plan(sc)
        sig = topology_signature(point)
        if sig != self.signature:
            self.cleanup()
            self._build()
            self.signature = sig
        t0 = time.monotonic()
        self._sysctls(sc)
        self._shape()
        self.phases["shaping"] = round(self.phases["shaping"] + time.monotonic() - t0, 3)

    def _build(self) -> None:
        t0 = time.monotonic()
        plan = self.plan
        self.log(f"building topology {self.scenario.topology.kind} with {len(plan.paths)} paths")
        if any(w.type != "bridge" for w in plan.switches):
            self.ovs.ensure(userspace=any(w.type == "ovs-user" for w in plan.switches))
        controlled = [w.name for w in plan.switches if w.controller]
        if controlled:
            # before Mininet: OVS backs off for a long time when the controller is not there yet
            self.controller = Controller(self._controller_app(), plan.controller["port"], plan.controller,
                                         self.store.dir / "controller", log=self.log)
            self.controller.start()
        self.net = build_network(plan, plan.controller["port"] if plan.controller else None)
        check_bridges([w.name for w in plan.switches if w.type != "bridge"])
        self.client = self.net.get(plan.client)
        self.clients = [self.net.get(c) for c in plan.all_clients]
        self.server = self.net.get(plan.server)
        per_node: dict[str, list] = {}   # one batched command per namespace
        for node, argvs in plan.setup.items():
            per_node.setdefault(node, []).extend(argvs)
        for iface in plan.interfaces:
            if iface.shaping is not None:
                per_node.setdefault(iface.node, []).append(C.offload_argv(iface.name))
        for node, ifname in plan.offload_off:
            # the userspace datapath does not complete checksums or segment: TCP breaks without this
            per_node.setdefault(node, []).append(C.offload_off_argv(ifname))
        if plan.byte_counters == "nft":
            for node in plan.hosts:
                view = plan.for_client(node) if node in plan.all_clients else plan
                per_node.setdefault(node, []).extend(C.nft_counter_argvs(view, node))
        _at_once(lambda item: run_batch(self.net.get(item[0]), item[1]), per_node.items())
        if self.controller is not None:
            self.controller.wait_connected(controlled)
        self.phases["build"] = round(self.phases["build"] + time.monotonic() - t0, 3)
        self.store.set_metadata(build_seconds=round(time.monotonic() - t0, 2), address_plan=plan.to_dict())

    def _controller_app(self) -> str:
        app = self.plan.controller["app"]
        path = user_app_path(app, self.base_dir)
        if path is None:
            return app
        if not path.is_file():
            raise RunFailure(f"topology.controller.app: no such file {path}")
        return str(path.resolve())

    def check_controller(self, when: str) -> None:
        if self.controller is not None:
            self.controller.check_alive(when)

    def _sysctls(self, sc: Scenario) -> None:
        _at_once(lambda node: self._node_sysctls(node, sc), (*self.clients, self.server))

    def _node_sysctls(self, node, sc: Scenario) -> None:
        if node.name not in self.buffer_defaults:
            # the namespace's own values (copied from the root one), restored for points without `sockets`
            reads = run_batch(node, [["sysctl", "-n", key] for key in C.BUFFER_SYSCTLS])
            self.buffer_defaults[node.name] = {
                key: " ".join(r.out.split()) for key, r in zip(C.BUFFER_SYSCTLS, reads)}
        wanted = C.sysctls(sc, bool(self.probe.facts.get("mptcp_scheduler_sysctl")),
                           self.buffer_defaults[node.name])
        if self.sysctl_state.get(node.name) != wanted:
            run_batch(node, [C.sysctl_argv(key, value) for key, value in wanted])
            self.sysctl_state[node.name] = wanted

    def _shape(self) -> None:
        """netem on both directions of every path, read back and compared; a refusal stops the run.

        One batched command per namespace installs its qdiscs, a second reads them back.
        """
        todo: dict[str, list] = {}
        for iface in self.plan.interfaces:
            if iface.shaping is not None and self.shaping.get(iface.name) != iface.shaping:
                todo.setdefault(iface.node, []).append(iface)
        report = {}
        for part in _at_once(lambda item: self._shape_node(*item), todo.items()):
            report.update(part)
        if report and "shaping" not in self.store.metadata:
            self.store.set_metadata(shaping=report)

    def _shape_node(self, node_name: str, ifaces: list) -> dict:
        report = {}
        node = self.net.get(node_name)
        installed = run_batch(node, [C.netem_argv(i.name, i.shaping) for i in ifaces], check=False)
        for iface, res in zip(ifaces, installed):
            if res.rc != 0:
                raise RunFailure(f"link {iface.link}: tc refused the netem qdisc on {iface.name}: "
                                 f"{(res.err or res.out).strip()} - refusing to run unshaped")
        shown = run_batch(node, [["tc", "-j", "qdisc", "show", "dev", i.name] for i in ifaces])
        for iface, res in zip(ifaces, shown):
            report[iface.name] = self._verify_shaping(iface, res.out)
        return report

    def _verify_shaping(self, iface, shown: str) -> dict:
        shaping = iface.shaping
        got = P.parse_netem(shown)
        want = {"limit": shaping.limit_pkts, "rate_mbit": shaping.rate_mbit,
                "delay_ms": shaping.delay_ms, "loss_pct": shaping.loss_pct}
        bad = P.shaping_mismatches(want, got)
        if bad:
            raise RunFailure(f"link {iface.link}: shaping on {iface.name} did not take: {'; '.join(bad)}")
        self.shaping[iface.name] = shaping
        self.store.save_raw("setup", f"tc-{iface.name}.json", shown)
        return got

    # ------------------------------------------------------------ one run

    def _snapshot(self, run_id: str, label: str) -> dict:
        """Counters of every namespace at once: /proc for TCP/MPTCP and interface counters, one batched
        command per namespace for qdiscs (and nft, endpoints). The raw text is kept beside the run."""
        snap: dict = {"qdiscs": {}}
        multi = len(self.clients) > 1
        sides = [("client", n, f"client-{n.name}" if multi else "client") for n in self.clients]
        sides.append(("server", self.server, "server"))
        shaped = {i.node for i in self.plan.interfaces if i.shaping is not None}
        reads = []
        for side, node, tag in sides:
            wanted = {"qdiscs": C.qdisc_stats_argv()}
            if self.plan.byte_counters == "nft":
                wanted["nft"] = C.nft_list_argv()
            if label == "before":
                wanted["endpoints"] = ["ip", "mptcp", "endpoint", "show"]
            reads.append((side, node, tag, wanted))
        for name in sorted(shaped - {n.name for _, n, _ in sides}):   # routers with shaped links
            reads.append(("router", self.net.get(name), name, {"qdiscs": C.qdisc_stats_argv()}))
        outputs = _at_once(lambda r: run_batch(r[1], list(r[3].values())), reads)
        qdisc_raw = {}
        for (side, node, tag, wanted), results in zip(reads, outputs):
            out = dict(zip(wanted, (r.out for r in results)))
            qdisc_raw[node.name] = out["qdiscs"]
            for dev, counts in P.parse_qdisc_stats_by_dev(out["qdiscs"]).items():
                snap["qdiscs"][(node.name, dev)] = counts
            if side == "router":
                continue
            self._host_counters(snap, run_id, label, side, node, tag)
            if "nft" in out:
                self.store.save_raw(run_id, f"nft-{tag}-{label}.json", out["nft"])
                _add_into(snap, f"{side}_paths", P.parse_nft_counters(out["nft"]))
            if "endpoints" in out:
                snap.setdefault("endpoints", []).append(f"# {node.name}\n{out['endpoints']}")
        if self.plan.switches:
            # switch ports live in the root namespace, this process's own: one read covers every switch
            links = procfs.net_dev_text(os.getpid())
            self.store.save_raw(run_id, f"netdev-switches-{label}.txt", links)
            snap["switch_links"] = procfs.parse_net_dev(links)
        self.store.save_raw(run_id, f"qdiscs-{label}.json", json.dumps(qdisc_raw, indent=1))
        if "endpoints" in snap:
            self.store.save_raw(run_id, "mptcp-endpoints.txt", "\n".join(snap.pop("endpoints")))
        return snap

    def _host_counters(self, snap: dict, run_id: str, label: str, side: str, node, tag: str) -> None:
        nstat = procfs.nstat_text(node.pid)
        self.store.save_raw(run_id, f"nstat-{tag}-{label}.txt", nstat)
        # several clients: their counters add up (all send, or all receive, at once)
        _add_into(snap, f"{side}_nstat", P.parse_nstat(nstat))
        if node is self.client or side == "server":
            links = procfs.net_dev_text(node.pid)
            self.store.save_raw(run_id, f"netdev-{side}-{label}.txt", links)
            snap[f"{side}_links"] = procfs.parse_net_dev(links)

    def path_rx(self, receiver, upload: bool) -> dict[str, int]:
        """Bytes received so far on each path, by the receiver's interface counters or nft counters."""
        if self.plan.byte_counters == "nft":
            total: dict = {}
            for node in ([receiver] if upload else self.clients):
                _add_into(total, "c", P.parse_nft_counters(run(node, C.nft_list_argv(), timeout=10).out))
            counters = total.get("c", {})
            return {p.name: counters.get(p.name, {}).get("in_bytes", 0) for p in self.plan.paths}
        stats = procfs.parse_net_dev(procfs.net_dev_text(receiver.pid))
        return {p.name: stats[p.server_if if upload else p.client_if]["rx_bytes"] for p in self.plan.paths}

    def _link_bytes(self, before: dict, after: dict) -> dict:
        """Bytes over every link of a switched topology, read at its (first) switch end.

        Switch ports live in the root namespace, so one read covers them all:
        `from_peer_bytes` went from the other end into the switch,
        `to_peer_bytes` the other way.
        """
        sw_names = {w.name for w in self.plan.switches}
        out = {}
        for ln, a, a_if, b, b_if in self.plan.links:
            sw, sw_if, peer = (a, a_if, b) if a in sw_names else (b, b_if, a)
            try:
                rx = after["switch_links"][sw_if]["rx_bytes"] - before["switch_links"][sw_if]["rx_bytes"]
                tx = after["switch_links"][sw_if]["tx_bytes"] - before["switch_links"][sw_if]["tx_bytes"]
            except KeyError:
                continue
            out[ln] = {"switch": sw, "peer": peer, "from_peer_bytes": rx, "to_peer_bytes": tx}
        return out

    def _steered_switches(self) -> list:
        cfg = self.plan.controller or {}
        return [w for w in self.plan.switches
                if w.controller and cfg.get("switches", {}).get(w.config_key, {}).get("uplinks")]

    def _clear_steered_flows(self) -> None:
        """Each run starts without steered flows, so its flow counters are its own."""
        for w in self._steered_switches():
            ofctl(ofctl_clear_argv(w.name, STEER_COOKIE))
        if self.controller is not None:
            self.controller.new_report_lines()   # skip what earlier runs reported

    def _steering_report(self, run_id: str) -> dict | None:
        """Which flow went up which uplink: the controller's report, and OVS's own flow counters."""
        switches = self._steered_switches()
        if not switches or self.controller is None:
            return None
        cfg = self.plan.controller
        decided = [e for e in self.controller.new_report_lines() if e.get("event") == "flow"]
        self.store.save_raw(run_id, "controller-flows.jsonl", "".join(json.dumps(e) + "\n" for e in decided))
        per_switch = {}
        for w in switches:
            sc = cfg["switches"][w.config_key]
            names = dict(zip(sc["uplinks"], sc["uplink_names"]))
            text = ofctl(ofctl_dump_argv(w.name, STEER_COOKIE))
            self.store.save_raw(run_id, f"ofctl-flows-{w.name}.txt", text)
            flows = P.parse_ofctl_flows(text)
            uplinks = {n: {"bytes": 0, "packets": 0, "flows": 0} for n in sc["uplink_names"]}
            listed = []
            for f in flows:
                for port in f["outputs"]:
                    if port in names:
                        u = uplinks[names[port]]
                        u["bytes"] += f["n_bytes"]
                        u["packets"] += f["n_packets"]
                        u["flows"] += 1
                        listed.append({"src": f["src"], "sport": f["tp_src"], "dst": f["dst"], "dport": f["tp_dst"],
                                       "uplink": names[port], "bytes": f["n_bytes"], "packets": f["n_packets"]})
            per_switch[w.name] = {"uplinks": uplinks, "flows": listed}
        return {"by": cfg.get("by"), "switches": per_switch, "decisions": decided}

    def _ping_paths(self, run_id: str) -> dict:
        """RTT of every path, all paths at once (each ping is bound to its own path's addresses)."""
        paths = self.plan.paths
        # the first echo of each is unmeasured, so neighbour resolution does not inflate the RTT
        texts = self._ping_all([C.ping_argv(p.client_ip, p.server_ip) for p in paths])
        out = {}
        for p, text in zip(paths, texts):
            self.store.save_raw(run_id, f"ping-{p.name}.txt", text)
            try:
                out[p.name] = P.parse_ping_after_warmup(text)
            except P.ParseError:
                out[p.name] = {"loss_pct": 100.0, "rtt_avg_ms": None}
        return out

    def _ping_all(self, argvs: list[list[str]], timeout: float = 30) -> list[str]:
        """Start every ping, then collect each one's output (stdout and stderr)."""
        procs = [self.procs.start(self.client, argv) for argv in argvs]
        outs = []
        for p in procs:
            try:
                out, err = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
            outs.append((out + err).decode(errors="replace"))
        return outs

    def wait_listening(self, port: int, timeout: float = 20, udp: bool = False) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if procfs.listening(self.server.pid, port, udp=udp):
                return
            time.sleep(0.05)
        raise RunFailure(f"the server did not listen on port {port} within {timeout:g}s")

    def _one_run(self, job: Job) -> dict:
        sc = self.scenario
        rep, primary, mode, run_id = job.rep, job.primary, job.mode, job.run_id
        mptcp = mode == "mptcp"
        self.log(f"run {run_id}: {mode} with primary path {primary}"
                 + (f" [{job.point.label}]" if job.multi_point else ""))
        started, t0 = time.time(), time.monotonic()
        self.marks = [("start", t0)]
        # MPTCP endpoints: set for MPTCP runs (kept while unchanged); TCP baselines ignore them.
        self.check_controller(f"before run {run_id}")
        self.after_connect = {}
        if mptcp:
            todo = []
            for i, node in enumerate(self.clients):
                cmds = C.mptcp_argvs(sc, self.plan.for_client(node.name), primary)
                self.after_connect[node.name] = cmds.after_connect
                todo.append((node, cmds.client, bool(cmds.after_connect)))
                if i == 0:
                    todo.append((self.server, cmds.server, False))
            _at_once(lambda t: self._set_endpoints(*t), todo)
        # TCP baselines leave the endpoints alone: a plain TCP socket never uses them.
        # The endpoints in place are saved with the "before" counters (mptcp-endpoints.txt).
        self._clear_steered_flows()
        self.marks.append(('endpoints', time.monotonic()))
        # the tool's servers start first: their start-up (~1 s in a TCG guest) overlaps the pause and the pings
        tool = TOOLS[sc.traffic.tool](self)
        tool.start_servers(mptcp)
        self.marks.append(('servers', time.monotonic()))
        self._rest_after_last_traffic()
        self.marks.append(('pause', time.monotonic()))
        pings = self._ping_paths(run_id)
        upload = sc.traffic.direction == "upload"
        receiver, sender = (self.server, self.client) if upload else (self.client, self.server)
        self.marks.append(('pings', time.monotonic()))
        before = self._snapshot(run_id, "before")
        self.marks.append(('snapshot_before', time.monotonic()))
        traffic = tool.run(TrafficRun(run_id, primary, mptcp, receiver, upload))
        iperf, samples, ss_samples = traffic.report, traffic.path_samples, traffic.ss_samples
        self.marks.append(('traffic', time.monotonic()))
        self.traffic_ended = self.marks[-1][1]
        after = self._snapshot(run_id, "after")
        self.marks.append(('snapshot_after', time.monotonic()))
        tool = sc.traffic.tool
        setting = Setting(paths=self.plan.paths, byte_counters=self.plan.byte_counters, n_clients=len(self.clients),
                          fixed_size_bytes=sc.traffic.bytes if tool == "iperf3" else None,
                          counters_only=bool(iperf.get("from_counters")))
        seen = Observations(before=before, after=after, pings=pings, path_samples=samples, ss_samples=ss_samples,
                            server_receives=receiver is self.server)
        result = record.build(RunIdentity(run_id, mode, rep, primary, started), iperf, seen, setting)
        if iperf.get("clients"):
            result["clients"] = iperf["clients"]
        if self.plan.switches:
            result["links"] = self._link_bytes(before, after)
            steering = self._steering_report(run_id)
            if steering is not None:
                result["steering"] = steering
        self.check_controller(f"during run {run_id}")
        result.update(point=job.point.id, point_label=job.point.label, params=job.point.params,
                      kernel=os.uname().release)
        if mode == "mptcp" and sc.efficiency_paths:
            result["efficiency_paths"] = sc.efficiency_paths
        self.marks.append(('assemble', time.monotonic()))
        self.store.add_run(result)
        self.marks.append(("store", time.monotonic()))
        wall = self.marks[-1][1] - t0
        traffic = result["metrics"].get("seconds") or 0.0
        steps = {name: round(t - prev, 3) for (_, prev), (name, t) in zip(self.marks, self.marks[1:])}
        self.phases["runs"].append({"id": run_id, "wall": round(wall, 3), "traffic": round(traffic, 3),
                                    "overhead": round(wall - traffic, 3), "steps": steps})
        return result

    def _rest_after_last_traffic(self) -> None:
        """runs.pause of idle time between one run's traffic and the next (queues drain), counted from the
        end of the last traffic: reading counters and saving results already spent part of it."""
        if self.traffic_ended is not None:
            time.sleep(max(0.0, self.scenario.runs.pause / 1000.0 - (time.monotonic() - self.traffic_ended)))

    def _set_endpoints(self, node, argvs: list, dirty: bool = False) -> None:
        """Apply a host's MPTCP endpoints and limits, unless the same set is already in place.

        Re-creating a `signal ... port P` endpoint makes the kernel bind a new
        listener on P, which fails (EADDRINUSE) while the last run's
        connections to P are in TIME_WAIT; an unchanged set is kept instead.
        `dirty`: the run will change flags after connecting (MP_PRIO), so the
        set is re-applied next time.
        """
        key = tuple(tuple(a) for a in argvs)
        if self.endpoint_state.get(node.name) == key:
            return
        for argv, res in zip(argvs, run_batch(node, argvs, check=False)):
            if res.rc != 0:
                hint = (" (a listener for that port could not be bound: the previous run's connections to it "
                        "are still in TIME_WAIT; keep the same signal_ports for every run of a set)"
                        if "listen socket" in res.err else "")
                self.endpoint_state.pop(node.name, None)
                raise RunFailure(f"{node.name}: `{' '.join(argv)}` failed (exit {res.rc}): "
                                 f"{res.err.strip()[:200]}{hint}")
        self.endpoint_state[node.name] = None if dirty else key

def _at_once(fn: Callable, items) -> list:
    """fn on every item in threads of its own (one per namespace: each waits on its own process);
    results in order, and the first exception raised here."""
    items = list(items)
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=len(items)) as pool:
        return list(pool.map(fn, items))


def _add_into(acc: dict, key: str, counters: dict) -> None:
    """acc[key] += counters, for flat or one-level nested dicts of numbers."""
    if key not in acc:
        acc[key] = {k: (dict(v) if isinstance(v, dict) else v) for k, v in counters.items()}
        return
    mine = acc[key]
    for k, v in counters.items():
        if isinstance(v, dict):
            inner = mine.setdefault(k, {})
            for k2, v2 in v.items():
                inner[k2] = inner.get(k2, 0) + v2
        else:
            mine[k] = mine.get(k, 0) + v
