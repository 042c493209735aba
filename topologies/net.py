"""Build a TopologyPlan as a real Mininet network (this part touches the kernel)."""
from __future__ import annotations

from topologies.plan import TopologyPlan


def build_network(plan: TopologyPlan):
    """Hosts and plain veth links only: shaping is applied and verified by the runner.

    Mininet's TCLink is not used because it reports tc failures (no
    sch_netem) as warnings and carries on unshaped.
    """
    from mininet.link import Link
    from mininet.net import Mininet
    from mininet.node import Host

    net = Mininet(topo=None, build=False, controller=None, host=Host, link=Link,
                  autoSetMacs=True, waitConnected=False)
    try:
        client = net.addHost(plan.client, ip=None)
        server = net.addHost(plan.server, ip=None)
        for p in plan.paths:
            net.addLink(client, server, intfName1=p.client_if, intfName2=p.server_if)
        net.build()
    except BaseException:
        net.stop()
        raise
    return net
