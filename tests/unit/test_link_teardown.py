"""Which veth pairs the runner deletes at teardown, and which go with the hosts' namespaces."""
from types import SimpleNamespace

from topologies.net import leave_pairs_to_namespaces, planned_link_ends


class End:
    def __init__(self, node: str, name: str, in_namespace: bool):
        self.node, self.name = SimpleNamespace(name=node), name
        self.deleted_already = False
        if in_namespace:   # a host's or router's end (PlannedIntf); a switch's port has no such mark
            self.deletes_its_pair = True


def link(a: End, b: End):
    return SimpleNamespace(intf1=a, intf2=b)


def test_pairs_between_hosts_or_routers_are_left_to_their_namespaces_and_pairs_to_switches_are_deleted():
    h1a, h2a = End("h1", "h1-eth0", True), End("h2", "h2-eth0", True)
    h1r, r1 = End("h1", "h1-eth1", True), End("r1", "r1-eth0", True)
    h3, s1 = End("h3", "h3-eth0", True), End("s1", "s1-eth1", False)
    s2, h4 = End("s2", "s2-eth1", False), End("h4", "h4-eth0", True)
    net = SimpleNamespace(links=[link(h1a, h2a), link(h1r, r1), link(h3, s1), link(s2, h4)])

    leave_pairs_to_namespaces(net)

    assert [e.deleted_already for e in (h1a, h2a, h1r, r1)] == [True] * 4
    assert [e.deleted_already for e in (h3, s1, s2, h4)] == [False] * 4
    # the switches' pairs, each once, from the end in a host's namespace, grouped by that host
    assert planned_link_ends(net) == {"h3": [h3], "h4": [h4]}


def test_a_network_of_hosts_only_deletes_nothing_itself():
    ends = [End("h1", "h1-eth0", True), End("h2", "h2-eth0", True)]
    net = SimpleNamespace(links=[link(*ends)])
    assert planned_link_ends(net) == {}
    leave_pairs_to_namespaces(net)
    assert all(e.deleted_already for e in ends)
