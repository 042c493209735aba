"""What the controller apps decide, as pure functions (no os-ken import), so unit tests can check them.

The apps (learning.py, steering.py) only translate between OpenFlow messages
and these decisions.

Steering (E2's LISP rule): on a steering switch, a TCP flow coming *up* from
the switch's own hosts leaves on uplink `port % N`, where `port` is the
flow's client-side port (`by: client-port`, the LISP router's "source port")
or its server-side port (`by: server-port`). The client-side switch sees the
client's port as the TCP source port, the server-side switch sees it as the
destination port; using the same number on both makes a flow's two
directions take the same WAN path. Packets coming *down* from an uplink go
to the learned host port, or are flooded to the host ports only: never back
up another uplink, which is what keeps the parallel WAN links loop-free.
Other upward traffic (ARP, ICMP, UDP, unsteered TCP) takes uplink 0.
"""
from __future__ import annotations

from dataclasses import dataclass, field

STEER_COOKIE = 0x5354       # "ST": the runner dumps (and clears) steered flows by this cookie
LEARN_COOKIE = 0x4C4E       # "LN"


@dataclass
class SwitchConfig:
    """One switch as the app sees it (from the runner's JSON config)."""

    dpid: int
    name: str
    ports: list[int] = field(default_factory=list)
    uplinks: list[int] = field(default_factory=list)
    uplink_names: list[str] = field(default_factory=list)
    client_side: bool = True

    @property
    def downlinks(self) -> list[int]:
        return [p for p in self.ports if p not in self.uplinks]


def switch_configs(doc: dict) -> dict[int, SwitchConfig]:
    out = {}
    for dpid, s in (doc.get("switches") or {}).items():
        out[int(dpid)] = SwitchConfig(dpid=int(dpid), name=s.get("name", str(dpid)), ports=list(s.get("ports", [])),
                                      uplinks=list(s.get("uplinks", [])), uplink_names=list(s.get("uplink_names", [])),
                                      client_side=bool(s.get("client_side", True)))
    return out


@dataclass(frozen=True)
class Packet:
    """The fields of a packet-in that decisions depend on."""

    in_port: int
    eth_src: str
    eth_dst: str
    eth_type: int
    ip_src: str | None = None
    ip_dst: str | None = None
    ip_proto: int | None = None
    tcp_src: int | None = None
    tcp_dst: int | None = None
    syn: bool = False                # a connection's opening SYN (SYN without ACK)


@dataclass(frozen=True)
class Decision:
    out_ports: tuple[int, ...]
    match: dict | None = None        # install a flow with this match (None: packet-out only)
    priority: int = 0
    cookie: int = 0
    steer: dict | None = None        # what the report says about a steered flow


def learn(table: dict[str, int], sw: SwitchConfig, pkt: Packet) -> None:
    """Remember where a host MAC lives: only from host ports (behind an uplink is 'up', not a port)."""
    if pkt.in_port not in sw.uplinks and not _multicast(pkt.eth_src):
        table[pkt.eth_src] = pkt.in_port


def learning_decision(table: dict[str, int], sw: SwitchConfig, pkt: Packet) -> Decision:
    """A plain learning switch: known destination -> its port (and a flow), else flood."""
    learn(table, sw, pkt)
    out = table.get(pkt.eth_dst)
    if out is None or _multicast(pkt.eth_dst):
        return Decision(out_ports=(FLOOD,))
    if out == pkt.in_port:
        return Decision(out_ports=())
    return Decision(out_ports=(out,), match={"in_port": pkt.in_port, "eth_dst": pkt.eth_dst, "eth_src": pkt.eth_src},
                    priority=1, cookie=LEARN_COOKIE)


def steering_key(sw: SwitchConfig, pkt: Packet, by: str) -> int:
    """The port number whose remainder picks the uplink (see the module docstring)."""
    client_port = pkt.tcp_src if sw.client_side else pkt.tcp_dst
    server_port = pkt.tcp_dst if sw.client_side else pkt.tcp_src
    return client_port if by == "client-port" else server_port


def uplink_index(port: int, n_uplinks: int) -> int:
    return port % n_uplinks


def is_steered(sw: SwitchConfig, pkt: Packet, server_ports: list[int]) -> bool:
    if not sw.uplinks or pkt.in_port in sw.uplinks or pkt.ip_proto != 6 or pkt.tcp_src is None:
        return False
    if not server_ports:
        return True
    server_port = pkt.tcp_dst if sw.client_side else pkt.tcp_src
    return server_port in server_ports


def steering_decision(table: dict[str, int], sw: SwitchConfig, pkt: Packet, by: str,
                      server_ports: list[int]) -> Decision:
    if not sw.uplinks:
        return learning_decision(table, sw, pkt)
    learn(table, sw, pkt)
    if pkt.in_port in sw.uplinks:
        # down: to the learned host port, else to every host port; never up again
        out = table.get(pkt.eth_dst)
        if out is not None and not _multicast(pkt.eth_dst):
            return Decision(out_ports=(out,), match={"in_port": pkt.in_port, "eth_dst": pkt.eth_dst},
                            priority=10, cookie=LEARN_COOKIE)
        return Decision(out_ports=tuple(p for p in sw.downlinks if p != pkt.in_port))
    if is_steered(sw, pkt, server_ports):
        key = steering_key(sw, pkt, by)
        i = uplink_index(key, len(sw.uplinks))
        port = sw.uplinks[i]
        ip = "ipv4" if pkt.eth_type == 0x0800 else "ipv6"
        match = {"in_port": pkt.in_port, "eth_type": pkt.eth_type, "ip_proto": 6,
                 f"{ip}_src": pkt.ip_src, f"{ip}_dst": pkt.ip_dst,
                 "tcp_src": pkt.tcp_src, "tcp_dst": pkt.tcp_dst}
        name = sw.uplink_names[i] if i < len(sw.uplink_names) else str(port)
        return Decision(out_ports=(port,), match=match, priority=20, cookie=STEER_COOKIE,
                        steer={"switch": sw.name, "src": pkt.ip_src, "sport": pkt.tcp_src, "dst": pkt.ip_dst,
                               "dport": pkt.tcp_dst, "key": key, "uplink": name, "uplink_index": i,
                               "port": port})
    # other traffic up: a host on this switch, else (and for broadcasts) the other host ports and uplink 0
    out = table.get(pkt.eth_dst)
    if out is not None and not _multicast(pkt.eth_dst) and out not in sw.uplinks:
        return Decision(out_ports=(out,) if out != pkt.in_port else ())
    return Decision(out_ports=tuple(p for p in sw.downlinks if p != pkt.in_port) + (sw.uplinks[0],))


def replies_to_steer_ahead(tables: dict[int, dict[str, int]], switches: dict[int, SwitchConfig], here: int,
                           pkt: Packet) -> list[tuple[int, Packet]]:
    """For a new connection's SYN: where its reply will come *up* into a steering switch, and that reply.

    Each (dpid, reply) names a steering switch, other than `here`, on whose host port the SYN's
    destination was learned, with the SYN-ACK as it will enter there. The app decides that reply and
    installs its flow before it lets the SYN go on, so the server's first packets never take the detour
    through the controller. Why it matters: while a flow's first packets wait at the controller (tens of
    ms under TCG), later packets of the same flow take the flow just installed and overtake them. A pure
    ACK overtaken by data is an old segment to the receiver's TCP, which drops it before MPTCP reads its
    options: an ADD_ADDR lost that way is sent again only after net.mptcp.add_addr_timeout (120 s), so
    the connection never gets its join (seen in lab 5: docs/controller.md).
    """
    if not pkt.syn or pkt.ip_proto != 6 or pkt.tcp_src is None:
        return []
    out = []
    for dpid, sw in sorted(switches.items()):
        host_port = tables.get(dpid, {}).get(pkt.eth_dst)
        if dpid == here or not sw.uplinks or host_port is None or host_port in sw.uplinks:
            continue
        out.append((dpid, Packet(in_port=host_port, eth_src=pkt.eth_dst, eth_dst=pkt.eth_src, eth_type=pkt.eth_type,
                                 ip_src=pkt.ip_dst, ip_dst=pkt.ip_src, ip_proto=6, tcp_src=pkt.tcp_dst,
                                 tcp_dst=pkt.tcp_src)))
    return out


FLOOD = -1   # stands for OFPP_FLOOD; the app maps it


def _multicast(mac: str) -> bool:
    return int(mac.split(":")[0], 16) & 1 == 1
