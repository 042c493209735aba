"""A build that stops part-way is still torn down, even when a signal landed inside a node's command."""
from topologies.net import _stop_after_a_failed_build


class Node:
    def __init__(self, waiting: bool):
        self.waiting, self.shell, self.calls = waiting, object(), []

    def waitOutput(self):
        self.calls.append("waitOutput")
        self.waiting = False


class Net:
    def __init__(self, hosts, switches):
        self.hosts, self.switches, self.stopped_with_waiting = hosts, switches, None

    def stop(self):
        # Mininet's stop runs a command on every node; a node still waiting asserts in sendCmd
        self.stopped_with_waiting = [n.waiting for n in (*self.hosts, *self.switches)]


def test_a_command_cut_by_a_signal_is_read_to_its_end_before_the_network_is_stopped():
    busy, idle, switch = Node(True), Node(False), Node(True)
    net = Net([busy, idle], [switch])
    _stop_after_a_failed_build(net)
    assert busy.calls == ["waitOutput"] and switch.calls == ["waitOutput"] and idle.calls == []
    assert net.stopped_with_waiting == [False, False, False]
