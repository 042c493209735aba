"""Routed topologies: validation, address plan, per-family routes, source routing (pure, no root)."""
from pathlib import Path

import pytest
from scenarios.spec.loader import ScenarioError, load_scenario, parse_scenario
from topologies.kinds import plan
from topologies.plan import PlanError

from runners.collect import counters
from runners.linux import ipbatch
from runners.pipeline import mptcp_config
from runners.traffic import iperf3

REPO = Path(__file__).resolve().parents[2]

TWO_FAMILIES = """\
name: t
topology:
  kind: routed
  family: dual
  routers: [r1, r2]
  links:
    - {name: access, between: [h1, r1], bw: 100}
    - {name: v4core, between: [r1, r2], bw: 5, delay: 20ms}
    - {name: v6core, between: [r1, r2], bw: 5, delay: 30ms}
    - {name: egress, between: [r2, h2], bw: 100}
  paths:
    - {name: v4, via: [access, v4core, egress], family: ipv4}
    - {name: v6, via: [access, v6core, egress], family: ipv6}
"""


def routes(p, node):
    return [a for a in p.setup[node] if "route" in a and "replace" in a]


def test_address_plan_is_deterministic_and_dual_stack():
    p = plan(parse_scenario(TWO_FAMILIES))
    h1 = p.interface("h1-eth0")
    assert h1.addrs == (("ipv4", "10.1.1.1", 24), ("ipv6", "fd00:1:1::1", 64))
    assert p.interface("r1-eth0").addr("ipv4") == "10.1.1.2"
    assert p.interface("h2-eth0").addr("ipv6") == "fd00:1:4::2"
    assert [(x.name, x.family, x.client_ip, x.server_ip, x.client_if) for x in p.paths] == [
        ("v4", "ipv4", "10.1.1.1", "10.1.4.2", "h1-eth0"), ("v6", "ipv6", "fd00:1:1::1", "fd00:1:4::2", "h1-eth0")]
    assert plan(parse_scenario(TWO_FAMILIES)).to_dict() == p.to_dict()
    assert p.byte_counters == "nft"


def test_families_take_different_links_non_congruent():
    p = plan(parse_scenario(TWO_FAMILIES))
    r1 = routes(p, "r1")
    # the server's IPv4 address via v4core (r1-eth1), its IPv6 address via v6core (r1-eth2)
    assert ["ip", "route", "replace", "10.1.4.2/32", "via", "10.1.2.2", "dev", "r1-eth1"] in r1
    assert ["ip", "route", "replace", "fd00:1:4::2/128", "via", "fd00:1:3::2", "dev", "r1-eth2"] in r1
    r2 = routes(p, "r2")
    assert ["ip", "route", "replace", "10.1.1.1/32", "via", "10.1.2.1", "dev", "r2-eth0"] in r2
    assert ["ip", "route", "replace", "fd00:1:1::1/128", "via", "fd00:1:3::1", "dev", "r2-eth1"] in r2
    assert ["sysctl", "-q", "-w", "net.ipv6.conf.all.forwarding=1"] in p.setup["r1"]
    assert not any("forwarding=1" in " ".join(a) for a in p.setup["h1"])


def test_every_node_reaches_every_subnet():
    p = plan(parse_scenario(TWO_FAMILIES))
    dsts = {a[3] for a in routes(p, "h1")}
    assert {"10.1.2.0/24", "10.1.3.0/24", "10.1.4.0/24", "fd00:1:4::/64"} <= dsts


def test_shared_link_congruent_paths_do_not_conflict():
    text = TWO_FAMILIES.replace("via: [access, v6core, egress]", "via: [access, v4core, egress]")
    p = plan(parse_scenario(text))
    r1 = routes(p, "r1")
    assert ["ip", "route", "replace", "fd00:1:4::2/128", "via", "fd00:1:2::2", "dev", "r1-eth1"] in r1


def test_end_hosts_route_by_source_address_for_both_families():
    p = plan(parse_scenario(TWO_FAMILIES))
    h1, h2 = p.setup["h1"], p.setup["h2"]
    assert ["ip", "rule", "add", "from", "10.1.1.1", "table", "200", "priority", "200"] in h1
    assert ["ip", "route", "add", "::/0", "via", "fd00:1:1::2", "dev", "h1-eth0", "table", "200"] in h1
    assert ["ip", "-6", "rule", "add", "from", "fd00:1:4::2", "table", "201", "priority", "201"] in h2


def test_every_node_sets_up_with_at_most_two_ip_processes():
    """Routes carry no family option and IPv6 rules (which need `-6`) come last: each node's `ip`
    commands are one `ip -batch`, two with IPv6 rules, not a process per command (ipbatch)."""
    p = plan(parse_scenario(TWO_FAMILIES))
    for node, argvs in p.setup.items():
        ip_units = [u for u in ipbatch.units(argvs) if u.tool == "ip"]
        assert len(ip_units) <= (2 if node in ("h1", "h2") else 1), (node, [u.argvs for u in ip_units])
        assert all(a[1] == "-6" for u in ip_units[1:] for a in u.argvs), node


def test_dual_stack_mptcp_signals_the_other_family_and_uses_a_v6_socket():
    s = parse_scenario(TWO_FAMILIES)
    p = plan(s)
    cmds = mptcp_config.mptcp_argvs(s, p, "v4")
    assert ["ip", "mptcp", "endpoint", "add", "fd00:1:4::2", "dev", "h2-eth0", "signal"] in cmds.server
    assert ["ip", "mptcp", "limits", "set", "subflows", "1", "add_addr_accepted", "1"] in cmds.client
    assert iperf3.needs_v6_socket(p, "v4", mptcp=True) and not iperf3.needs_v6_socket(p, "v4", mptcp=False)
    assert not iperf3.needs_v6_socket(p, "v6", mptcp=True)
    assert iperf3.v4_mapped("10.1.4.2") == "::ffff:10.1.4.2"


def test_nft_counters_per_path_and_direction():
    p = plan(parse_scenario(TWO_FAMILIES))
    argvs = counters.nft_counter_argvs(p, "h2")
    assert ["nft", "add", "rule", "inet", "mptb", "in", "ip6", "saddr", "fd00:1:1::1", "ip6", "daddr",
            "fd00:1:4::2", "counter", "comment", '"v6"'] in argvs


def test_e3_four_paths_each_on_its_own_links():
    p = plan(load_scenario(REPO / "scenarios" / "e3-ipv4.yaml"))
    assert [(x.client_if, x.server_if) for x in p.paths] == [(f"h1-eth{i}", f"h2-eth{i}") for i in range(4)]
    r1 = routes(p, "r1")
    for i, x in enumerate(p.paths):
        wan = f"r1-eth{4 + i}"
        assert any(a[3] == f"{x.server_ip}/32" and a[-1] == wan for a in r1), (x, r1)
    s = load_scenario(REPO / "scenarios" / "e3-ipv4.yaml")
    assert len([a for a in mptcp_config.mptcp_argvs(s, p, "A").server if "signal" in a]) == 3


def test_e3_mixed_is_an_ipv4_handshake_with_ipv6_subflows():
    s = load_scenario(REPO / "scenarios" / "e3-mixed.yaml")
    p = plan(s)
    cmds = mptcp_config.mptcp_argvs(s, p, "app")
    signals = [a[4] for a in cmds.server if "signal" in a]
    assert len(signals) == 4 and all(":" in a for a in signals)
    app_ip = p.path("app").client_ip
    # the initial subflow becomes backup by MP_PRIO once the connection is up (an endpoint flag cannot reach it)
    assert ["ip", "mptcp", "endpoint", "add", app_ip, "dev", "h1-eth0"] in cmds.client
    assert cmds.after_connect == [["ip", "mptcp", "endpoint", "change", app_ip, "backup"]]
    assert s.efficiency_paths == ["A", "B", "C", "D"]


BASE = """\
name: t
topology:
  kind: routed
  family: ipv4
  routers: [r1]
  links:
    - {name: l1, between: [h1, r1], bw: 10}
    - {name: l2, between: [r1, h2], bw: 10}
  paths:
    - {name: A, via: [l1, l2]}
"""


@pytest.mark.parametrize("old,new,msg", [
    ("between: [r1, h2]", "between: [r1, h9]", "links[1].between (line 8): unknown node 'h9'"),
    ("between: [r1, h2]", "between: [r1, r1]", "links[1].between (line 8): a link needs two different nodes"),
    ("    - {name: l2, between: [r1, h2], bw: 10}\n", "    - {name: l2, between: [r1, h3], bw: 10}\n",
     "unknown node 'h3'"),
    ("{name: l2, between: [r1, h2], bw: 10}", "{name: l2, between: [r1, h2], bw: 10, ipv6: 'fd00:9::/64'}",
     "links[1].ipv6 (line 8): an IPv6 subnet on a link whose ends do not use ipv6"),
    ("{name: l1, between: [h1, r1], bw: 10}", "{name: l1, between: [h1, r1], bw: 10, ipv4: 10.9.0.0/16}\n"
     "    - {name: l3, between: [h1, r1], bw: 10, ipv4: 10.9.1.0/24}", "links[1].ipv4 (line 8): 10.9.1.0/24 overlaps 10.9.0.0/16"),
    ("    - {name: A, via: [l1, l2]}", "    - {name: A, via: [l1, l2]}\n    - {name: A, via: [l1, l2]}",
     "paths[1].name (line 11): path name 'A' is used twice"),
    ("via: [l1, l2]", "via: [l2, l1]", "paths[0].via[0] (line 10): link 'l2' (r1-h2) does not touch 'h1'"),
    ("via: [l1, l2]", "via: [l1]", "paths[0].via (line 10): ends at 'r1', not at the server 'h2'"),
    ("via: [l1, l2]", "via: [l1, lx]", "paths[0].via[1] (line 10): no link named 'lx'"),
    ("via: [l1, l2]}", "via: [l1, l2], family: ipv6}", "paths[0].family (line 10): 'h1' does not use ipv6"),
    ("routers: [r1]", "routers: [r1, 'r-1']", "routers[1] (line 5): 'r-1' is not allowed"),
])
def test_bad_routed_topologies(old, new, msg):
    with pytest.raises(ScenarioError) as e:
        parse_scenario(BASE.replace(old, new), "r.yaml")
    assert msg in e.value.render(), e.value.render()


def test_host_with_no_path_to_its_peer():
    text = BASE.replace("routers: [r1]", "routers: [r1, r2]").replace("between: [r1, h2]", "between: [r2, h2]")
    with pytest.raises(ScenarioError, match="the server 'h2' cannot be reached from the client 'h1'"):
        parse_scenario(text)


def test_auto_subnet_overlapping_an_override_is_a_plan_error():
    text = BASE.replace("{name: l2, between: [r1, h2], bw: 10}", "{name: l2, between: [r1, h2], bw: 10, ipv4: 10.1.1.0/25}")
    with pytest.raises(PlanError, match="overlaps"):
        plan(parse_scenario(text))


def test_two_paths_with_one_address_pair_is_a_plan_error():
    text = BASE.replace("routers: [r1]", "routers: [r1, r2]") + \
        "    - {name: B, via: [l1, l3, l4]}\n"
    text = text.replace("  paths:", "    - {name: l3, between: [r1, r2], bw: 1}\n    - {name: l4, between: [r2, h2], bw: 1}\n  paths:")
    # B ends on another server interface; the server answers each by source address
    assert len(plan(parse_scenario(text)).paths) == 2
    # two paths to ONE server address that leave router r1 by different links cannot both hold
    fork = """\
name: t
topology:
  kind: routed
  routers: [r1, r2]
  links:
    - {name: a1, between: [h1, r1], bw: 10}
    - {name: a2, between: [h1, r1], bw: 10}
    - {name: x, between: [r1, r2], bw: 1}
    - {name: y, between: [r1, r2], bw: 1}
    - {name: z, between: [r2, h2], bw: 10}
  paths:
    - {name: A, via: [a1, x, z]}
    - {name: B, via: [a2, y, z]}
"""
    with pytest.raises(PlanError, match="path 'B' and path 'A' both reach 10.1.5.2/32 but leave 'r1'"):
        plan(parse_scenario(fork))
    clash = BASE.replace("    - {name: A, via: [l1, l2]}", "    - {name: A, via: [l1, l2]}\n    - {name: B, via: [l1, l2]}")
    with pytest.raises(PlanError, match="same address pair"):
        plan(parse_scenario(clash))
    # both problems at once: a third path forks at r1 and also repeats A's address pair
    both = fork + "    - {name: C, via: [a1, x, z]}\n    - {name: D, via: [a2, y, z]}\n"
    with pytest.raises(PlanError) as e:
        plan(parse_scenario(both))
    assert len(e.value.problems) >= 3
    assert any("both reach" in p for p in e.value.problems) and any("same address pair" in p for p in e.value.problems)


def test_cli_reports_plan_errors_as_bad_input(tmp_path):
    import subprocess
    import sys
    clash = BASE.replace("    - {name: A, via: [l1, l2]}", "    - {name: A, via: [l1, l2]}\n    - {name: B, via: [l1, l2]}")
    f = tmp_path / "clash.yaml"
    f.write_text(clash)
    r = subprocess.run([sys.executable, "-m", "runners.cli", str(f), "--out", str(tmp_path / "o")], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "same address pair" in r.stderr and str(f) in r.stderr
    assert not (tmp_path / "o").exists()


def test_paths_know_their_egress_qdiscs_in_both_directions():
    p = plan(parse_scenario(TWO_FAMILIES))
    v6 = p.path("v6")
    assert v6.egress_up == (("h1", "h1-eth0"), ("r1", "r1-eth2"), ("r2", "r2-eth2"))
    assert v6.egress_down == (("h2", "h2-eth0"), ("r2", "r2-eth1"), ("r1", "r1-eth0"))
