"""Build a TopologyPlan as a real Mininet network (this part touches the kernel)."""
from __future__ import annotations

from topologies.plan import TopologyPlan


def build_network(plan: TopologyPlan):
    """Hosts, routers (hosts with forwarding on, set by the plan) and plain veth links.

    Shaping is applied and verified by the runner. Mininet's TCLink is not
    used because it reports tc failures (no sch_netem) as warnings and
    carries on unshaped.
    """
    from mininet.link import Link
    from mininet.net import Mininet
    from mininet.node import Host

    net = Mininet(topo=None, build=False, controller=None, host=Host, link=Link,
                  autoSetMacs=True, waitConnected=False)
    try:
        nodes = {}
        for name in (*plan.hosts, *plan.routers):
            nodes[name] = net.addHost(name, ip=None)
        for _, a, a_if, b, b_if in plan.links:
            for n in (a, b):
                if n not in nodes:
                    nodes[n] = net.addHost(n, ip=None)
            net.addLink(nodes[a], nodes[b], intfName1=a_if, intfName2=b_if)
        net.build()
    except BaseException:
        net.stop()
        raise
    return net
