"""The dual-homed kind: client and server joined directly by one link per path."""
from __future__ import annotations

from scenarios.spec.model import Scenario

from .plan import (CLIENT, SERVER, Argv, Interface, LinkPlan, PathPlan, TopologyPlan, interface_setup_argvs,
                   shaping_for)


def plan_dual_homed(scenario: Scenario) -> TopologyPlan:
    """Client h1 and server h2; path i is the link h1-eth<i> <-> h2-eth<i> in 10.0.<i+1>.0/24.

    A client subflow leaves by the interface of its source address (rule
    `from <addr> table N`, default route on-link on that interface). The
    server needs no rules: its connected routes already send each reply back
    over the link the client's address belongs to.
    """
    paths, ifaces, links = [], [], []
    setup: dict[str, list[Argv]] = {CLIENT: [], SERVER: []}
    for i, p in enumerate(scenario.topology.paths):
        sh = shaping_for(p)
        pp = PathPlan(name=p.name, index=i, family="ipv4", client_if=f"{CLIENT}-eth{i}",
                      server_if=f"{SERVER}-eth{i}", client_ip=f"10.0.{i + 1}.1", server_ip=f"10.0.{i + 1}.2",
                      table=100 + i, shaping=sh, egress_up=((CLIENT, f"{CLIENT}-eth{i}"),),
                      egress_down=((SERVER, f"{SERVER}-eth{i}"),))
        paths.append(pp)
        links.append(LinkPlan(p.name, CLIENT, pp.client_if, SERVER, pp.server_if))
        for node, ifname, ip in ((CLIENT, pp.client_if, pp.client_ip), (SERVER, pp.server_if, pp.server_ip)):
            iface = Interface(node, ifname, p.name, (("ipv4", ip, 24),), sh)
            ifaces.append(iface)
            setup[node] += interface_setup_argvs(iface, keep_link_local=False)
        setup[CLIENT] += [["ip", "rule", "add", "from", pp.client_ip, "table", str(pp.table), "priority", str(pp.table)],
                          ["ip", "route", "add", "default", "dev", pp.client_if, "table", str(pp.table)]]
    return TopologyPlan(kind="dual-homed", client=CLIENT, server=SERVER, paths=tuple(paths),
                        interfaces=tuple(ifaces), links=tuple(links), setup=setup)
