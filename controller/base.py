"""Shared plumbing of our os-ken apps: config, the report file, packet-in parsing, flow installation.

The runner hands every app a JSON config (path in $TESTBED_CONTROLLER_CONFIG):
switch names by datapath id, their ports, steering settings, and `report`, a
JSON-lines file where the app records what it decided. The decisions
themselves are pure functions in controller/decisions.py.
"""
from __future__ import annotations

import json
import os
import threading
import time

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.lib.packet import ethernet, ether_types, ipv4, ipv6, packet, tcp
from os_ken.ofproto import ofproto_v1_3

from controller.decisions import FLOOD, Decision, Packet, SwitchConfig, replies_to_steer_ahead, switch_configs

CONFIG_ENV = "TESTBED_CONTROLLER_CONFIG"


def load_config() -> dict:
    path = os.environ.get(CONFIG_ENV)
    if not path:
        return {}
    with open(path) as f:
        return json.load(f)


class Report:
    """Append-only JSON lines; each line is flushed so the runner can read it while the app runs."""

    def __init__(self, path: str | None):
        self._f = open(path, "a", buffering=1) if path else None
        self._lock = threading.Lock()

    def write(self, event: str, **fields) -> None:
        if self._f is None:
            return
        with self._lock:
            self._f.write(json.dumps({"t": round(time.time(), 3), "event": event, **fields}) + "\n")


class TestbedApp(app_manager.OSKenApp):
    """Base of our apps: subclasses implement `decide(table, sw, pkt) -> Decision`."""

    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.config = load_config()
        self.switch_cfg: dict[int, SwitchConfig] = switch_configs(self.config)
        self.report = Report(self.config.get("report"))
        self.mac_tables: dict[int, dict[str, int]] = {}
        self.datapaths: dict[int, object] = {}

    def switch(self, dpid: int) -> SwitchConfig:
        if dpid not in self.switch_cfg:   # a switch the runner did not describe: plain learning
            self.switch_cfg[dpid] = SwitchConfig(dpid=dpid, name=f"dpid-{dpid}")
        return self.switch_cfg[dpid]

    def decide(self, table: dict[str, int], sw: SwitchConfig, pkt: Packet) -> Decision:
        raise NotImplementedError

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _features(self, ev):
        dp = ev.msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        # table miss: whole packets to the controller
        actions = [parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)]
        inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
        dp.send_msg(parser.OFPFlowMod(datapath=dp, priority=0, match=parser.OFPMatch(), instructions=inst))
        sw = self.switch(dp.id)
        self.mac_tables.setdefault(dp.id, {})
        self.datapaths[dp.id] = dp
        self.report.write("switch-connected", dpid=dp.id, switch=sw.name)
        self.logger.info("switch %s (dpid %d) connected", sw.name, dp.id)

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def _packet_in(self, ev):
        msg = ev.msg
        dp = msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        pkt = parse_packet(msg.match["in_port"], msg.data)
        if pkt is None:
            return
        sw = self.switch(dp.id)
        d = self.decide(self.mac_tables.setdefault(dp.id, {}), sw, pkt)
        if d.steer is not None:     # before this SYN goes on: its reply's flow where the reply comes up
            for dpid, reply in replies_to_steer_ahead(self.mac_tables, self.switch_cfg, dp.id, pkt):
                ahead = self.decide(self.mac_tables.setdefault(dpid, {}), self.switch(dpid), reply)
                if ahead.steer is not None and dpid in self.datapaths:
                    self._install(self.datapaths[dpid], ahead, ahead=True)
        actions = self._install(dp, d)
        if actions:
            dp.send_msg(parser.OFPPacketOut(datapath=dp, buffer_id=ofp.OFP_NO_BUFFER, in_port=pkt.in_port,
                                            actions=actions, data=msg.data))

    def _install(self, dp, d: Decision, ahead: bool = False) -> list:
        """The decision's flow on this switch (when it has a match) and its report line; returns the actions."""
        ofp, parser = dp.ofproto, dp.ofproto_parser
        actions = [parser.OFPActionOutput(ofp.OFPP_FLOOD if p == FLOOD else p) for p in d.out_ports]
        if d.match is not None:
            inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
            dp.send_msg(parser.OFPFlowMod(datapath=dp, cookie=d.cookie, priority=d.priority,
                                          idle_timeout=60, match=parser.OFPMatch(**d.match), instructions=inst))
        if d.steer is not None:
            self.report.write("flow", **d.steer, **({"ahead": True} if ahead else {}))
        return actions


def parse_packet(in_port: int, data: bytes) -> Packet | None:
    p = packet.Packet(data)
    eth = p.get_protocol(ethernet.ethernet)
    if eth is None or eth.ethertype == ether_types.ETH_TYPE_LLDP:
        return None
    fields = dict(in_port=in_port, eth_src=eth.src, eth_dst=eth.dst, eth_type=eth.ethertype)
    ip = p.get_protocol(ipv4.ipv4) or p.get_protocol(ipv6.ipv6)
    if ip is not None:
        proto = ip.proto if isinstance(ip, ipv4.ipv4) else ip.nxt
        fields.update(ip_src=ip.src, ip_dst=ip.dst, ip_proto=proto)
        t = p.get_protocol(tcp.tcp)
        if t is not None:
            fields.update(tcp_src=t.src_port, tcp_dst=t.dst_port,
                          syn=bool(t.bits & tcp.TCP_SYN) and not t.bits & tcp.TCP_ACK)
    return Packet(**fields)
