"""Pure planning of the events of a run (issue 30): for every change on the timeline, the commands that
make it, on which node, and the commands that put every touched target back before the next run.

Nothing here touches the kernel; runners.pipeline.events runs these commands at their times.

What each action does, and why this way:
- down / up: `ip link set down|up` at both ends of the path or link, so the kernel on each side sees it
  (a veth's far end alone would only lose its carrier). Taking a link down flushes the routes through it
  (and, by default, its IPv6 addresses), so `up` gives back the interface's addresses and every route
  of the plan through that interface (as `replace`: idempotent) before anything else.
- blackhole / restore: netem's `loss 100%` on the egress of each end (its rate, delay and limit kept), and
  back: every packet in both directions is lost while both interfaces stay up and keep their routes
  (mptcp_net-next #585's case). netem drops silently (the sender's stack sees its packets sent), and
  what was queued before still leaves, as on a cable cut beyond the queue. Not an nftables drop: at the
  ingress hook the receiver's interface counters still count the lost packets, and at the egress hook
  the sender gets ENOBUFS, which a remote blackhole never gives. An end without netem gets one, deleted
  again by `restore`.
- shape: `tc qdisc change` of the shaping on each shaped interface of the target (its netem, and the TBF
  above it where the target's rate changes during a run: topologies.plan.Shaping), with the full new
  parameter set (rate, delay, loss and a limit recomputed from the queue and the new bandwidth-delay
  product, as the initial shaping does), so nothing resets silently and nothing queued is lost
  (`replace` or delete-and-add would drop the queue: Mininet's TCIntf.config at run time).
- backup / nobackup: `ip mptcp endpoint change ADDR backup|nobackup` on the client for the path's
  client address, which makes the kernel send MP_PRIO on every subflow from that address. The client
  needs an endpoint for that address: runners.pipeline.mptcp_config adds a flag-less one.
- endpoint-remove / endpoint-add: the endpoint through which the path's subflow joins (the server's
  `signal` endpoint, or the client's `subflow` endpoint) is deleted (RM_ADDR) and added back. Deleting
  needs the endpoint's id, which only the kernel knows: the runner looks it up by address.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

from scenarios.spec.model import Scenario
from scenarios.spec.model.events import Occurrence, timeline
from scenarios.spec.traces import Trace, rate_steps, trace_files

from .plan import Argv, Shaping, TopologyPlan, join_how, netem_limit, shaping_argvs, shaping_for



@dataclass(frozen=True)
class NodeCommands:
    """Commands for one node, run in one batch. `endpoint`: (verb, address) of an MPTCP endpoint action
    the runner completes (the id of an endpoint to delete is looked up at the time)."""
    node: str
    argvs: tuple[tuple[str, ...], ...] = ()
    endpoint: Optional[tuple[str, str]] = None


@dataclass(frozen=True)
class PlannedChange:
    """One change of the timeline, made concrete: what `at_ms` (from the traffic's start) does where."""
    index: int                  # the event's index in scenario.events
    event: str
    at_ms: float
    target: tuple[str, str]     # ("path" | "link", name)
    action: str                 # down, up, ..., or "shape"
    detail: str                 # for people: "bw 2 Mbit/s, delay 80 ms" or the action
    commands: tuple[NodeCommands, ...]
    shaping: dict[str, Shaping] = field(default_factory=dict)   # shape: interface -> its new netem


def target_ends(plan: TopologyPlan, target: tuple[str, str]) -> list[tuple[str, str]]:
    """(node, interface) at each end of a path (every client's own interface, and the server's) or a link."""
    kind, name = target
    if kind == "link":
        link = next(x for x in plan.links if x.name == name)
        return [(link.a, link.a_if), (link.b, link.b_if)]
    ends = []
    for client in plan.all_clients:
        p = plan.for_client(client).path(name)
        ends += [(client, p.client_if), (plan.server, p.server_if)]
    return list(dict.fromkeys(ends))


def shaped_interfaces(plan: TopologyPlan, target: tuple[str, str]) -> list:
    """The netem-shaped interfaces of a target: its link's (a dual-homed path is its own link)."""
    return [i for i in plan.interfaces if i.link == target[1] and i.shaping is not None]


def base_spec(scenario: Scenario, target: tuple[str, str]):
    """The configured bw, delay, loss and queue of the target, as a Shaped model."""
    topo = scenario.topology
    if target[0] == "path":
        return topo.path(target[1])
    link = topo.link(target[1])
    return link.shaped if hasattr(link, "shaped") else link


def down_argvs(iface: str) -> list[Argv]:
    return [["ip", "link", "set", "dev", iface, "down"]]


def up_argvs(plan: TopologyPlan, node: str, iface: str) -> list[Argv]:
    """Bring an interface back: its addresses, the link, then every route of the plan through it."""
    out: list[Argv] = []
    ifplan = next((i for i in plan.interfaces if i.node == node and i.name == iface), None)
    for fam, addr, plen in (ifplan.addrs if ifplan else ()):
        out.append(["ip", "addr", "replace", f"{addr}/{plen}", "dev", iface] + (["nodad"] if fam == "ipv6" else []))
    out.append(["ip", "link", "set", "dev", iface, "up"])
    for argv in plan.setup.get(node, []):
        if "route" in argv and _dev_of(argv) == iface:
            # family-less, as the plan writes routes: one `ip -batch` line each (a process each under TCG: 1.9 s)
            out.append([("replace" if a == "add" else a) for a in argv])
    return out


def _dev_of(argv: Argv) -> Optional[str]:
    return argv[argv.index("dev") + 1] if "dev" in argv[:-1] else None


def holed(shaping: Shaping) -> Shaping:
    """A netem that loses everything and otherwise stays as it was."""
    return replace(shaping, loss_pct=100.0)


def blackhole_argvs(iface: str, shaping: Optional[Shaping]) -> list[Argv]:
    if shaping is None:   # an end without netem gets one for the time of the blackhole
        return [["tc", "qdisc", "replace", "dev", iface, "root", "netem", "loss", "100%"]]
    return shaping_argvs(iface, holed(shaping), "change")


def restore_argvs(iface: str, shaping: Optional[Shaping]) -> list[Argv]:
    if shaping is None:
        return [["tc", "qdisc", "del", "dev", iface, "root"]]
    return shaping_argvs(iface, shaping, "change")


def _shaping_now(scenario: Scenario, plan: TopologyPlan, current: dict, node: str, iface: str) -> Optional[Shaping]:
    """The netem an interface has now (the plan's, or as `shape` changes of its link left it); None
    without netem."""
    planned = next((i for i in plan.interfaces if i.node == node and i.name == iface), None)
    if planned is None or planned.shaping is None:
        return None
    key = ("path" if plan.kind == "dual-homed" else "link", planned.link)
    return _like(planned.shaping, shaping_for(current[key])) if key in current else planned.shaping


def _like(planned: Shaping, new: Shaping) -> Shaping:
    """`new` in the layout the interface was built with (a change cannot turn a netem into a TBF)."""
    return replace(new, rate_at_dequeue=planned.rate_at_dequeue)


def _describe_shape(changes: dict) -> str:
    units = {"bw": "Mbit/s", "delay": "ms", "loss": "%", "queue": "packets"}
    return ", ".join(f"{k} {v:g} {units[k]}" for k, v in changes.items())


def _endpoint_side(scenario: Scenario, plan: TopologyPlan, path: str, primary: str) -> tuple[str, str]:
    """(node, address) of the endpoint through which `path` joins: the server's signal endpoint or the
    client's subflow endpoint (the same choice as mptcp_argvs). On the primary path it is the client's
    address of the initial subflow (endpoint id 0)."""
    p = plan.path(path)
    if path == primary or join_how(scenario, plan.path(primary), p) == "subflow":
        return plan.client, p.client_ip
    return plan.server, p.server_ip


def plan_changes(scenario: Scenario, plan: TopologyPlan, primary: str,
                 traces: dict[str, Trace] | None = None) -> list[PlannedChange]:
    """Every change of the scenario's timeline, in time order, with its commands, for a run whose
    initial subflow is on `primary`; with `traces` (file name -> Trace), the traces' rate steps too."""
    current: dict[tuple[str, str], object] = {}
    out = [_one_change(scenario, plan, primary, index, occ, current) for index, occ in timeline(scenario.events)]
    out += trace_changes(scenario, plan, traces or {})
    return sorted(out, key=lambda ch: ch.at_ms)


# netem's and TBF's rate cannot be 0, so a trace's silent step is this rate. A traced link takes its rate in
# a TBF at dequeue (topologies.plan.Shaping): what queued during a silent step leaves at the next step's
# rate as soon as it comes. (With netem's own rate, 100 packets queued at 10 kbit/s were held for two
# minutes after the trace came back: handover.yaml under TCG, 2026-11-25.)
TRACE_FLOOR_MBIT = 0.1


def trace_changes(scenario: Scenario, plan: TopologyPlan, traces: dict[str, Trace]) -> list[PlannedChange]:
    """Each traced direction's rate steps as shape changes of that direction's netem alone (to_server:
    the client side's egress, to_client: the server side's), from 0 until the traffic's duration (a
    fixed-size transfer: the estimate's worst case, 3x the transfer at the slowest rate); a step whose
    rate equals the one before is left out."""
    t = scenario.traffic
    horizon_ms = (t.duration + t.omit) * 1000 if t.duration is not None else \
        3 * t.bytes * 8 / (scenario.topology.min_rate * 1e6) * 1000
    out = []
    for (_, coll, i, _, direction), name in trace_files(scenario):
        item = getattr(scenario.topology, coll)[i]
        spec = item.shaped if hasattr(item, "shaped") else item     # a switched link's: a property
        target = ("path" if coll == "paths" else "link", item.name)
        ifaces = _direction_ifaces(plan, target, direction)
        step = spec.trace.step
        last = None
        for k, rate in enumerate(rate_steps(traces[name], step, horizon_ms, spec.trace.once)):
            rate = max(TRACE_FLOOR_MBIT, round(rate, 2))   # to 10 kbit/s: a packet more or less is no step
            if rate == last:
                continue
            last = rate
            new = Shaping(rate_mbit=rate, delay_ms=spec.delay, loss_pct=spec.loss, rate_at_dequeue=True,
                          limit_pkts=netem_limit(spec.model_copy(update={"bw": rate, "trace": None})))
            by_node: dict[str, list[Argv]] = {}
            for node, iface in ifaces:
                by_node.setdefault(node, []).extend(shaping_argvs(iface, new, "change"))
            out.append(PlannedChange(-1, f"trace-{item.name}", k * step, target, "trace",
                                     f"{direction} {rate:g} Mbit/s", _commands(by_node),
                                     {iface: new for _, iface in ifaces}))
    return _together(out)


def _together(steps: list[PlannedChange]) -> list[PlannedChange]:
    """A target's steps at the same time (its two directions) as one change: their nodes act at once."""
    merged: dict[tuple, PlannedChange] = {}
    for ch in steps:
        key = (ch.target, ch.at_ms)
        if key not in merged:
            merged[key] = ch
            continue
        was = merged[key]
        by_node: dict[str, list] = {nc.node: list(nc.argvs) for nc in was.commands}
        for nc in ch.commands:
            by_node.setdefault(nc.node, []).extend(nc.argvs)
        merged[key] = PlannedChange(was.index, was.event, was.at_ms, was.target, "trace",
                                    f"{was.detail}, {ch.detail}", _commands(by_node), {**was.shaping, **ch.shaping})
    return list(merged.values())


def _direction_ifaces(plan: TopologyPlan, target: tuple[str, str], direction: str) -> list[tuple[str, str]]:
    """(node, interface) whose netem sends the target's packets towards the server (or the client)."""
    shaped = {(i.node, i.name) for i in shaped_interfaces(plan, target)}
    paths = [p for c in plan.all_clients for p in plan.for_client(c).paths]     # every client's own
    sends = {(n, i) for p in paths for n, i in (p.egress_up if direction == "to_server" else p.egress_down)}
    return sorted(shaped & sends)


def _one_change(scenario: Scenario, plan: TopologyPlan, primary: str, index: int, occ: Occurrence,
                current: dict) -> PlannedChange:
    ends = target_ends(plan, occ.target)
    if occ.action is None:
        changes = occ.shape.changes()
        spec = current.get(occ.target) or base_spec(scenario, occ.target)
        spec = current[occ.target] = spec.model_copy(update=changes)
        new = shaping_for(spec)
        ifaces = shaped_interfaces(plan, occ.target)
        holes = current.setdefault("holes", set())
        applied = {i.name: _like(i.shaping, holed(new) if (i.node, i.name) in holes else new) for i in ifaces}
        by_node: dict[str, list[Argv]] = {}
        for i in ifaces:
            by_node.setdefault(i.node, []).extend(shaping_argvs(i.name, applied[i.name], "change"))
        return PlannedChange(index, occ.event, occ.at_ms, occ.target, "shape", _describe_shape(changes),
                             _commands(by_node), applied)
    action = occ.action
    by_node = {}
    endpoint = None
    if action in ("down", "up"):
        for node, iface in ends:
            by_node.setdefault(node, []).extend(down_argvs(iface) if action == "down" else up_argvs(plan, node, iface))
    elif action in ("blackhole", "restore"):
        holes = current.setdefault("holes", set())
        for node, iface in ends:
            now = _shaping_now(scenario, plan, current, node, iface)
            by_node.setdefault(node, []).extend(blackhole_argvs(iface, now) if action == "blackhole"
                                                else restore_argvs(iface, now))
            (holes.add if action == "blackhole" else holes.discard)((node, iface))
    elif action in ("backup", "nobackup"):
        for client in plan.all_clients:
            ip = plan.for_client(client).path(occ.target[1]).client_ip
            by_node.setdefault(client, []).append(["ip", "mptcp", "endpoint", "change", ip, action])
    else:
        endpoint = _endpoint_side(scenario, plan, occ.target[1], primary)
    commands = _commands(by_node)
    if endpoint is not None:
        commands = (NodeCommands(endpoint[0], (), (action, endpoint[1])),)
    return PlannedChange(index, occ.event, occ.at_ms, occ.target, action, action, commands)


def _commands(by_node: dict[str, list[Argv]]) -> tuple[NodeCommands, ...]:
    return tuple(NodeCommands(node, tuple(tuple(a) for a in argvs)) for node, argvs in by_node.items())


def restore_commands(scenario: Scenario, plan: TopologyPlan, made: list[PlannedChange]) -> list[NodeCommands]:
    """What puts every target the made changes touched back to its configured state: up what is down,
    open what is blackholed, the configured netem where a shape changed. MPTCP endpoints are not here:
    the next MPTCP run sets its endpoints afresh (runners.pipeline.mptcp_config)."""
    down, holes, shaped = {}, {}, {}
    for ch in made:
        if ch.action in ("down", "up"):
            down[ch.target] = ch.action == "down"
        elif ch.action in ("blackhole", "restore"):
            holes[ch.target] = ch.action == "blackhole"
        elif ch.action in ("shape", "trace"):
            shaped[ch.target] = True
    by_node: dict[str, list[Argv]] = {}
    for target, is_down in down.items():
        for node, iface in target_ends(plan, target) if is_down else ():
            by_node.setdefault(node, []).extend(up_argvs(plan, node, iface))
    for target, is_holed in holes.items():
        for node, iface in target_ends(plan, target) if is_holed else ():
            planned = next((i for i in plan.interfaces if i.node == node and i.name == iface), None)
            by_node.setdefault(node, []).extend(restore_argvs(iface, planned.shaping if planned else None))
    for target in shaped:
        for i in shaped_interfaces(plan, target):
            by_node.setdefault(i.node, []).extend(shaping_argvs(i.name, i.shaping, "change"))
    return list(_commands(by_node))
