"""Counter snapshots around a run, read from every namespace at once.

TCP/MPTCP counters and interface counters come from /proc, qdisc statistics
over rtnetlink and the per-path nft counters over netlink (no process start);
the MPTCP endpoints from one batched command per namespace. The raw text is
kept beside the run.
"""
from __future__ import annotations

import json
import os
from collections.abc import Collection
from concurrent.futures import Future, ThreadPoolExecutor

from topologies.plan import TopologyPlan

from runners.errors import RunFailure
from runners.linux import procfs, rtnetlink
from runners.linux.nsexec import Argv, at_once, run_batch


def by_namespace(shaped: list[tuple[str, str]], namespace_of) -> list[tuple[str, dict[str, str]]]:
    """(node, device) pairs -> one (a node to read through, {device: its node}) per namespace: a device's
    name is unique in its namespace, and Open vSwitch switches all live in the root one."""
    groups: dict[object, tuple[str, dict[str, str]]] = {}
    for node, dev in shaped:
        groups.setdefault(namespace_of(node), (node, {}))[1][dev] = node
    return list(groups.values())


class Counters:
    """Reads the counters of the runner's network (`host`, the RunContext: plan, network, clients, client,
    server, store)."""

    def __init__(self, host):
        self.host = host

    def _sides(self) -> list[tuple[str, object, str]]:
        """(side, node, tag) of every host whose counters a run keeps."""
        multi = len(self.host.clients) > 1
        sides = [("client", n, f"client-{n.name}" if multi else "client") for n in self.host.clients]
        return sides + [("server", self.host.server, "server")]

    def read_endpoints_meanwhile(self) -> Future:
        """Every host's MPTCP endpoints (`ip mptcp endpoint show`), read in the background: started before
        the pause between runs, they are ready for the "before" snapshot without costing it a process."""
        pool = ThreadPoolExecutor(max_workers=1)
        sides = self._sides()
        future = pool.submit(lambda: [f"# {node.name}\n{res[0].out}" for (_, node, _), res in zip(sides, at_once(
            lambda s: run_batch(s[1], [["ip", "mptcp", "endpoint", "show"]]), sides))])
        pool.shutdown(wait=False)
        return future

    def shaped_nodes(self) -> list[str]:
        """Every namespace with a shaped interface."""
        return sorted({i.node for i in self.host.plan.shaped_interfaces()})

    def qdiscs(self, name: str, devs: Collection[str] | None = None) -> list[dict]:
        """A node's qdiscs with their counters (rtnetlink), or only the root qdiscs of `devs`; RunFailure
        when the kernel will not say."""
        try:
            return self.host.network.qdisc_reader(name).qdiscs(devs)
        except OSError as e:   # the node's namespace gone (its shell died), or no answer
            raise RunFailure(f"{name}: its qdisc counters could not be read over netlink: {e}") from None

    def namespace_of(self, name: str) -> int:
        return self.host.network.namespace_of(name)

    def shaped_by_namespace(self) -> list[tuple[str, dict[str, str]]]:
        """The shaped interfaces, one entry per namespace: (a node to read it through, {device: its node})."""
        return by_namespace([(i.node, i.name) for i in self.host.plan.shaped_interfaces()], self.namespace_of)

    def queues_empty(self) -> bool:
        """No packet waits in any qdisc of a shaped interface (netem counts the packets it delays too)."""
        for reader, devs in self.shaped_by_namespace():
            if any(q.get("qlen") or q.get("backlog") for q in self.qdiscs(reader, devs)):
                return False
        return True

    def snapshot(self, run_id: str, label: str, endpoints: list[str] | None = None) -> dict:
        """Counters of every namespace: /proc for TCP/MPTCP and interface counters, netlink for qdiscs and
        nft counters; `endpoints` (read_endpoints_meanwhile's
        result) is kept with it. The raw text is kept beside the run."""
        snap: dict = {"qdiscs": {}}
        sides = self._sides()
        nodes = [node.name for _, node, _ in sides]
        nodes += [name for name in self.shaped_nodes() if name not in nodes]   # routers with shaped links
        qdisc_raw = {name: self.qdiscs(name) for name in nodes}
        for name, qdiscs in qdisc_raw.items():
            for dev, counts in rtnetlink.root_qdisc_counts(qdiscs).items():
                snap["qdiscs"][(name, dev)] = counts
        nft = {tag: self.nft_counters(node) for _, node, tag in sides} if self.host.plan.byte_counters == "nft" else {}
        for side, node, tag in sides:
            self._host_counters(snap, run_id, label, side, node, tag)
            if tag in nft:
                self.host.store.save_raw(run_id, f"nft-{tag}-{label}.json", json.dumps(nft[tag], indent=1) + "\n")
                _add_into(snap, f"{side}_paths", nft[tag])
        if endpoints is not None:
            snap["endpoints"] = endpoints
        if self.host.plan.switches:
            # switch ports live in the root namespace, this process's own: one read covers every switch
            links = procfs.net_dev_text(os.getpid())
            self.host.store.save_raw(run_id, f"netdev-switches-{label}.txt", links)
            snap["switch_links"] = procfs.parse_net_dev(links)
        # the qdiscs as `tc -s -j qdisc show` gives them, without their options (read over rtnetlink)
        self.host.store.save_raw(run_id, f"qdiscs-{label}.json", json.dumps(qdisc_raw, indent=1))
        if "endpoints" in snap:
            self.host.store.save_raw(run_id, "mptcp-endpoints.txt", "\n".join(snap.pop("endpoints")))
        return snap

    def _host_counters(self, snap: dict, run_id: str, label: str, side: str, node, tag: str) -> None:
        nstat = procfs.nstat_text(node.pid)
        self.host.store.save_raw(run_id, f"nstat-{tag}-{label}.txt", nstat)
        # several clients: their counters add up (all send, or all receive, at once)
        _add_into(snap, f"{side}_nstat", procfs.parse_nstat(nstat))
        if node is self.host.client or side == "server":
            links = procfs.net_dev_text(node.pid)
            self.host.store.save_raw(run_id, f"netdev-{side}-{label}.txt", links)
            snap[f"{side}_links"] = procfs.parse_net_dev(links)

    def path_rx(self, receiver, upload: bool) -> dict[str, int]:
        """Bytes received so far on each path, by the receiver's interface counters or nft counters."""
        if self.host.plan.byte_counters == "nft":
            total: dict = {}
            for node in ([receiver] if upload else self.host.clients):
                _add_into(total, "c", self.nft_counters(node))
            counters = total.get("c", {})
            return {p.name: counters.get(p.name, {}).get("in_bytes", 0) for p in self.host.plan.paths}
        stats = procfs.parse_net_dev(procfs.net_dev_text(receiver.pid))
        return {p.name: stats[p.server_if if upload else p.client_if]["rx_bytes"] for p in self.host.plan.paths}

    def nft_counters(self, node) -> dict[str, dict[str, int]]:
        """A host's per-path nft counters (netlink): {path: {in_bytes, in_packets, out_bytes, out_packets}};
        RunFailure when they cannot be read."""
        try:
            found = self.host.network.nft_reader(node.name).by_path()
        except OSError as e:
            raise RunFailure(f"{node.name}: its per-path nft counters could not be read over netlink: {e}") from None
        missing = [p.name for p in self.host.plan.paths if p.name not in found]
        if missing:   # every path has its rules in every host's table: a missing one would read 0 bytes
            raise RunFailure(f"{node.name}: its nft table has no counted rule for path(s) {', '.join(missing)} "
                             f"(it has {', '.join(sorted(found)) or 'none'})")
        return found

    def link_bytes(self, before: dict, after: dict) -> dict:
        """Bytes over every link of a switched topology, read at its (first) switch end.

        Switch ports live in the root namespace, so one read covers them all:
        `from_peer_bytes` went from the other end into the switch,
        `to_peer_bytes` the other way.
        """
        sw_names = {w.name for w in self.host.plan.switches}
        out = {}
        for ln, a, a_if, b, b_if in self.host.plan.links:
            sw, sw_if, peer = (a, a_if, b) if a in sw_names else (b, b_if, a)
            try:
                rx = after["switch_links"][sw_if]["rx_bytes"] - before["switch_links"][sw_if]["rx_bytes"]
                tx = after["switch_links"][sw_if]["tx_bytes"] - before["switch_links"][sw_if]["tx_bytes"]
            except KeyError:
                continue
            out[ln] = {"switch": sw, "peer": peer, "from_peer_bytes": rx, "to_peer_bytes": tx}
        return out


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


NFT_TABLE = ["inet", "mptb"]


def nft_counter_argvs(plan: TopologyPlan, node: str) -> list[Argv]:
    """Per-path byte counters in a host's namespace, by address pair, both directions.

    Interface counters cannot tell IPv4 from IPv6 on one dual-stack
    interface, so routed topologies count each path's bytes here.
    """
    out = [["nft", "add", "table", *NFT_TABLE],
           ["nft", "add", "chain", *NFT_TABLE, "in", "{ type filter hook input priority 0 ; policy accept ; }"],
           ["nft", "add", "chain", *NFT_TABLE, "out", "{ type filter hook output priority 0 ; policy accept ; }"]]
    every_client = node == plan.server and len(plan.all_clients) > 1
    for p in plan.paths:
        ip = "ip" if p.family == "ipv4" else "ip6"
        mine, peer = (p.client_ip, p.server_ip) if node == plan.client else (p.server_ip, p.client_ip)
        if every_client:
            # several clients: each path's server address is its own, so it alone names the path
            out.append(["nft", "add", "rule", *NFT_TABLE, "in", ip, "daddr", mine, "counter", "comment", f'"{p.name}"'])
            out.append(["nft", "add", "rule", *NFT_TABLE, "out", ip, "saddr", mine, "counter", "comment",
                        f'"{p.name}"'])
            continue
        out.append(["nft", "add", "rule", *NFT_TABLE, "in", ip, "saddr", peer, ip, "daddr", mine,
                    "counter", "comment", f'"{p.name}"'])
        out.append(["nft", "add", "rule", *NFT_TABLE, "out", ip, "saddr", mine, ip, "daddr", peer,
                    "counter", "comment", f'"{p.name}"'])
    return out
