"""Lab 5: your own OpenFlow app. As given, it puts every TCP flow on the *first* WAN link,
as a site with one ISP would: change `pick_uplink` and see what MPTCP makes of it.

It runs as root, so run-scenario asks for --allow-commands before it starts it.
"""
import dataclasses

from controller.base import TestbedApp
from controller.decisions import steering_decision


def pick_uplink(sw, pkt) -> int:
    """Which of this switch's WAN links (0 or 1) a TCP flow goes up on. The flow's ports:
    pkt.tcp_src and pkt.tcp_dst; sw.client_side is True on the client's switch."""
    return 0


class MyApp(TestbedApp):
    def decide(self, table, sw, pkt):
        decision = steering_decision(table, sw, pkt, "server-port", [])
        if decision.steer is None:              # not a TCP flow going up: learning switch behaviour
            return decision
        i = pick_uplink(sw, pkt)
        port = sw.uplinks[i]
        return dataclasses.replace(decision, out_ports=(port,),
                                   steer={**decision.steer, "uplink": sw.uplink_names[i], "uplink_index": i,
                                          "port": port})
