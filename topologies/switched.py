"""Plan a switched topology: hosts on switches, addresses (with IP aliases), switch ports (pure).

Addresses: path k (0-based, file order) is a subnet of its own, 10.0.<k+1>.0/24
unless overridden. The server takes .1 on its `server_if` link, client i takes
.(11+i) on its `client_if` link. When two paths use the same client interface,
that interface carries both addresses: the second is an IP alias (E5, Exp 3).
Every subnet lives on exactly one interface per host, so connected routes
already send each subflow out of the right interface: no source routing.

All hosts share one layer-2 domain, so an ARP request for an address reaches
every interface of its owner; `arp_ignore=1` and `arp_announce=2` keep each
address answered and announced by its own interface only.

Switch ports are numbered 1, 2, ... in link order; those numbers are the
OpenFlow ports the controller apps are configured with.
"""
from __future__ import annotations

import ipaddress

from scenarios.spec.graph import adjacency, reachable
from scenarios.spec.model import Scenario, Switched

from .plan import (Argv, Interface, LinkPlan, PathPlan, PlanError, SwitchPlan, TopologyPlan, interface_setup_argvs,
                   shaping_for)

HOST_SYSCTLS = [("net.ipv4.conf.all.arp_ignore", "1"), ("net.ipv4.conf.all.arp_announce", "2"),
                ("net.ipv4.conf.default.arp_ignore", "1"), ("net.ipv4.conf.default.arp_announce", "2"),
                ("net.ipv6.conf.all.accept_dad", "0"), ("net.ipv6.conf.default.accept_dad", "0")]


def path_subnet(topo: Switched, k: int) -> ipaddress.IPv4Network:
    return topo.paths[k].ipv4 or ipaddress.ip_network(f"10.0.{k + 1}.0/24")


def host_ifname(host: str, j: int) -> str:
    return f"{host}-eth{j}"


def plan_switched(scenario: Scenario) -> TopologyPlan:
    topo: Switched = scenario.topology
    hosts = [topo.server, *topo.clients]
    sw_index = {s.name: i for i, s in enumerate(topo.switches)}
    n_host_if = {h: 0 for h in hosts}
    n_sw_port = {s: 0 for s in sw_index}
    end_if: dict[tuple[str, str], str] = {}        # (node, link) -> interface name
    sw_ports: dict[str, list[tuple[str, int]]] = {s: [] for s in sw_index}
    links = []
    for x in topo.links:
        ends = []
        for n in x.between:
            if n in sw_index:
                n_sw_port[n] += 1
                name = f"{n}-eth{n_sw_port[n]}"
                sw_ports[n].append((x.name, n_sw_port[n]))
            else:
                name = host_ifname(n, n_host_if[n])
                n_host_if[n] += 1
            end_if[(n, x.name)] = name
            ends += [n, name]
        links.append(LinkPlan(x.name, *ends))

    # addresses per host interface, from the paths
    addrs: dict[str, list[tuple[str, str, int]]] = {}
    client_paths: dict[str, list[PathPlan]] = {c: [] for c in topo.clients}
    for k, p in enumerate(topo.paths):
        net = path_subnet(topo, k)
        s_link = topo.host_links(topo.server)[p.server_if]
        s_if = end_if[(topo.server, s_link.name)]
        s_ip = str(net[1])
        addrs.setdefault(s_if, []).append(("ipv4", s_ip, net.prefixlen))
        for i, c in enumerate(topo.clients):
            c_link = topo.host_links(c)[p.client_if]
            c_if = end_if[(c, c_link.name)]
            c_ip = str(net[11 + i])
            addrs.setdefault(c_if, []).append(("ipv4", c_ip, net.prefixlen))
            client_paths[c].append(PathPlan(
                name=p.name, index=k, family="ipv4", client_if=c_if, server_if=s_if, client_ip=c_ip,
                server_ip=s_ip, table=100 + k,
                egress_up=_egress(topo, end_if, c, topo.server, c_link.name, s_link.name),
                egress_down=_egress(topo, end_if, topo.server, c, s_link.name, c_link.name)))

    ifaces: list[Interface] = []
    for x in topo.links:
        sh = shaping_for(x.shaped) if x.shaped is not None else None
        for n in x.between:
            name = end_if[(n, x.name)]
            ifaces.append(Interface(n, name, x.name, tuple(addrs.get(name, ())), sh))

    setup: dict[str, list[Argv]] = {h: [] for h in hosts}
    for h in hosts:
        setup[h] += [["sysctl", "-q", "-w", f"{k}={v}"] for k, v in HOST_SYSCTLS]
    for i in ifaces:
        if i.node not in setup:
            continue
        setup[i.node] += interface_setup_argvs(i)

    switches = tuple(SwitchPlan(name=s.name, type=s.type, controller=s.controller,
                                dpid=f"{sw_index[s.name] + 1:016x}", ports=tuple(sw_ports[s.name]))
                     for s in topo.switches)
    user_dp = {s.name for s in topo.switches if s.type == "ovs-user"}
    offload_off = tuple((n, end_if[(n, x.name)]) for x in topo.links if user_dp & set(x.between)
                        for n in x.between)
    first = topo.clients[0]
    return TopologyPlan(
        kind="switched", client=first, server=topo.server, paths=tuple(client_paths[first]),
        interfaces=tuple(ifaces), links=tuple(links), setup=setup, byte_counters="nft",
        switches=switches, clients=tuple(topo.clients),
        client_paths=tuple((c, tuple(ps)) for c, ps in client_paths.items()),
        controller=controller_config(topo, switches), offload_off=offload_off)


def _egress(topo: Switched, end_if: dict, src: str, dst: str, first_link: str, last_link: str
            ) -> tuple[tuple[str, str], ...]:
    """The shaped egress interfaces a packet from src to dst surely crosses: its first and last link.

    What lies between depends on the switches (learning, steering), so only
    the hosts' own links are certain.
    """
    out = [(src, end_if[(src, first_link)])]
    last = topo.link(last_link)
    sw_end = next(n for n in last.between if n != dst)
    out.append((sw_end, end_if[(sw_end, last_link)]))
    return tuple(out)


def controller_config(topo: Switched, switches: tuple[SwitchPlan, ...]) -> dict | None:
    """What the controller app is told: switch names by dpid and, for steering, uplink ports.

    A steering switch is on the client side when a client reaches it without
    crossing its uplinks; there it steers packets coming up from its hosts by
    their source port (the client's), and on the server side by their
    destination port (the client's again), so both directions of a flow take
    the same uplink.
    """
    if topo.controller is None:
        return None
    c = topo.controller
    byname = {w.name: w for w in switches}
    cfg: dict = {"app": c.app, "port": c.port,
                 "switches": {w.config_key: {"name": w.name, "ports": [n for _, n in w.ports]}
                              for w in switches if w.controller},
                 "user_config": dict(c.config)}
    if c.steer is not None:
        steered_links = {ln for ups in c.steer.uplinks.values() for ln in ups}
        cfg["by"] = c.steer.by
        cfg["server_ports"] = list(c.steer.server_ports)
        for s, ups in c.steer.uplinks.items():
            w = byname[s]
            side = _side(topo, s, steered_links)
            cfg["switches"][w.config_key].update(
                uplinks=[w.port(ln) for ln in ups], uplink_names=list(ups), client_side=side == "client")
    return cfg


def _side(topo: Switched, switch: str, steered: set[str]) -> str:
    adj = adjacency((x.name, *x.between) for x in topo.links if x.name not in steered)
    seen = reachable(adj, switch, through=set(topo.switch_names))   # hosts are reached, not passed
    clients = seen & set(topo.clients)
    if clients and topo.server in seen:
        raise PlanError(f"topology.controller.steer.uplinks.{switch}: the switch reaches both the server and a "
                        "client without its uplinks, so it cannot tell up from down")
    if not clients and topo.server not in seen:
        raise PlanError(f"topology.controller.steer.uplinks.{switch}: no host below the switch (every host is "
                        "behind its uplinks)")
    return "client" if clients else "server"
