"""The network of one topology plan: Open vSwitch and the controller when the plan has switches, the
Mininet hosts and links, and each namespace's setup (addresses, routes, offloads, nft counters) as one
batched command per namespace. `stop` takes it all down again."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable

from controller.launch import user_app_path
from topologies.net import build_network, leave_pairs_to_namespaces, planned_link_ends, stop_network
from topologies.plan import TopologyPlan

from runners.collect import counters
from runners.errors import RunFailure
from runners.linux.nsexec import Argv, at_once, run_batch
from runners.linux.nfnetlink import NftCounterReader
from runners.linux.nsspawn import Spawners
from runners.linux.rtnetlink import NamespaceDumps, NetlinkError, QdiscReader, namespace_id
from runners.linux.sockdiag import SubflowReader
from runners.pipeline.controlplane import Controller, OvsDaemons, check_bridges


class Network:
    def __init__(self, controller_dir: Path, base_dir: Path, log: Callable[[str], None]):
        self.controller_dir, self.base_dir, self.log = controller_dir, base_dir, log
        self.ovs = OvsDaemons(log, logs_to=controller_dir.parent / "openvswitch")
        self.controller: Controller | None = None
        self.mininet = None
        self.client = self.server = None
        self.clients: list = []
        # the netlink readers, each by (its class, its namespace or host); their sockets live until stop()
        self._readers: dict[tuple[type, int | str], NamespaceDumps] = {}
        self._namespaces: dict[str, int] = {}
        self._readers_lock = threading.Lock()   # the samplers' threads and the runner's ask for readers
        self._readers_closed = False
        self._ovs_bridges: list[str] = []   # the OVS switches' bridges of the network in place
        self._spawners: Spawners | None = None   # start the hosts' commands; each holds its namespace

    @property
    def up(self) -> bool:
        return self.mininet is not None

    def get(self, name: str):
        return self.mininet.get(name)

    def namespace_of(self, name: str) -> int:
        """The node's network namespace (its inode): switches share the root one."""
        if name not in self._namespaces:
            self._namespaces[name] = namespace_id(self.get(name).pid)
        return self._namespaces[name]

    def qdisc_reader(self, name: str) -> QdiscReader:
        """The node's qdisc counters over rtnetlink, one reader per namespace (switches share the root
        one); its socket holds the namespace, and so the node's links, while open."""
        return self._reader(QdiscReader, name, by_namespace=True)

    def nft_reader(self, name: str) -> NftCounterReader:
        """The host's per-path nft counters over netlink."""
        return self._reader(NftCounterReader, name, counters.NFT_TABLE[1])

    def subflow_reader(self, name: str) -> SubflowReader:
        """The host's MPTCP subflows over sock_diag."""
        return self._reader(SubflowReader, name)

    def _reader(self, kind: type, name: str, *args, by_namespace: bool = False):
        """The reader of `kind` for the node, made on first use and kept until the network stops. A
        sampler thread that outlived its run gets none while the network goes down: its socket would hold
        a namespace open with nothing to close it."""
        with self._readers_lock:
            if self._readers_closed:
                raise NetlinkError("netlink: the network is being taken down")
            key = (kind, self.namespace_of(name) if by_namespace else name)
            if key not in self._readers:
                self._readers[key] = kind(self.get(name).pid, *args)
            return self._readers[key]

    def build(self, plan: TopologyPlan) -> None:
        self._readers_closed = False   # a set rebuilds its network between points on the same Network
        controlled = [w.name for w in plan.switches if w.controller]
        if controlled:
            self.controller = Controller(self._controller_app(plan), plan.controller["port"], plan.controller,
                                         self.controller_dir, log=self.log)
            self.controller.launch()   # its imports run while OVS starts
        if any(w.type != "bridge" for w in plan.switches):
            self.ovs.ensure(userspace=any(w.type == "ovs-user" for w in plan.switches))
        # Mininet makes the hosts and links while the controller imports (lab 5's build: 5.5 s of 19.5 s in a
        # TCG guest, 2026-11-28); its switches start once it listens: OVS backs off for a long time when the
        # controller is not there yet
        self._spawners = Spawners()
        try:
            self.mininet = build_network(plan, plan.controller["port"] if plan.controller else None,
                                         before_switches=self.controller.wait_listening if controlled else None,
                                         spawners=self._spawners)
        except BaseException:
            self._close_spawners()
            raise
        self._ovs_bridges = [w.name for w in plan.switches if w.type != "bridge"]
        check_bridges(self._ovs_bridges, self.ovs.vswitchd_log)
        self.client = self.mininet.get(plan.client)
        self.clients = [self.mininet.get(c) for c in plan.all_clients]
        self.server = self.mininet.get(plan.server)
        at_once(lambda item: run_batch(self.mininet.get(item[0]), item[1]), setup_per_node(plan).items())
        if self.controller is not None:
            self.controller.wait_connected(controlled)

    def check_control_plane(self, when: str) -> None:
        """The controller and ovs-vswitchd still run (ControlPlaneError if not)."""
        if self.controller is not None:
            self.controller.check_alive(when)
        self.ovs.check_alive(when)

    def stop(self) -> None:
        if self.mininet is not None:
            self.ovs.revive_for_teardown()
            self.log("cleaning up: stopping Mininet")
            with self._readers_lock:
                self._readers_closed = True
                for reader in self._readers.values():
                    reader.close()
                self._readers.clear()
                self._namespaces.clear()
            try:
                self.ovs.delete_bridges(self._ovs_bridges)
            except Exception as e:  # Mininet's stop deletes them
                self.log(f"warning: deleting the bridges before their links failed: {e}")
            self._ovs_bridges = []
            try:
                self._delete_links()
            except Exception as e:  # Mininet's stop deletes what is left, one by one
                self.log(f"warning: deleting the links at once failed: {e}")
            self._close_spawners()   # their threads hold the namespaces that Mininet's stop ends
            try:
                stop_network(self.mininet)
            except Exception as e:  # still try the rest
                self.log(f"warning: Mininet stop failed: {e}")
            self.mininet = None
        if self.controller is not None:
            self.controller.stop()
            self.controller = None
        self.ovs.stop()

    def _close_spawners(self) -> None:
        if self._spawners is not None:
            self._spawners.close()
            self._spawners = None

    def _delete_links(self) -> None:
        """The links to switches deleted by one `ip` batch per namespace, all namespaces at once: Mininet's
        stop asks each node's shell per interface end, one after another (0.8 s for the default
        scenario's two links in a TCG guest). An end whose delete failed is left to Mininet. The links
        between two hosts or routers go with their namespaces (leave_pairs_to_namespaces)."""
        leave_pairs_to_namespaces(self.mininet)
        ends = planned_link_ends(self.mininet)

        def delete(item):
            name, intfs = item
            results = run_batch(self.mininet.get(name), [["ip", "link", "del", i.name] for i in intfs], check=False)
            for intf, res in zip(intfs, results):
                intf.deleted_already = res.rc == 0
                peer = intf.link.intf2 if intf.link.intf1 is intf else intf.link.intf1
                if res.rc == 0 and hasattr(peer, "deleted_already"):
                    peer.deleted_already = True   # the other end of the pair went with it

        at_once(delete, ends.items())

    def _controller_app(self, plan: TopologyPlan) -> str:
        app = plan.controller["app"]
        path = user_app_path(app, self.base_dir)
        if path is None:
            return app
        if not path.is_file():
            raise RunFailure(f"topology.controller.app: no such file {path}")
        return str(path.resolve())


def setup_per_node(plan: TopologyPlan) -> dict[str, list[list[str]]]:
    """Every namespace's setup commands, in order: the plan's, `lo` up, offloads, then nft counters."""
    per_node: dict[str, list] = {}
    for node, argvs in plan.setup.items():
        per_node.setdefault(node, []).extend(argvs)
    shaped = plan.shaped_interfaces()
    # the `ip` ones next to the plan's own, before its IPv6 rules (`ip -6`, last): a run of `ip` changes
    # with the same options is one process (ipbatch). `lo` too: topologies.net's hosts skip Mininet's
    # `ifconfig lo up`, a shell round trip per host.
    switches = {w.name for w in plan.switches}
    namespaced = dict.fromkeys([*plan.hosts, *plan.routers, *(n for a, b, *_ in plan.link_ports() for n in (a, b))])
    ip_lines: dict[str, list[Argv]] = {node: [["ip", "link", "set", "dev", "lo", "up"]] for node in namespaced
                                       if node not in switches}
    for iface in shaped:
        ip_lines.setdefault(iface.node, []).append(one_segment_per_packet_argv(iface.name))
    for node, argvs in ip_lines.items():
        per_node[node] = before_trailing_v6(per_node.get(node, []), argvs)
    for iface in shaped:
        per_node[iface.node].append(segmentation_offloads_off_argv(iface.name))
    for node, ifname in plan.offload_off:
        # the userspace datapath does not complete checksums or segment: TCP breaks without this
        per_node.setdefault(node, []).append(tx_offloads_off_argv(ifname))
    if plan.byte_counters == "nft":
        for node in plan.hosts:
            view = plan.for_client(node) if node in plan.all_clients else plan
            per_node.setdefault(node, []).extend(counters.nft_counter_argvs(view, node))
    return per_node


def before_trailing_v6(argvs: list[Argv], extra: list[Argv]) -> list[Argv]:
    """`argvs` with `extra` put before its trailing run of `ip -6` commands (routed plans end with them)."""
    k = len(argvs)
    while k > 0 and argvs[k - 1][:2] == ["ip", "-6"]:
        k -= 1
    return argvs[:k] + extra + argvs[k:]


def segmentation_offloads_off_argv(ifname: str) -> Argv:
    """Segmentation offloads off, so netem's loss and limit act on real packets, not 64 KB bursts."""
    return ["ethtool", "-K", ifname, "tso", "off", "gso", "off", "gro", "off"]


def one_segment_per_packet_argv(ifname: str) -> Argv:
    """TCP hands the qdisc one segment per packet. `gso off` is not enough: Linux TCP always builds
    software-GSO packets (sk_setup_caps), by default of 2 or more segments (tcp_min_tso_segs), and
    netem drops and queues whole packets while counting sent segments. A 5 % loss then cost
    bursts of segments and read as 3.4-3.8 % on netem's counter (UDP, one datagram per packet, read
    5.10 % over 5,000 datagrams, as its receiver counted)."""
    return ["ip", "link", "set", "dev", ifname, "gso_max_segs", "1"]


def tx_offloads_off_argv(ifname: str) -> Argv:
    """For ports of an OVS userspace datapath: it neither fills in TX checksums nor segments TSO/GSO."""
    return ["ethtool", "-K", ifname, "tx", "off", "tso", "off", "gso", "off"]
