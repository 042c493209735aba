"""Pure topology planning: nodes, links, interfaces, addresses, routes and shaping, from the model.

Every topology kind (one module each, looked up in topologies.kinds) produces
the same TopologyPlan, so the Mininet builder (topologies.net) and the runner
do not care which kind they are running.
Nothing here touches the kernel; the unit tests check the plans directly.
"""
from __future__ import annotations

import math
from typing import NamedTuple
from dataclasses import dataclass, replace

from scenarios.spec.model import Shaped
from scenarios.spec.units import format_mbit, format_ms

CLIENT = "h1"
SERVER = "h2"
MTU_BYTES = 1500

Argv = list[str]


class PlanError(ValueError):
    """The scenario is valid field by field but cannot be laid out (e.g. conflicting routes): exit 2.

    `problems`: every one found, so a user fixes them all in one go.
    """

    def __init__(self, *problems: str):
        self.problems = list(problems)
        super().__init__("\n".join(problems))


# With rate_at_dequeue, the rate is a TBF at the root and netem its child (handle 10:, in TBF's class 1:1).
# TBF's bucket: 5 ms at the rate, at least two full frames. Under TCG, where its timer fires late, that kept
# 9.4-177 Mbit/s of 10-200 in one iperf3 flow, as netem's own rate did (2026-11-26, kernel 6.1).
TBF_HANDLE, NETEM_PARENT, NETEM_HANDLE = "1:", "1:1", "10:"
TBF_BURST_S = 0.005
TBF_MIN_BURST_BYTES = 3200
TBF_LIMIT_BYTES = 3000    # tc requires one; it sizes TBF's default child, which netem replaces


@dataclass(frozen=True)
class Shaping:
    """The shaping of one direction of a bottleneck link: one netem qdisc (rate, delay, loss, limit), or,
    with `rate_at_dequeue`, the rate in a TBF at the root and the rest in a netem under it.

    netem fixes a packet's send time at its rate when the packet is queued, and `tc qdisc change` does
    not reschedule what is queued: after a rate step, the queue still leaves at the old rate (up to a
    second at 1 Mbit/s; bench.events, 2026-11-26). TBF takes its rate at dequeue, so a step takes effect
    on the next packet. Paths and links whose rate changes during a run (a trace, a `shape` of bw) get
    it; the others keep one netem, as every measurement in the docs had it."""

    rate_mbit: float
    delay_ms: float
    loss_pct: float
    limit_pkts: int
    rate_at_dequeue: bool = False

    def netem_args(self) -> list[str]:
        args = ["netem"] if self.rate_at_dequeue else ["netem", "rate", format_mbit(self.rate_mbit)]
        if self.delay_ms > 0:
            args += ["delay", format_ms(self.delay_ms)]
        if self.loss_pct > 0:
            args += ["loss", f"{self.loss_pct:g}%"]
        args += ["limit", str(self.limit_pkts)]
        return args


    def tbf_args(self) -> list[str]:
        burst = max(TBF_MIN_BURST_BYTES, math.ceil(self.rate_mbit * 1e6 / 8 * TBF_BURST_S))
        return ["tbf", "rate", format_mbit(self.rate_mbit), "burst", str(burst), "limit", str(TBF_LIMIT_BYTES)]


def shaping_argvs(ifname: str, shaping: Shaping, verb: str = "replace") -> list[Argv]:
    """The tc commands that install (`replace`) or change in place (`change`) an interface's shaping."""
    if not shaping.rate_at_dequeue:
        return [["tc", "qdisc", verb, "dev", ifname, "root"] + shaping.netem_args()]
    return [["tc", "qdisc", verb, "dev", ifname, "root", "handle", TBF_HANDLE] + shaping.tbf_args(),
            ["tc", "qdisc", verb, "dev", ifname, "parent", NETEM_PARENT, "handle", NETEM_HANDLE]
            + shaping.netem_args()]


@dataclass(frozen=True)
class Interface:
    node: str
    name: str
    link: str
    addrs: tuple[tuple[str, str, int], ...]   # (family, address, prefix length)
    shaping: Shaping | None

    def addr(self, family: str) -> str | None:
        return next((a for f, a, _ in self.addrs if f == family), None)


@dataclass(frozen=True)
class PathPlan:
    """Where a subflow on this path starts and ends: the initial subflow binds and connects to these."""

    name: str
    index: int
    family: str
    client_if: str
    server_if: str
    client_ip: str
    server_ip: str
    table: int
    shaping: Shaping | None = None
    # (node, interface) whose qdisc sends this path's packets, client->server and server->client
    egress_up: tuple[tuple[str, str], ...] = ()
    egress_down: tuple[tuple[str, str], ...] = ()


class LinkPlan(NamedTuple):
    """One link: its name and its two ends, each a node and that node's interface."""
    name: str
    a: str
    a_if: str
    b: str
    b_if: str


@dataclass(frozen=True)
class SwitchPlan:
    """One switch: its Mininet/OVS settings and the OpenFlow port of each link."""

    name: str
    type: str                      # ovs | ovs-user | bridge
    controller: bool
    dpid: str                      # 16 hex digits
    ports: tuple[tuple[str, int], ...] = ()   # (link name, OpenFlow port number)

    def port(self, link: str) -> int:
        return next(n for ln, n in self.ports if ln == link)

    @property
    def config_key(self) -> str:
        """The datapath id in decimal: how the controller config (and os-ken) name the switch."""
        return str(int(self.dpid, 16))


@dataclass(frozen=True)
class TopologyPlan:
    kind: str
    client: str
    server: str
    paths: tuple[PathPlan, ...]
    interfaces: tuple[Interface, ...]
    links: tuple[LinkPlan, ...]
    setup: dict[str, list[Argv]]                           # per node, in order
    routers: tuple[str, ...] = ()
    byte_counters: str = "iface"                           # per-path bytes: interface counters or nft
    switches: tuple[SwitchPlan, ...] = ()
    clients: tuple[str, ...] = ()                          # all clients (default: just `client`)
    client_paths: tuple[tuple[str, tuple[PathPlan, ...]], ...] = ()   # per client, when several
    controller: dict | None = None                         # app, port, and the config handed to it
    offload_off: tuple[tuple[str, str], ...] = ()          # (node, interface): TX csum/TSO/GSO off (ovs-user)

    def shaped_interfaces(self) -> list[Interface]:
        """The interfaces netem shapes (a path's or a link's), in plan order."""
        return [i for i in self.interfaces if i.shaping is not None]

    def link_ports(self) -> list[tuple[str, str, str, str, int, int]]:
        """(node a, node b, interface on a, interface on b, port on a, port on b) per link: a switch's
        ports are its OpenFlow numbers, a host counts its own from 0 in link order."""
        ports = {(w.name, ln): n for w in self.switches for ln, n in w.ports}
        host_port: dict[str, int] = {}
        out = []
        for ln, a, a_if, b, b_if in self.links:
            pa, pb = ports.get((a, ln)), ports.get((b, ln))
            if pa is None:
                pa = host_port[a] = host_port.get(a, -1) + 1
            if pb is None:
                pb = host_port[b] = host_port.get(b, -1) + 1
            out.append((a, b, a_if, b_if, pa, pb))
        return out

    def link_macs(self) -> list[tuple[str, str]]:
        """(MAC on a, MAC on b) per link, in link order: locally administered, from the link's number,
        so that captures and neighbour tables read the same in every run."""
        return [(link_mac(k, 1), link_mac(k, 2)) for k in range(1, len(self.links) + 1)]

    @property
    def all_clients(self) -> tuple[str, ...]:
        return self.clients or (self.client,)

    @property
    def hosts(self) -> tuple[str, ...]:
        return (*self.all_clients, self.server)

    def for_client(self, client: str) -> "TopologyPlan":
        """The plan as one client sees it: its own addresses on every path."""
        if client == self.client:
            return self
        paths = dict(self.client_paths)[client]
        return replace(self, client=client, paths=paths)

    def path(self, name: str) -> PathPlan:
        return next(p for p in self.paths if p.name == name)

    def interface(self, name: str) -> Interface:
        return next(i for i in self.interfaces if i.name == name)

    def to_dict(self) -> dict:
        return {
            "kind": self.kind, "client": self.client, "server": self.server, "routers": list(self.routers),
            "clients": list(self.all_clients),
            "switches": [{"name": w.name, "type": w.type, "controller": w.controller, "dpid": w.dpid,
                          "ports": {ln: n for ln, n in w.ports}} for w in self.switches],
            "interfaces": [{"node": i.node, "name": i.name, "link": i.link,
                            "addresses": [f"{a}/{n}" for _, a, n in i.addrs],
                            "netem": " ".join(i.shaping.netem_args()) if i.shaping else None,
                            **({"tbf": " ".join(i.shaping.tbf_args())}
                               if i.shaping and i.shaping.rate_at_dequeue else {})}
                           for i in self.interfaces],
            "paths": [{"name": p.name, "family": p.family, "client": f"{p.client_ip} ({p.client_if})",
                       "server": f"{p.server_ip} ({p.server_if})", "client_routing_table": p.table}
                      for p in self.paths],
            "setup": {n: [" ".join(a) for a in argvs] for n, argvs in self.setup.items()},
        }


def join_how(scenario, first: PathPlan, path: PathPlan) -> str:
    """How a path other than the primary gets its subflow: `signal` when its server address differs from
    the primary's (in `subflow` mode only when its client address does not), else `subflow`."""
    new_client = path.client_ip != first.client_ip
    new_server = path.server_ip != first.server_ip
    return "signal" if new_server and (scenario.mptcp.endpoints == "signal" or not new_client) else "subflow"





def link_mac(number: int, end: int) -> str:
    """02:00:00:LL:LL:EE: link `number` (from 1), end 1 or 2; 02 marks it locally administered, unicast."""
    if not (0 < number < 1 << 16 and end in (1, 2)):
        raise ValueError(f"no MAC for link {number}, end {end}")
    return f"02:00:00:{number >> 8:02x}:{number & 0xff:02x}:{end:02x}"


def interface_setup_argvs(iface: Interface, keep_link_local: bool = True) -> list[Argv]:
    """Flush the interface's addresses (those of global scope, or all), add its own, bring it up.

    Routers and switched hosts keep their link-local addresses: a router needs the interface's
    IPv6 link-local address to send neighbour solicitations for packets it forwards. Mininet
    gives the interfaces no address (topologies.net), so the flush is a safety net: an interface
    starts from the plan's addresses only, whatever else configured it. `scope global` rather
    than `-4` keeps the flush in the namespace's one `ip -batch` (ipbatch), one process start
    less per interface under TCG. IPv6 addresses skip duplicate detection (nodad): the links
    are private.
    """
    argvs = [["ip", "addr", "flush", "dev", iface.name, *(["scope", "global"] if keep_link_local else [])]]
    for fam, addr, plen in iface.addrs:
        # no -4/-6: the address says its family, and without an option the whole setup is one `ip -batch`
        argvs.append(["ip", "addr", "add", f"{addr}/{plen}", "dev", iface.name] + (["nodad"] if fam == "ipv6" else []))
    argvs.append(["ip", "link", "set", "dev", iface.name, "up"])
    return argvs


def netem_limit(spec: Shaped) -> int:
    """Packets netem must hold: the configured queue plus the delay line.

    netem counts packets waiting on its delay line against `limit`, so a bare
    `limit = queue` would cap the window at `queue` packets on long paths and
    throttle them below their rate. We add the bandwidth-delay product (one
    direction) so `queue` means the buffer in front of the bottleneck.
    """
    bdp_pkts = spec.bw * 1e6 * (spec.delay / 1000.0) / (8 * MTU_BYTES)
    return int(spec.queue + math.ceil(bdp_pkts))


def shaping_for(spec: Shaped) -> Shaping:
    return Shaping(rate_mbit=spec.bw, delay_ms=spec.delay, loss_pct=spec.loss, limit_pkts=netem_limit(spec))
