"""Switched topologies, controller decisions, several clients (pure, no root, no os-ken needed)."""
import dataclasses
import re
from pathlib import Path

import pytest
from controller.decisions import (FLOOD, Packet, STEER_COOKIE, SwitchConfig, learning_decision,
    replies_to_steer_ahead, steering_decision, switch_configs)
from scenarios.spec.loader import ScenarioError, load_experiment, parse_experiment, parse_scenario
from topologies.kinds import plan
from topologies.plan import PlanError

from runners.cli import main
from runners.collect import counters, steering
from runners.pipeline import mptcp_config, network
from runners.runset.checks import check_plans, select_variants
from runners.traffic import iperf3

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "tests" / "fixtures"

E2 = """\
name: t
topology:
  kind: switched
  server: srv
  clients: [cli]
  switches:
    - {name: s1, type: ovs, controller: true}
    - {name: s2, type: ovs, controller: true}
  controller:
    app: steering
    steer:
      uplinks: {s1: [wanA, wanB], s2: [wanA, wanB]}
      by: server-port
  links:
    - {name: access, between: [cli, s1]}
    - {name: wanA, between: [s1, s2], bw: 20, delay: 15ms}
    - {name: wanB, between: [s1, s2], bw: 20, delay: 15ms}
    - {name: dc, between: [s2, srv]}
  paths:
    - {name: main}
mptcp:
  signal_ports: [5300]
"""

E5 = """\
name: t
topology:
  kind: switched
  clients: [h2, h3]
  switches:
    - {name: s1, type: ovs-user}
  links:
    - {name: h1a, between: [h1, s1], bw: 25}
    - {name: h1b, between: [h1, s1], bw: 25}
    - {name: h1c, between: [h1, s1], bw: 25}
    - {name: h2a, between: [h2, s1], bw: 25}
    - {name: h2b, between: [h2, s1], bw: 25}
    - {name: h3a, between: [h3, s1], bw: 25}
    - {name: h3b, between: [h3, s1], bw: 25}
  paths:
    - {name: A, client_if: 0, server_if: 0}
    - {name: B, client_if: 1, server_if: 1}
    - {name: C, client_if: 0, server_if: 2}
"""


# ---------------------------------------------------------------- address plan and switches

def test_paths_are_subnets_and_a_second_path_on_an_interface_is_an_alias():
    p = plan(parse_scenario(E5))
    assert p.all_clients == ("h2", "h3") and p.hosts == ("h2", "h3", "h1")
    assert p.interface("h2-eth0").addrs == (("ipv4", "10.0.1.11", 24), ("ipv4", "10.0.3.11", 24))
    assert p.interface("h3-eth0").addrs == (("ipv4", "10.0.1.12", 24), ("ipv4", "10.0.3.12", 24))
    assert p.interface("h1-eth2").addrs == (("ipv4", "10.0.3.1", 24),)
    h3 = p.for_client("h3")
    assert [(x.name, x.client_ip, x.client_if, x.server_ip, x.server_if) for x in h3.paths] == [
        ("A", "10.0.1.12", "h3-eth0", "10.0.1.1", "h1-eth0"), ("B", "10.0.2.12", "h3-eth1", "10.0.2.1", "h1-eth1"),
        ("C", "10.0.3.12", "h3-eth0", "10.0.3.1", "h1-eth2")]
    # both addresses configured on the one interface; ARP answered per interface
    adds = [a for a in p.setup["h2"] if a[:3] == ["ip", "addr", "add"]]
    assert adds == [["ip", "addr", "add", "10.0.1.11/24", "dev", "h2-eth0"],
                    ["ip", "addr", "add", "10.0.3.11/24", "dev", "h2-eth0"],
                    ["ip", "addr", "add", "10.0.2.11/24", "dev", "h2-eth1"]]
    assert ["sysctl", "-q", "-w", "net.ipv4.conf.all.arp_ignore=1"] in p.setup["h2"]


def test_switch_ports_dpids_and_userspace_offloads():
    p = plan(parse_scenario(E5))
    (s1,) = p.switches
    assert s1.type == "ovs-user" and s1.dpid == "0000000000000001" and not s1.controller
    assert s1.ports == (("h1a", 1), ("h1b", 2), ("h1c", 3), ("h2a", 4), ("h2b", 5), ("h3a", 6), ("h3b", 7))
    assert ("s1", "s1-eth4") in p.offload_off and ("h2", "h2-eth0") in p.offload_off
    assert network.tx_offloads_off_argv("s1-eth4") == ["ethtool", "-K", "s1-eth4", "tx", "off", "tso", "off", "gso", "off"]
    assert p.links[3] == ("h2a", "h2", "h2-eth0", "s1", "s1-eth4")


def test_steering_config_knows_sides_and_uplink_ports():
    p = plan(parse_scenario(E2))
    cfg = p.controller
    assert cfg["app"] == "steering" and cfg["by"] == "server-port" and cfg["port"] == 6653
    assert cfg["switches"]["1"] == {"name": "s1", "ports": [1, 2, 3], "uplinks": [2, 3],
                                    "uplink_names": ["wanA", "wanB"], "client_side": True}
    assert cfg["switches"]["2"]["client_side"] is False and cfg["switches"]["2"]["uplinks"] == [1, 2]
    # one address pair; shaped WAN links only
    assert [(x.client_ip, x.server_ip) for x in p.paths] == [("10.0.1.11", "10.0.1.1")]
    assert {i.name for i in p.interfaces if i.shaping} == {"s1-eth2", "s1-eth3", "s2-eth1", "s2-eth2"}


def test_signal_port_endpoint_adds_a_subflow_over_the_same_address_pair():
    sc = parse_scenario(E2)
    cmds = mptcp_config.mptcp_argvs(sc, plan(sc), "main")
    assert ["ip", "mptcp", "endpoint", "add", "10.0.1.1", "dev", "srv-eth0", "signal", "port", "5300"] in cmds.server
    assert ["ip", "mptcp", "limits", "set", "subflows", "1", "add_addr_accepted", "1"] in cmds.client


def test_endpoints_none_is_one_subflow():
    sc = parse_scenario(E5 + "mptcp: {endpoints: none}\n")
    cmds = mptcp_config.mptcp_argvs(sc, plan(sc), "A")
    assert cmds.server == [["ip", "mptcp", "endpoint", "flush"],
                           ["ip", "mptcp", "limits", "set", "subflows", "0", "add_addr_accepted", "0"]]
    assert not any("add" in a for a in cmds.client[2:])


def test_server_counts_every_client_by_its_own_address():
    p = plan(parse_scenario(E5))
    rules = [a for a in counters.nft_counter_argvs(p, "h1") if a[2] == "rule"]
    assert ["nft", "add", "rule", "inet", "mptb", "in", "ip", "daddr", "10.0.3.1", "counter", "comment", '"C"'] in rules
    h3 = [a for a in counters.nft_counter_argvs(p.for_client("h3"), "h3") if a[2] == "rule"]
    assert any("10.0.3.12" in a and "10.0.3.1" in a for a in h3)


@pytest.mark.parametrize("text,msg", [
    (E5.replace("between: [h3, s1]", "between: [h3, s9]", 1), "links[5].between: unknown node 's9'"),
    (E5.replace("{name: s1, type: ovs-user}", "{name: s1, type: bridge, controller: true}"),
     "a Linux bridge speaks no OpenFlow"),
    (E5.replace("{name: s1, type: ovs-user}", "{name: s1, controller: true}"), "no controller is given"),
    (E5.replace("{name: A, client_if: 0", "{name: A, client_if: 5"), "paths[0].client_if: client 'h2' has only 2"),
    (E5.replace("{name: h3b, between: [h3, s1], bw: 25}", "{name: h3b, between: [h3, h2], bw: 25}"),
     "hosts connect to switches here"),
    (E5.replace("{name: h3b, between: [h3, s1], bw: 25}", "{name: h3b, between: [h3, s1], delay: 5ms}"),
     "links[6].bw: delay, loss and queue are shaped by netem at a rate"),
    (E5.replace("{name: C, client_if: 0, server_if: 2}", "{name: A, client_if: 0, server_if: 2}"),
     "path name 'A' is used twice"),
    (E2.replace("steer:\n", "steer:\n      server_ports: [5201]\n").replace("app: steering", "app: learning"),
     "needs app: steering"),
    (E2.replace("uplinks: {s1: [wanA, wanB], s2: [wanA, wanB]}", "uplinks: {s1: [wanA, dc], s2: [wanA, wanB]}"),
     "controller.steer.uplinks.s1[1]: link 'dc' does not touch 's1'"),
    (E2.replace("app: steering\n    steer:\n      uplinks: {s1: [wanA, wanB], s2: [wanA, wanB]}\n"
                "      by: server-port\n", "app: learning\n"), "link 'wanB' closes a layer-2 loop"),
    (E2.replace("[5300]", "[5202]"), "mptcp.signal_ports[0]: 5202 is taken by iperf3"),
    (E2.replace("app: steering", "app: '../x; rm -rf /'"), "controller.app"),
])
def test_switched_validation_errors(text, msg):
    with pytest.raises(ScenarioError) as e:
        parse_scenario(text, "bad.yaml")
    text = re.sub(r" \(line \d+\)", "", str(e.value))
    assert msg in text and "bad.yaml" in text


def test_steering_switch_that_reaches_both_ends_is_refused():
    text = E2.replace("{name: dc, between: [s2, srv]}", "{name: dc, between: [s1, srv]}")
    with pytest.raises(PlanError, match="reaches both the server and a client"):
        plan(parse_scenario(text))


def test_missing_user_app_is_bad_input_before_anything_starts(tmp_path, capsys):
    f = tmp_path / "own.yaml"
    f.write_text(E2.replace("app: steering", "app: apps/mine.py"))
    assert main(["--check", str(f)]) == 2
    assert f"topology.controller.app: no such file {tmp_path / 'apps' / 'mine.py'}" in capsys.readouterr().err
    (tmp_path / "apps").mkdir()
    (tmp_path / "apps" / "mine.py").write_text("# an os-ken app\n")
    check_plans(load_experiment(f))


# ---------------------------------------------------------------- controller decisions

S1 = SwitchConfig(dpid=1, name="s1", ports=[1, 2, 3], uplinks=[2, 3], uplink_names=["wanA", "wanB"], client_side=True)
S2 = SwitchConfig(dpid=2, name="s2", ports=[1, 2, 3], uplinks=[1, 2], uplink_names=["wanA", "wanB"], client_side=False)
CLI, SRV = "00:00:00:00:00:01", "00:00:00:00:00:02"


def tcp(in_port, src_mac, dst_mac, src, dst, sport, dport):
    return Packet(in_port=in_port, eth_src=src_mac, eth_dst=dst_mac, eth_type=0x0800, ip_src=src, ip_dst=dst,
                  ip_proto=6, tcp_src=sport, tcp_dst=dport)


@pytest.mark.parametrize("by,sport,dport,uplink", [
    ("client-port", 40001, 5201, "wanB"), ("client-port", 40000, 5201, "wanA"),
    ("server-port", 40000, 5201, "wanB"), ("server-port", 40000, 5300, "wanA")])
def test_both_directions_of_a_flow_take_the_same_uplink(by, sport, dport, uplink):
    up = steering_decision({}, S1, tcp(1, CLI, SRV, "10.0.1.11", "10.0.1.1", sport, dport), by, [])
    back = steering_decision({}, S2, tcp(3, SRV, CLI, "10.0.1.1", "10.0.1.11", dport, sport), by, [])
    assert up.steer["uplink"] == back.steer["uplink"] == uplink
    assert up.out_ports == (S1.uplinks[up.steer["uplink_index"]],)
    assert back.out_ports == (S2.uplinks[back.steer["uplink_index"]],)
    assert up.cookie == STEER_COOKIE and up.priority == 20
    assert up.match == {"in_port": 1, "eth_type": 0x0800, "ip_proto": 6, "ipv4_src": "10.0.1.11",
                        "ipv4_dst": "10.0.1.1", "tcp_src": sport, "tcp_dst": dport}
    assert up.steer["key"] == (sport if by == "client-port" else dport)


def test_down_never_goes_up_again_and_other_traffic_takes_uplink_zero():
    table: dict = {}
    arp = Packet(in_port=1, eth_src=CLI, eth_dst="ff:ff:ff:ff:ff:ff", eth_type=0x0806)
    d = steering_decision(table, S1, arp, "client-port", [])
    assert d.out_ports == (2,) and d.match is None and table == {CLI: 1}
    # a reply from an uplink: to the learned host port, never to the other uplink
    reply = Packet(in_port=3, eth_src=SRV, eth_dst=CLI, eth_type=0x0806)
    assert steering_decision(table, S1, reply, "client-port", []).out_ports == (1,)
    assert SRV not in table  # MACs behind uplinks are not learned
    unknown = Packet(in_port=3, eth_src=SRV, eth_dst="00:00:00:00:00:09", eth_type=0x0800)
    assert steering_decision(table, S1, unknown, "client-port", []).out_ports == (1,)


def test_only_listed_server_ports_are_steered():
    pkt = tcp(1, CLI, SRV, "10.0.1.11", "10.0.1.1", 40001, 22)
    d = steering_decision({}, S1, pkt, "client-port", [5201])
    assert d.steer is None and d.out_ports == (2,)
    assert steering_decision({}, S1, tcp(1, CLI, SRV, "a", "b", 40001, 5201), "client-port", [5201]).steer


def test_learning_switch():
    table: dict = {}
    s = SwitchConfig(dpid=1, name="s1", ports=[1, 2])
    first = learning_decision(table, s, Packet(1, CLI, SRV, 0x0800))
    assert first.out_ports == (FLOOD,)
    back = learning_decision(table, s, Packet(2, SRV, CLI, 0x0800))
    assert back.out_ports == (1,) and back.match == {"in_port": 2, "eth_dst": CLI, "eth_src": SRV}


def test_switch_configs_from_the_runner_json():
    cfg = plan(parse_scenario(E2)).controller
    sw = switch_configs(cfg)
    assert sw[1].downlinks == [1] and sw[2].downlinks == [3] and sw[2].client_side is False


# ---------------------------------------------------------------- parsers and aggregation

def test_parse_ofctl_flows():
    flows = steering.parse_ofctl_flows((FIX / "ofctl-flows-steered.txt").read_text())
    assert len(flows) == 4
    assert flows[1] == {"cookie": 0x5354, "n_packets": 1047, "n_bytes": 2179570, "priority": 20, "in_port": 3,
                        "src": "10.0.1.1", "dst": "10.0.1.11", "tp_src": 5300, "tp_dst": 42905, "outputs": [1]}
    assert steering.parse_ofctl_flows("OFPST_FLOW reply (OF1.3) (xid=0x2):\n") == []


def test_aggregate_clients():
    def rep(mbps, rtx):
        return {"throughput_mbps": mbps, "sender_throughput_mbps": mbps, "bytes_received": int(mbps * 1e6),
                "bytes_sent": int(mbps * 1e6), "seconds": 10.0, "retransmits": rtx, "sender_mean_rtt_ms": 2.0,
                "intervals": [{"start": 0, "end": 1, "mbps": mbps, "retransmits": rtx}], "connected": []}
    agg = iperf3.aggregate_clients({"h2": rep(10.0, 1), "h3": rep(30.0, 2)})
    assert agg["throughput_mbps"] == 40.0 and agg["throughput_per_client_mbps"] == 20.0
    assert agg["retransmits"] == 3 and agg["intervals"][0]["mbps"] == 40.0
    assert agg["clients"]["h3"]["throughput_mbps"] == 30.0
    assert "clients_start_spread_s" not in agg and "started_after_s" not in agg["clients"]["h3"]


def test_each_clients_exit_is_timed_when_it_happens_not_when_the_runner_gets_to_it():
    """The runner samples `ss` and waits on the first client while the others run: a client that exited
    meanwhile must still be placed at its own exit (the reaper started with the clients)."""
    import subprocess
    import sys
    import time

    from runners.traffic.base import Reaper, TrafficTool

    class Host:
        scenario = None

        def check_control_plane(self, when):
            pass
    t0 = time.monotonic()
    procs = {tag: subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({d}); print('{tag}')"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for tag, d in (("h2", 0.2), ("h3", 0.9))}
    reaper = Reaper(procs)
    time.sleep(1.5)    # the runner busy elsewhere until both have exited
    got = TrafficTool(Host()).wait_clients(reaper, time.monotonic() + 30, "r001", {"h2": "h2", "h3": "h3"})
    assert got["h2"][0].strip() == b"h2" and got["h3"][0].strip() == b"h3"
    assert got["h2"][2] - t0 < 1.2 and got["h3"][2] - got["h2"][2] > 0.4, (got["h2"][2] - t0, got["h3"][2] - t0)


def test_aggregate_clients_counts_bytes_over_the_span_the_clients_covered():
    """The failed CI run of 2026-11-27 (raw/r001-tcp-A of e5-exp2): h5's SYN was retransmitted, so its
    4 s began about 1 s after h2's; each average was right for its own window, their sum (30.6 Mbit/s)
    was more than the one 25 Mbit/s link carries."""
    def rep(nbytes, seconds):
        return {"throughput_mbps": nbytes * 8 / seconds / 1e6, "sender_throughput_mbps": None,
                "bytes_received": nbytes, "bytes_sent": nbytes, "seconds": seconds, "retransmits": 0,
                "sender_mean_rtt_ms": None, "intervals": [], "connected": []}
    reports = {"h2": rep(4501832, 4.059413), "h3": rep(3625792, 4.071497), "h4": rep(2157520, 4.047231),
               "h5": rep(5205560, 4.033048)}
    summed = iperf3.aggregate_clients(reports)
    assert round(summed["throughput_mbps"], 2) == 30.59    # what the run reported
    ends = {"h2": 100.0, "h3": 100.02, "h4": 100.5, "h5": 101.0}
    agg = iperf3.aggregate_clients(reports, ends)
    span = 101.0 - (100.0 - 4.059413)
    assert agg["seconds"] == span
    assert agg["throughput_mbps"] == (4501832 + 3625792 + 2157520 + 5205560) * 8 / span / 1e6
    assert agg["throughput_mbps"] < 1.05 * 25 * 1448 / 1514   # the integration test allows 1.10x
    assert agg["clients_start_spread_s"] == (101.0 - 4.033048) - (100.0 - 4.059413)
    assert agg["clients"]["h2"]["started_after_s"] == 0.0
    assert agg["clients"]["h5"]["started_after_s"] == agg["clients_start_spread_s"]
    # each client's own average, and their mean, stay what iperf3 measured
    assert agg["clients"]["h5"]["throughput_mbps"] == reports["h5"]["throughput_mbps"]
    assert agg["throughput_per_client_mbps"] == summed["throughput_per_client_mbps"]


def test_the_span_covers_each_clients_own_seconds_whatever_the_clocks_rounding():
    """CI, 2026-11-28: one client alone defined the span, and the span read 4.336015999999972 s where its
    own seconds were 4.336016; `seconds` must never be shorter than a client's."""
    def rep(seconds):
        return {"throughput_mbps": 10.0, "sender_throughput_mbps": None, "bytes_received": 5_000_000,
                "bytes_sent": 5_000_000, "seconds": seconds, "retransmits": 0, "sender_mean_rtt_ms": None,
                "intervals": [], "connected": []}
    end = 1234.567891
    assert end - (end - 4.336016) < 4.336016        # the rounding this test is about
    agg = iperf3.aggregate_clients({"h2": rep(4.336016), "h3": rep(4.2)}, {"h2": end, "h3": end - 0.1})
    assert agg["seconds"] >= max(c["seconds"] for c in agg["clients"].values())
    assert agg["seconds"] == 4.336016


# ---------------------------------------------------------------- sweeps over sizes, optional variants

def test_size_range_and_optional_variants():
    exp = load_experiment(REPO / "scenarios" / "e2-mptcp-paths.yaml")
    sizes = [p.params["traffic.bytes"] for p in exp.points if p.params["variant"] == "steer-by-server-port"]
    assert sizes[:2] == ["256KiB", "512KiB"] and sizes[-1] == "10240KiB" and len(sizes) == 40
    assert exp.points[1].scenario.traffic.bytes == 512 * 1024
    default = select_variants(exp, None)
    assert {p.params["variant"] for p in default.points} == {"steer-by-server-port"}
    lisp = select_variants(exp, ["lisp-client-port"])
    assert {p.scenario.topology.controller.steer.by for p in lisp.points} == {"client-port"}
    with pytest.raises(ScenarioError, match="--variant nope: no such variant"):
        select_variants(exp, ["nope"])


def test_bad_range_is_a_clear_error():
    text = E2 + "sweep:\n  traffic.bytes: {from: 256, step: 256, unit: KiB}\n"
    with pytest.raises(ScenarioError, match="sweep.traffic.bytes"):
        parse_experiment(text, "bad.yaml")


@pytest.mark.parametrize("name", ["e2-tcp", "e2-mptcp-one", "e2-mptcp-paths", "e5-exp1", "e5-exp2", "e5-exp3"])
def test_shipped_switched_scenarios_plan(name):
    exp = load_experiment(REPO / "scenarios" / f"{name}.yaml")
    check_plans(exp)


def test_a_syn_gets_its_replys_flow_installed_ahead_where_the_server_is_attached():
    """Lab 5 lost a join at random (issue 28): the server's ADD_ADDR, a pure ACK sent while the SYN-ACK's
    flow was being installed, went through the controller while the next data segment took the new flow
    and overtook it; the client's TCP dropped the ADD_ADDR as an old segment. The reply's flow is now
    installed on the server's switch when the SYN is decided, before the SYN goes on."""
    switches = {1: S1, 2: S2}
    tables = {1: {CLI: 1}, 2: {SRV: 3}}
    syn = dataclasses.replace(tcp(1, CLI, SRV, "10.0.1.11", "10.0.1.1", 40000, 5300), syn=True)
    ahead = replies_to_steer_ahead(tables, switches, 1, syn)
    assert [dpid for dpid, _ in ahead] == [2]
    dpid, reply = ahead[0]
    assert reply == tcp(3, SRV, CLI, "10.0.1.1", "10.0.1.11", 5300, 40000)
    forward = steering_decision(tables[1], S1, syn, "server-port", [])
    back = steering_decision(tables[2], S2, reply, "server-port", [])
    assert back.steer["uplink"] == forward.steer["uplink"] == "wanA"
    assert back.match == {"in_port": 3, "eth_type": 0x0800, "ip_proto": 6, "ipv4_src": "10.0.1.1",
                          "ipv4_dst": "10.0.1.11", "tcp_src": 5300, "tcp_dst": 40000}
    # only a connection's opening SYN, and only where the destination was learned on a host port
    assert replies_to_steer_ahead(tables, switches, 1, dataclasses.replace(syn, syn=False)) == []
    assert replies_to_steer_ahead({1: {CLI: 1}, 2: {}}, switches, 1, syn) == []
    assert replies_to_steer_ahead({1: {CLI: 1}, 2: {SRV: S2.uplinks[0]}}, switches, 1, syn) == []


def test_the_controller_starts_without_eventlets_green_dns_and_with_the_standard_librarys_distutils():
    """Both cut os-ken's import in a TCG guest (4 s and 9 s of 25-31 s); 3.12 has no distutils of its own."""
    from runners.pipeline.controlplane import launch_env
    env = launch_env({"PATH": "/bin"}, (3, 11))
    assert env["SETUPTOOLS_USE_DISTUTILS"] == "stdlib" and env["PYTHONPATH"].startswith(str(REPO))
    assert "SETUPTOOLS_USE_DISTUTILS" not in launch_env({"PATH": "/bin"}, (3, 13))
    assert launch_env({"SETUPTOOLS_USE_DISTUTILS": "local"}, (3, 11))["SETUPTOOLS_USE_DISTUTILS"] == "local"
    assert env["EVENTLET_NO_GREENDNS"] == "yes"      # a controller on 127.0.0.1 resolves no names


def test_a_distributions_open_vswitch_without_its_socket_is_not_running_and_no_process_asks(monkeypatch, tmp_path):
    """ovs-vsctl took 2.2 s to give up in a TCG guest; without ovsdb-server's socket the answer is known."""
    from types import SimpleNamespace

    from runners.pipeline import controlplane

    asked = []
    monkeypatch.setattr(controlplane, "_run", lambda argv, timeout=30: asked.append(argv) or
                        SimpleNamespace(returncode=0))
    monkeypatch.setattr(controlplane.shutil, "which", lambda name: "/usr/bin/ovs-vsctl")
    monkeypatch.setattr(controlplane.os.path, "realpath", lambda p: p)
    monkeypatch.setenv("OVS_RUNDIR", str(tmp_path))
    assert controlplane.ovs_running() is False and asked == []
    (tmp_path / "db.sock").touch()                       # a socket: ovs-vsctl says whether it answers
    assert controlplane.ovs_running() is True and asked == [["ovs-vsctl", "--timeout=5", "show"]]
    (tmp_path / "db.sock").unlink()
    monkeypatch.setattr(controlplane.shutil, "which", lambda name: "/usr/local/bin/ovs-vsctl")
    assert controlplane.ovs_running() is True and len(asked) == 2     # a build of one's own: it is asked


def test_a_stopped_system_open_vswitchs_ports_in_the_kernel_send_the_start_to_ovs_ctl(tmp_path):
    """A fresh database would make ovs-vswitchd take a stopped service's ports out of the datapath."""
    from runners.pipeline.controlplane import system_bridges_in_kernel
    net = tmp_path / "net"
    for name in ("lo", "eth0", "ovs-system", "br0"):
        (net / name).mkdir(parents=True)
    (net / "eth0" / "master").symlink_to("../../devices/virtual/net/br-lan")
    assert not system_bridges_in_kernel(net)
    (net / "br0" / "master").symlink_to("../../devices/virtual/net/ovs-system")
    assert system_bridges_in_kernel(net)


def test_open_vswitchs_own_daemons_leave_their_logs_with_the_results_and_their_folder_goes(tmp_path):
    from runners.pipeline.controlplane import OvsDaemons
    own = tmp_path / "testbed-ovs-x"
    own.mkdir()
    for name in ("ovs-vswitchd", "ovsdb-server"):
        (own / f"{name}.log").write_text(f"{name}|ERR|something\n")
        (own / f"{name}.pid").write_text("999999999\n")        # gone already: nothing to signal
    ovs = OvsDaemons(log=lambda line: None, logs_to=tmp_path / "results" / "openvswitch")
    ovs.own_dir, ovs.started = own, True
    ovs.stop()
    assert not own.exists() and ovs.own_dir is None and not ovs.started
    assert sorted(p.name for p in (tmp_path / "results" / "openvswitch").iterdir()) == \
        ["ovs-vswitchd.log", "ovsdb-server.log"]


def test_an_ovs_daemon_is_asked_to_exit_over_its_control_socket_as_ovs_appctl_does(tmp_path):
    """A signal can be blocked (one started during the cleanup inherits the runner's mask); `exit` is not."""
    import json
    import socket
    import threading

    from runners.pipeline.controlplane import unixctl_exit
    path, got = str(tmp_path / "ovs-vswitchd.4242.ctl"), []
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)

    def daemon():
        conn, _ = listener.accept()
        with conn:
            got.append(json.loads(conn.recv(4096)))
            conn.sendall(b'{"id":0,"result":null,"error":null}')
    t = threading.Thread(target=daemon, daemon=True)
    t.start()
    assert unixctl_exit(path)
    t.join(5)
    assert got == [{"method": "exit", "params": [], "id": 0}]
    listener.close()
    assert not unixctl_exit(str(tmp_path / "gone.ctl"))


def test_the_bridges_leave_ovs_before_their_links_and_in_one_ovs_vsctl(monkeypatch, tmp_path):
    """ovs-vswitchd tried to open each deleted port again, one after another (about 0.2 s each in a TCG
    guest), when the veth pairs went before the bridges: 3 s of a 16-client teardown (2026-11-28)."""
    from runners.pipeline import controlplane
    asked = []
    monkeypatch.setattr(controlplane, "_run", lambda argv, timeout=30: asked.append(argv) or
                        type("R", (), {"returncode": 0, "stdout": "", "stderr": ""})())
    ovs = controlplane.OvsDaemons(log=lambda line: None)
    ovs.delete_bridges(["s1", "s2"])
    assert asked == []                   # this run used no OVS: nothing to ask
    ovs.used = True
    ovs.delete_bridges(["s1", "s2"])
    assert asked == [["ovs-vsctl", "--timeout=10", "--", "--if-exists", "del-br", "s1", "--", "--if-exists",
                      "del-br", "s2"]]
    order = []
    net = network.Network(tmp_path / "controller", tmp_path, log=lambda line: None)
    net.mininet, net._ovs_bridges = object(), ["s1", "s2"]
    monkeypatch.setattr(net.ovs, "revive_for_teardown", lambda: None)
    monkeypatch.setattr(net.ovs, "delete_bridges", lambda names: order.append(("bridges", names)))
    monkeypatch.setattr(net.ovs, "stop", lambda: order.append(("ovs", None)))
    monkeypatch.setattr(net, "_delete_links", lambda: order.append(("links", None)))
    monkeypatch.setattr(network, "stop_network", lambda mn: order.append(("mininet", None)))
    net.stop()
    assert order == [("bridges", ["s1", "s2"]), ("links", None), ("mininet", None), ("ovs", None)]
