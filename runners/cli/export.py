"""`run-scenario export`: one point of a scenario as a standalone Mininet script, to rebuild by hand.

Pure: the plan (topologies.kinds), its events and traces (topologies.events), the setup commands (runners.pipeline.network.setup_per_node), netem
(topologies.plan.shaping_argvs) and the MPTCP settings of an MPTCP run (runners.pipeline.mptcp_config) become Python
literals in a script that needs only Mininet, tc, ip and sysctl. The script runs each argument list in
its node with `shlex.join`, so no value reaches a shell unquoted, stops at the first failure, and ends
in Mininet's CLI.
"""
from __future__ import annotations

import argparse
import importlib.util
import pprint
import time
from pathlib import Path

from topologies.kinds import plan as make_plan
from topologies.plan import shaping_argvs

from runners.cli.common import load_one_point, point_arguments
from runners.errors import EXIT_INPUT, EXIT_OK
from runners.linux.nsexec import sysctl_write_argv
from runners.pipeline import mptcp_config
from runners.pipeline.network import setup_per_node

TEMPLATE = '''#!/usr/bin/env python3
"""{title}

Exported by `run-scenario export` on {date} from {source}.
The network a run builds: hosts{switch_word}, links, addresses and routes, netem on every shaped
interface, and the MPTCP settings of an MPTCP run with primary path {primary}. Plain Mininet, tc,
ip mptcp and sysctl: as root, `python3 {name}.py`; `exit` leaves the CLI and removes the network.
{controller_note}"""
import shlex
import sys

from mininet.cli import CLI
from mininet.link import Link
from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import Host, OVSSwitch

HOSTS = {hosts}
# (name, datapath id, type: ovs | ovs-user | bridge, under a controller)
SWITCHES = {switches}
# (node a, node b, interface on a, interface on b, port on a, port on b, MAC on a, MAC on b)
LINKS = {links}
# per node, in order: addresses, routes, forwarding, lo up, offloads, counters
SETUP = {setup}
# netem on both directions of every path (its rate in a TBF above it where the rate changes during a run)
SHAPING = {shaping}
# MPTCP: per-namespace sysctls, then the path manager's limits and endpoints
MPTCP = {mptcp}
# The scenario's events and rate traces, as a run makes them: (seconds from the traffic's start, name, what,
# {{node: [argv, ...]}}). Start the traffic, then `py play_events(net)` in the CLI.{events_note}
EVENTS = {events}
{bridge_class}

def run(node, argv):
    """One command in the node's namespace; stop at the first failure."""
    out = node.cmd(shlex.join(argv) + "; echo @rc=$?")
    text, _, rc = out.rpartition("@rc=")
    if rc.strip() != "0":
        sys.exit(f"[{{node.name}}] {{shlex.join(argv)}} failed (exit {{rc.strip()}}): {{text.strip()}}")
    return text


def play_events(net):
    """EVENTS at their times from now, in a thread, each printed as it is made."""
    import threading
    import time

    def play():
        t0 = time.monotonic()
        for at, name, what, per_node in EVENTS:
            time.sleep(max(0.0, t0 + at - time.monotonic()))
            for node, argvs in per_node.items():
                for argv in argvs:
                    run(net[node], argv)
            print(f"{{time.monotonic() - t0:.2f}} s: {{name}}: {{what}}", flush=True)
    threading.Thread(target=play, daemon=True).start()


def build():
    net = Mininet(topo=None, build=False, controller=None, host=Host, link=Link, autoSetMacs=False,
                  waitConnected=False)
    nodes = {{name: net.addHost(name, ip=None) for name in HOSTS}}
    controllers = []
    for name, dpid, kind, controlled in SWITCHES:
        if kind == "bridge":
            nodes[name] = net.addSwitch(name, cls=IpBridge, dpid=dpid)
        else:
            nodes[name] = net.addSwitch(name, cls=OVSSwitch, dpid=dpid, protocols="OpenFlow13",
                                        failMode="secure" if controlled else "standalone",
                                        datapath="user" if kind == "ovs-user" else "kernel")
    if any(s[3] for s in SWITCHES):
        from mininet.node import RemoteController
        controllers = [RemoteController("c0", ip="127.0.0.1", port={controller_port})]
    for a, b, a_if, b_if, pa, pb, mac_a, mac_b in LINKS:
        net.addLink(nodes[a], nodes[b], port1=pa, port2=pb, intfName1=a_if, intfName2=b_if,
                    addr1=mac_a, addr2=mac_b)
    net.build()
    for name, _, _, controlled in SWITCHES:
        nodes[name].start(controllers if controlled else [])
    for table in (SETUP, SHAPING, MPTCP):
        for name, argvs in table.items():
            for argv in argvs:
                run(nodes[name], argv)
    return net


if __name__ == "__main__":
    setLogLevel("info")
    net = build()
    try:
        CLI(net)
    finally:
        net.stop()
'''

# topologies/ip_bridge.py's code, from its import on: the bridge class the runner itself uses (read, not
# imported: it needs Mininet, and export does not)
_BRIDGE_SOURCE = Path(importlib.util.find_spec("topologies.ip_bridge").origin).read_text()
BRIDGE_CLASS = "\n\n" + _BRIDGE_SOURCE[_BRIDGE_SOURCE.index("from mininet.node import Switch"):]


def _literal(value) -> str:
    return pprint.pformat(value, width=110, sort_dicts=False)


def _table(per_node: dict[str, list]) -> str:
    """{node: [argv, ...]} with one argument list per line, as a person would write it."""
    if not per_node:
        return "{}"
    lines = ["{"]
    for node, argvs in per_node.items():
        lines.append(f"    {node!r}: [")
        lines += [f"        {list(map(str, a))!r}," for a in argvs]
        lines.append("    ],")
    return "\n".join(lines + ["}"])


def _mptcp(scenario, plan, primary: str) -> dict[str, list]:
    per_node: dict[str, list] = {}
    for node in plan.hosts:
        per_node[node] = [sysctl_write_argv(k, v) for k, v in mptcp_config.sysctls(scenario, False)]
    for i, client in enumerate(plan.all_clients):
        cmds = mptcp_config.mptcp_argvs(scenario, plan.for_client(client), primary)
        per_node[client] += [list(a) for a in cmds.client]
        if i == 0:
            per_node[plan.server] += [list(a) for a in cmds.server]
    return per_node


def _events(scenario, plan, primary: str, base: Path) -> tuple[str, str]:
    """EVENTS as a literal, and a note on what it leaves out (endpoint changes need the kernel's ids)."""
    from scenarios.spec.traces import load_trace, trace_files
    from topologies.events import plan_changes

    traces = {name: load_trace(base / name) for _, name in trace_files(scenario)}
    changes = plan_changes(scenario, plan, primary, traces)
    kept = [ch for ch in changes if all(nc.endpoint is None for nc in ch.commands)]
    left = sorted({ch.event for ch in changes if ch not in kept})
    rows = [(round(ch.at_ms / 1000, 3), ch.event, f"{ch.target[0]} {ch.target[1]} {ch.detail}",
             {nc.node: [list(a) for a in nc.argvs] for nc in ch.commands}) for ch in kept]
    note = (f"\n# Left out: {', '.join(left)} (endpoint-remove/-add delete an endpoint by the id the kernel gave "
            "it: `ip mptcp endpoint show`, then `ip mptcp endpoint delete id N`)." if left else "")
    if not rows:
        return "[]", note
    lines = ["["]
    for at, name, what, per_node in rows:
        lines.append(f"    ({at!r}, {name!r}, {what!r}, {{")
        for node, argvs in per_node.items():
            lines.append(f"        {node!r}: [" + ", ".join(repr(a) for a in argvs) + "],")
        lines.append("    }),")
    return "\n".join(lines + ["]"]), note


def export_script(point, source: str, primary: str | None = None, base: Path | None = None) -> str:
    """The standalone script for one point (its scenario and label)."""
    sc = point.scenario
    plan = make_plan(sc)
    primary = primary or sc.primaries[0]
    shaping: dict[str, list] = {}
    for iface in plan.shaped_interfaces():
        shaping.setdefault(iface.node, []).extend(shaping_argvs(iface.name, iface.shaping))
    hosts = [n for n in (*plan.hosts, *plan.routers)]
    linked = {n for ln in plan.links for n in (ln.a, ln.b)}
    hosts += sorted(linked - set(hosts) - {w.name for w in plan.switches})
    controlled = any(w.controller for w in plan.switches)
    events, events_note = _events(sc, plan, primary, base or Path(source).resolve().parent)
    return TEMPLATE.format(
        events=events, events_note=events_note, title=f"{sc.name}, point {point.id} ({point.label})", date=time.strftime("%Y-%m-%d"), source=source,
        switch_word=", switches" if plan.switches else "", primary=primary, name=sc.name,
        controller_note=("The switches are under an OpenFlow controller: start the scenario's app first "
                         f"(see docs/controller.md) on 127.0.0.1:{plan.controller['port']}.\n" if controlled else ""),
        hosts=_literal(hosts),
        switches=_literal([(w.name, w.dpid, w.type, w.controller) for w in plan.switches]),
        links=_literal([(*ends, *macs) for ends, macs in zip(plan.link_ports(), plan.link_macs())]),
        setup=_table(setup_per_node(plan)), shaping=_table(shaping), mptcp=_table(_mptcp(sc, plan, primary)),
        bridge_class=BRIDGE_CLASS if any(w.type == "bridge" for w in plan.switches) else "",
        controller_port=plan.controller["port"] if controlled else 6653)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run-scenario export", description="Print one point of a scenario as a "
                                "standalone Python script of plain Mininet, tc, ip mptcp and sysctl commands: the "
                                "same network, shaping and MPTCP settings, ending in Mininet's CLI.")
    point_arguments(p)
    return p


def main(argv: list[str]) -> int:
    from runners.cli.export import export_script

    p = build_parser()
    a = p.parse_args(argv)
    chosen = load_one_point(p, a)
    if chosen is None:
        return EXIT_INPUT
    exp, point, primary = chosen
    print(export_script(point, a.scenario, primary, Path(exp.file).resolve().parent), end="")
    return EXIT_OK
