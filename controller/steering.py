"""os-ken app: subflow steering, E2's LISP router: each TCP flow goes up on uplink `port % N`.

Switches without uplinks in the config behave as learning switches. See
controller/decisions.py for the rule and why it is loop-free.
"""
from controller.base import TestbedApp
from controller.decisions import steering_decision


class SteeringSwitch(TestbedApp):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.by = self.config.get("by", "client-port")
        self.server_ports = list(self.config.get("server_ports", []))

    def decide(self, table, sw, pkt):
        return steering_decision(table, sw, pkt, self.by, self.server_ports)
