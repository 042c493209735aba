"""Plan a routed topology: address plan, static IPv4/IPv6 routes and source routing (pure).

Addresses: link k (1-based, in file order) gets 10.1.k.0/24 and fd00:1:k::/64
unless the scenario overrides them; the first node in `between` takes the
first host address, the second the next one.

Routes, per family, in two layers:
  1. every node reaches every link subnet by a shortest path (hop count;
     ties go to the nearer end, then the lower node name): so everything
     can reach everything;
  2. every named path pins host routes (/32, /128) to its server address
     along its links, and back to its client address, at every node on it.
     Longest-prefix match lets these override layer 1, which is how IPv4 and
     IPv6 (or the four E3 paths) take different links.
The client and the server also get one routing table per interface and
address family, chosen by source address, so a subflow and its replies leave
by their own interface; only routers forward by destination alone, so only
they can hold real route conflicts.
"""
from __future__ import annotations

import ipaddress

from scenarios.spec.graph import adjacency, first_hops, first_overlap
from scenarios.spec.model import Routed, Scenario

from .plan import (Argv, Interface, LinkPlan, PathPlan, PlanError, TopologyPlan,
                   interface_setup_argvs,
                   shaping_for)

FAMILIES = ("ipv4", "ipv6")
DEFAULT_ROUTE = {"ipv4": "0.0.0.0/0", "ipv6": "::/0"}   # `default` would need -4/-6
HOSTLEN = {"ipv4": 32, "ipv6": 128}


def link_subnets(topo: Routed) -> dict[str, dict[str, ipaddress._BaseNetwork]]:
    out = {}
    for k, link in enumerate(topo.links, start=1):
        out[link.name] = {
            "ipv4": link.ipv4 or ipaddress.ip_network(f"10.1.{k}.0/24"),
            "ipv6": link.ipv6 or ipaddress.ip_network(f"fd00:1:{k:x}::/64"),
        }
    clash = first_overlap([((link.name, fam), net) for link in topo.links for fam, net in out[link.name].items()])
    if clash:
        ((la, fam), na), ((lb, _), nb) = clash
        raise PlanError(f"topology.links: subnet {na} of link {la!r} overlaps {nb} of link {lb!r}; "
                        f"override one with `{fam}:`")
    return out


def plan_routed(scenario: Scenario) -> TopologyPlan:
    topo: Routed = scenario.topology
    subnets = link_subnets(topo)
    ifaces, links, at = _interfaces(topo, subnets)
    setup = _addresses(topo, ifaces)
    routes = _Routes(topo)
    _shortest_path_routes(topo, subnets, at, routes)   # layer 1: every subnet, per family
    paths = _path_routes(topo, at, routes)              # layer 2: host routes along every named path
    problems = routes.problems + _address_pair_problems(paths)
    if problems:
        raise PlanError(*problems)
    routes.write(setup)
    _source_rules(topo, ifaces, setup)
    return TopologyPlan(kind="routed", client=topo.client, server=topo.server, paths=tuple(paths),
                        interfaces=tuple(ifaces), links=tuple(links), setup=setup,
                        routers=tuple(topo.routers), byte_counters="nft")


def _interfaces(topo: Routed, subnets: dict) -> tuple[list[Interface], list, dict[tuple[str, str], Interface]]:
    """Every link's two interfaces, numbered per node, with an address in each family both ends have."""
    n_if = {n: 0 for n in topo.nodes}
    ifaces: list[Interface] = []
    links = []
    at: dict[tuple[str, str], Interface] = {}   # (node, link) -> Interface
    for link in topo.links:
        fams = [f for f in FAMILIES if f in topo.node_family(link.between[0]) & topo.node_family(link.between[1])]
        sh = shaping_for(link)
        ends = []
        for idx, node in enumerate(link.between):
            name = f"{node}-eth{n_if[node]}"
            n_if[node] += 1
            addrs = tuple((fam, str(subnets[link.name][fam][idx + 1]), subnets[link.name][fam].prefixlen)
                          for fam in fams)
            iface = Interface(node, name, link.name, addrs, sh)
            ifaces.append(iface)
            at[(node, link.name)] = iface
            ends += [node, name]
        links.append(LinkPlan(link.name, *ends))
    return ifaces, links, at


def _addresses(topo: Routed, ifaces: list[Interface]) -> dict[str, list[Argv]]:
    setup: dict[str, list[Argv]] = {n: [] for n in topo.nodes}
    for n in topo.nodes:
        setup[n] += [["sysctl", "-q", "-w", "net.ipv6.conf.all.accept_dad=0"],
                     ["sysctl", "-q", "-w", "net.ipv6.conf.default.accept_dad=0"],
                     ["sysctl", "-q", "-w", "net.ipv6.conf.all.accept_ra=0"]]
        if n in topo.routers:
            setup[n] += [["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"],
                         ["sysctl", "-q", "-w", "net.ipv6.conf.all.forwarding=1"]]
    for i in ifaces:
        setup[i.node] += interface_setup_argvs(i)
    return setup


class _Routes:
    """(node, family, destination) -> (gateway, device, why); two paths may not leave a router for the
    same destination by different links."""

    def __init__(self, topo: Routed):
        self.topo = topo
        self.table: dict[tuple[str, str, str], tuple[str, str, str]] = {}
        self.problems: list[str] = []

    def add_default(self, node: str, fam: str, dst: str, gw: str, dev: str, why: str) -> None:
        self.table.setdefault((node, fam, dst), (gw, dev, why))

    def add_for_path(self, node: str, fam: str, dst: str, gw: str, dev: str, why: str) -> None:
        if dst.split("/")[0] == gw:
            return  # the neighbour itself: the connected route already reaches it
        key = (node, fam, dst)
        if node in (self.topo.client, self.topo.server):
            # end hosts route by source address (rules); this main-table
            # route only picks the source address when none is bound.
            self.table.setdefault(key, (gw, dev, why))
            return
        if key in self.table and self.table[key][:2] != (gw, dev):
            self.problems.append(f"topology.paths: {why} and {self.table[key][2]} both reach {dst} but leave "
                                 f"{node!r} by different links ({self.table[key][1]} and {dev}); give them different "
                                 "server or client interfaces, or different families")
            return
        self.table.setdefault(key, (gw, dev, why))

    def write(self, setup: dict[str, list[Argv]]) -> None:
        for (node, fam, dst), (gw, dev, _) in sorted(self.table.items()):
            # no -4/-6: the addresses say the family, and the node's setup stays one `ip -batch` (ipbatch)
            setup[node].append(["ip", "route", "replace", dst, "via", gw, "dev", dev])


def _shortest_path_routes(topo: Routed, subnets: dict, at: dict, routes: _Routes) -> None:
    for fam in FAMILIES:
        adj = adjacency((link.name, *link.between) for link in topo.links
                        if at[(link.between[0], link.name)].addr(fam) and at[(link.between[1], link.name)].addr(fam))
        for src in topo.nodes:
            first_hop = first_hops(adj, src)
            for link in topo.links:
                a, b = link.between
                if src in (a, b) or not at[(a, link.name)].addr(fam):
                    continue
                reach = [first_hop[x] for x in (a, b) if x in first_hop]
                if not reach:
                    continue
                _, nbr, via = min(reach)
                routes.add_default(src, fam, str(subnets[link.name][fam]), at[(nbr, via)].addr(fam),
                                   at[(src, via)].name, f"the route to link {link.name!r}")


def _path_routes(topo: Routed, at: dict, routes: _Routes) -> list[PathPlan]:
    """Host routes along every named path, both ways; the paths' plans."""
    paths = []
    for idx, p in enumerate(topo.paths):
        fam = topo.path_family(p)
        hops = [topo.client]
        for ln in p.via:
            a, b = topo.link(ln).between
            hops.append(b if a == hops[-1] else a)
        c_if, s_if = at[(topo.client, p.via[0])], at[(topo.server, p.via[-1])]
        c_ip, s_ip = c_if.addr(fam), s_if.addr(fam)
        for k, ln in enumerate(p.via):
            here, nxt = hops[k], hops[k + 1]
            routes.add_for_path(here, fam, f"{s_ip}/{HOSTLEN[fam]}", at[(nxt, ln)].addr(fam), at[(here, ln)].name,
                                f"path {p.name!r}")
            routes.add_for_path(nxt, fam, f"{c_ip}/{HOSTLEN[fam]}", at[(here, ln)].addr(fam), at[(nxt, ln)].name,
                                f"path {p.name!r}")
        up = tuple((hops[k], at[(hops[k], ln)].name) for k, ln in enumerate(p.via))
        down = tuple((hops[k + 1], at[(hops[k + 1], ln)].name) for k, ln in reversed(list(enumerate(p.via))))
        paths.append(PathPlan(name=p.name, index=idx, family=fam, client_if=c_if.name, server_if=s_if.name,
                              client_ip=c_ip, server_ip=s_ip, table=100 + idx, egress_up=up, egress_down=down))
    return paths


def _address_pair_problems(paths: list[PathPlan]) -> list[str]:
    seen_pairs: dict[tuple[str, str], str] = {}
    out = []
    for pp in paths:
        pair = (pp.client_ip, pp.server_ip)
        if pair in seen_pairs:
            out.append(f"topology.paths: {pp.name!r} and {seen_pairs[pair]!r} use the same address pair "
                       f"({pp.client_ip} -> {pp.server_ip}); MPTCP needs a second address for a second subflow")
        seen_pairs.setdefault(pair, pp.name)
    return out


def _source_rules(topo: Routed, ifaces: list[Interface], setup: dict[str, list[Argv]]) -> None:
    """Client and server: one routing table per interface, chosen by source address (both families),
    so each subflow and its replies keep to their path.

    Routes and IPv4 rules carry no family option, so they join the node's one `ip -batch`; an IPv6
    rule needs `-6` (`ip rule` takes the family from the option alone), so those go last, as a second
    batch, instead of breaking the first into a process per command."""
    v6_rules: dict[str, list[Argv]] = {}
    for t, i in enumerate(i for i in ifaces if i.node in (topo.client, topo.server)):
        table = str(200 + t)
        peer = next(x for x in ifaces if x.link == i.link and x.node != i.node)
        for fam, addr, _ in i.addrs:
            rule = ["rule", "add", "from", addr, "table", table, "priority", table]
            if fam == "ipv6":
                v6_rules.setdefault(i.node, []).append(["ip", "-6", *rule])
            else:
                setup[i.node].append(["ip", *rule])
            setup[i.node].append(["ip", "route", "add", DEFAULT_ROUTE[fam], "via", peer.addr(fam), "dev", i.name,
                                  "table", table])
    for node, rules in v6_rules.items():
        setup[node] += rules
