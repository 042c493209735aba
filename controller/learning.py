"""os-ken app: a learning switch on OpenFlow 1.3, the default for switches under a controller."""
from controller.base import TestbedApp
from controller.decisions import learning_decision


class LearningSwitch(TestbedApp):
    def decide(self, table, sw, pkt):
        return learning_decision(table, sw, pkt)
