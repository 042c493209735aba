"""Build a TopologyPlan as a real Mininet network (this part touches the kernel)."""
from __future__ import annotations

import signal
import socket
import subprocess
import time
from typing import Callable

from topologies.plan import TopologyPlan
from topologies.planned_host import kill_session, planned_host_class, wait_in_own_namespaces


def _bridge_class():
    from topologies.ip_bridge import IpBridge

    return IpBridge


def _intf_classes():
    """(PlannedIntf, SwitchPort): the interface classes of hosts' and routers' ends, and of switches'."""
    from mininet.link import Intf

    class PlannedEnd(Intf):
        """An end of a veth pair that make_veth_pairs made with its MAC, and that the runner may have
        deleted already, with the other end (one `ip` process per namespace). Mininet's config would ask
        the node's shell to bring it up (`ifconfig up`: 0.06 s per interface in a TCG guest), and its stop
        to delete it again (0.44 s per switch port, 2026-11-26), one round trip each."""

        deleted_already = False   # set by the runner once the pair is gone

        def config(self, **_params):
            return {}

        def delete(self):
            """Mininet's delete, by an argument list started in the node's namespace rather than through
            its shell: a planned host starts its bash only for a command sent to it, which a teardown
            would then have to wait for."""
            if not self.deleted_already:
                proc = self.node.popen(["ip", "link", "del", self.name], stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            self.node.delIntf(self)
            self.link = None

    class PlannedIntf(PlannedEnd):
        """A host's or router's interface: the plan's setup, one `ip -batch` per namespace, gives it its
        addresses and brings it up."""

        deletes_its_pair = True   # the runner deletes the pair from this end

    class SwitchPort(PlannedEnd):
        """A switch's port, brought up in the batch that made its veth pair (make_veth_pairs)."""

    return PlannedIntf, SwitchPort


def _premade_link_class():
    """A link whose veth pair make_veth_pairs made, with every other pair, in one `ip -batch`: Mininet
    makes each through a node's shell (`ip link add`), one round trip per link."""
    from mininet.link import Link

    class PremadeLink(Link):
        @classmethod
        def makeIntfPair(cls, *_args, **_kwargs):
            return None

    return PremadeLink


def veth_pair_lines(plan: TopologyPlan, netns_of: dict[str, int | None]) -> tuple[list[str], list[str]]:
    """`ip -batch` lines that make every link's veth pair, each end with its MAC in its node's namespace
    (`netns_of`: a node's shell pid, None for a node in this namespace: a switch), and bring up the ends
    that stay here (switch ports: nothing in the plan's setup does); and the names of those ends."""
    lines, here = [], []
    for (a, b, a_if, b_if, _pa, _pb), (mac_a, mac_b) in zip(plan.link_ports(), plan.link_macs()):
        ends = []
        for node, ifname, mac in ((a, a_if, mac_a), (b, b_if, mac_b)):
            pid = netns_of[node]
            ends.append(f"name {ifname} address {mac}" + (f" netns {pid}" if pid is not None else ""))
            if pid is None:
                here.append(ifname)
        lines.append(f"link add {ends[0]} type veth peer {ends[1]}")
    return lines + [f"link set dev {name} up" for name in here], here


def make_veth_pairs(lines: list[str], here: list[str]) -> None:
    """Run veth_pair_lines in one `ip -batch` in this namespace, once none of the ends it makes here
    (`here`) exists: one that does is another run's, or a leftover, and is never touched. A pair with an
    end in a node's namespace goes with it when Mininet stops the node; build_network deletes the ends
    here if the build fails."""
    if not lines:
        return
    taken = sorted(set(here) & interfaces_here())
    if taken:
        raise RuntimeError(f"interface(s) {', '.join(taken)} exist already: another run's, or left behind "
                           "(`run-scenario clean` lists what a run left)")
    r = _ip_batch(lines)
    if r.returncode != 0:
        raise RuntimeError(f"making the veth pairs: `ip -batch` failed: {(r.stderr or r.stdout).strip()[-500:]}")


def interfaces_here() -> set[str]:
    """The network interfaces of this namespace, without starting a process."""
    return {name for _, name in socket.if_nameindex()}


def _ip_batch(lines: list[str], force: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *(["-force"] if force else []), "-batch", "-"],
                          input="".join(f"{line}\n" for line in lines), capture_output=True, text=True,
                          check=False, timeout=120)


def planned_link_ends(net) -> dict[str, list]:
    """node name -> the planned interfaces whose veth pairs that node deletes: each pair with a switch's
    port once, from its host's or router's end (deleting one end of a veth deletes the pair). A pair
    between two hosts or routers is left out: see leave_pairs_to_namespaces."""
    out: dict[str, list] = {}
    for ends in map(_namespaced_ends, net.links):
        if len(ends) == 1:
            out.setdefault(ends[0].node.name, []).append(ends[0])
    return out


def _namespaced_ends(link) -> list:
    """The link's ends in a host's or router's namespace (PlannedIntf), not a switch's port."""
    return [i for i in (link.intf1, link.intf2) if getattr(i, "deletes_its_pair", False)]


def leave_pairs_to_namespaces(net) -> None:
    """Mark the veth pairs between two hosts or routers as gone: the kernel deletes a veth whose network
    namespace ends, with its peer, once the namespaces' holders are killed by Mininet's stop. Deleting
    them first took 0.1 s of the default scenario's teardown in a TCG guest (2026-11-29), each deletion
    waiting for the kernel's RCU grace period, where the namespaces' end deletes them all in one batch.
    A switch's port is in this namespace, and outlives the host's: its pair is deleted by the runner."""
    for ends in map(_namespaced_ends, net.links):
        if len(ends) == 2:
            for end in ends:
                end.deleted_already = True


def build_network(plan: TopologyPlan, controller_port: int | None = None,
                  before_switches: Callable[[], None] | None = None, spawners=None):
    """Hosts, routers (hosts with forwarding on, set by the plan), switches and plain veth links.

    Shaping is applied and verified by the runner. Mininet's TCLink is not
    used because it reports tc failures (no sch_netem) as warnings and
    carries on unshaped. Switches under a controller run fail-mode secure
    (nothing passes without it) and connect to 127.0.0.1:`controller_port`;
    the others are standalone learning switches. `before_switches` is called
    once the hosts and links are made, before any switch starts (the runner
    waits there for its controller to listen). `spawners` start the hosts'
    commands (PlannedHost.popen); the caller closes them before the network stops.
    """
    from mininet.net import Mininet
    from mininet.node import OVSSwitch, RemoteController

    planned_host, premade_link = planned_host_class(), _premade_link_class()
    planned_host.spawners = spawners
    # every MAC is the plan's, set as the veth pair is made (Mininet's autoSetMacs set each host's first
    # one again afterwards: three shell round trips per host)
    net = Mininet(topo=None, build=False, controller=None, host=planned_host, link=premade_link,
                  autoSetMacs=False, waitConnected=False)
    here: list[str] = []
    try:
        nodes = _start_hosts(net, [*plan.hosts, *plan.routers], planned_host)
        bridge = _bridge_class() if any(w.type == "bridge" for w in plan.switches) else None
        for w in plan.switches:
            if w.type == "bridge":
                nodes[w.name] = net.addSwitch(w.name, cls=bridge, dpid=w.dpid)
            else:
                nodes[w.name] = net.addSwitch(
                    w.name, cls=OVSSwitch, dpid=w.dpid, protocols="OpenFlow13",
                    failMode="secure" if w.controller else "standalone",
                    datapath="user" if w.type == "ovs-user" else "kernel")
        planned, switch_port = _intf_classes()
        switch_names = {w.name for w in plan.switches}
        for n in (n for a, b, *_ in plan.link_ports() for n in (a, b)):
            if n not in nodes:
                nodes[n] = net.addHost(n, ip=None)
        lines, ends_here = veth_pair_lines(plan, {n: node.pid if node.inNamespace else None
                                                  for n, node in nodes.items()})
        make_veth_pairs(lines, ends_here)
        here = ends_here   # from now on, ends this build made (none of them existed before)
        for (a, b, a_if, b_if, pa, pb), (mac_a, mac_b) in zip(plan.link_ports(), plan.link_macs()):
            net.addLink(nodes[a], nodes[b], port1=pa, port2=pb, intfName1=a_if, intfName2=b_if,
                        addr1=mac_a, addr2=mac_b, cls1=switch_port if a in switch_names else planned,
                        cls2=switch_port if b in switch_names else planned)
        net.build()
        if before_switches is not None:
            before_switches()
        ctrl = None
        if any(w.controller for w in plan.switches):
            # made once the controller listens: Mininet's RemoteController checks on creation and
            # would warn "Unable to contact the remote controller" while it still imports
            ctrl = RemoteController("c0", ip="127.0.0.1", port=controller_port)
        for w in plan.switches:
            nodes[w.name].start([ctrl] if (w.controller and ctrl is not None) else [])
    except BaseException:
        try:
            _stop_after_a_failed_build(net)
        finally:
            if here:   # pairs between switches that Mininet may not know yet: no namespace takes them along
                _ip_batch([f"link del dev {name}" for name in here], force=True)
        raise
    return net


def _start_hosts(net, names: list[str], host_class) -> dict:
    """Every host's and router's namespace holder started, one after another (10 ms each in a TCG guest),
    then waited for, all at once: each makes its namespaces in parallel with the others. Mininet starts
    one host after another, and waits for each shell to answer. A host is added to `net` as it starts,
    so that net.stop() ends what did start whatever ends the wait (a failure, a signal)."""
    nodes = {name: net.addHost(name, cls=host_class, ip=None, wait_later=True) for name in names}
    for node in nodes.values():
        wait_in_own_namespaces(node.shell, node.name)
    return nodes


def _stop_after_a_failed_build(net) -> None:
    """net.stop() after the build stopped part-way. A signal (SIGTERM mid-build raises Terminated from
    its handler) can land while a node's shell still runs a command: Mininet then refuses every further
    command on that node (AssertionError in sendCmd) and nothing would be torn down. The pending
    command (a build step: a switch's `ovs-vsctl`, a bridge's `ip link`) is read to its end first."""
    for node in (*net.hosts, *net.switches):
        if getattr(node, "waiting", False) and getattr(node, "shell", None):
            node.waitOutput()
    stop_network(net)


# how long the hosts' shells, ended by Mininet's stop together, may take to exit before they are killed
SHELL_EXIT_S = 10.0


def stop_network(net, grace: float = SHELL_EXIT_S) -> None:
    """net.stop(), then every host's and router's processes waited for at once: its namespaces' holder
    (killed by PlannedHost.terminate) and its bash if one was started (hung up, as Mininet ends it). One
    net.stop() did not reach (it failed part-way: Mininet had not cleared the node's shell) is killed, as
    one that does not exit within `grace` seconds is: a hangup alone is not enough where it is ignored
    (under nohup, which the shells inherit). None is left unreaped."""
    hosts = _processes_of(net)
    try:
        net.stop()
    finally:
        seen = {id(proc) for _, proc in hosts}   # and a bash started by a command sent during the stop
        reap_shells(hosts + [(h, p) for h, p in _processes_of(net) if id(p) not in seen], grace)
        for h in net.hosts:
            if hasattr(h, "close_lifeline"):
                h.close_lifeline()


def _processes_of(net) -> list:
    return [(h, proc) for h in net.hosts for proc in (getattr(h, "shell", None), getattr(h, "bash", None))
            if proc is not None]


def reap_shells(hosts: list, grace: float) -> None:
    for host, shell in hosts:
        if getattr(host, "shell", None) is not None and shell.poll() is None:   # not reached by the stop
            kill_session(shell, signal.SIGKILL)
    deadline = time.monotonic() + grace
    for _, shell in hosts:
        try:
            shell.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            kill_session(shell, signal.SIGKILL)
            shell.wait()

