"""Topology plan and command builders: pure, no root."""
import pytest
from scenarios.spec.loader import parse_scenario
from topologies.kinds import plan
from topologies.plan import netem_limit, shaping_argvs

from runners.collect import pings
from runners.pipeline import mptcp_config, network
from runners.traffic import base, iperf3

BASE = """\
name: t
topology:
  kind: dual-homed
  paths:
    - {name: A, bw: 10, delay: 250ms, loss: 0.5, queue: 100}
    - {name: B, bw: 10, delay: 15ms, queue: 50}
    - {name: C, bw: 700kbit}
"""


def sc(extra=""):
    return parse_scenario(BASE + extra)


def test_address_plan_is_deterministic():
    p = plan(sc())
    assert [(x.name, x.client_if, x.server_if, x.client_ip, x.server_ip) for x in p.paths] == [
        ("A", "h1-eth0", "h2-eth0", "10.0.1.1", "10.0.1.2"),
        ("B", "h1-eth1", "h2-eth1", "10.0.2.1", "10.0.2.2"),
        ("C", "h1-eth2", "h2-eth2", "10.0.3.1", "10.0.3.2"),
    ]
    assert plan(sc()).to_dict() == p.to_dict()


def test_netem_limit_adds_the_delay_line():
    s = sc()
    # 10 Mbit/s * 250 ms / 12000 bit = 208.3 packets in flight on the delay line
    assert netem_limit(s.topology.paths[0]) == 100 + 209
    assert netem_limit(s.topology.paths[1]) == 50 + 13
    assert netem_limit(s.topology.paths[2]) == 100


def test_netem_argv_per_path():
    p = plan(sc())
    assert shaping_argvs("h1-eth0", p.paths[0].shaping) == [[
        "tc", "qdisc", "replace", "dev", "h1-eth0", "root", "netem",
        "rate", "10000kbit", "delay", "250ms", "loss", "0.5%", "limit", "309"]]
    # no delay or loss keyword when they are zero
    assert shaping_argvs("h1-eth2", p.paths[2].shaping)[0][6:] == ["netem", "rate", "700kbit", "limit", "100"]
    # every interface of the plan carries the shaping of its path, both ends
    assert [i.shaping for i in p.interfaces if i.link == "A"] == [p.paths[0].shaping] * 2


def test_client_gets_source_routing_server_does_not():
    setup = plan(sc()).setup
    assert ["ip", "rule", "add", "from", "10.0.2.1", "table", "101", "priority", "101"] in setup["h1"]
    assert ["ip", "route", "add", "default", "dev", "h1-eth1", "table", "101"] in setup["h1"]
    assert not any(a[:2] == ["ip", "rule"] for a in setup["h2"])
    assert ["ip", "addr", "add", "10.0.3.2/24", "dev", "h2-eth2"] in setup["h2"]


def test_signal_endpoints_on_the_server_for_non_primary_paths():
    s = sc("mptcp: {primary: B}\n")
    cmds = mptcp_config.mptcp_argvs(s, plan(s), "B")
    assert ["ip", "mptcp", "limits", "set", "subflows", "2", "add_addr_accepted", "2"] in cmds.client
    eps = [a for a in cmds.server if a[:4] == ["ip", "mptcp", "endpoint", "add"]]
    assert eps == [["ip", "mptcp", "endpoint", "add", "10.0.1.2", "dev", "h2-eth0", "signal"],
                   ["ip", "mptcp", "endpoint", "add", "10.0.3.2", "dev", "h2-eth2", "signal"]]
    assert not any(a[:4] == ["ip", "mptcp", "endpoint", "add"] for a in cmds.client)


def test_subflow_endpoints_and_backup_flags():
    s = sc("mptcp: {endpoints: subflow, backup: [C], limits: {subflows: 4}}\n")
    cmds = mptcp_config.mptcp_argvs(s, plan(s), "A")
    # no server announcements in subflow mode, so no ADD_ADDR to accept
    assert ["ip", "mptcp", "limits", "set", "subflows", "4", "add_addr_accepted", "0"] in cmds.client
    assert ["ip", "mptcp", "endpoint", "add", "10.0.2.1", "dev", "h1-eth1", "subflow"] in cmds.client
    assert ["ip", "mptcp", "endpoint", "add", "10.0.3.1", "dev", "h1-eth2", "subflow", "backup"] in cmds.client
    assert ["ip", "mptcp", "endpoint", "add", "10.0.3.2", "dev", "h2-eth2", "backup"] in cmds.server


def test_iperf_commands_mptcpize_and_native():
    s = sc("traffic: {duration: 7, direction: download, interval: 0.5}\n")
    old = iperf3.Iperf(native_mptcp=False)
    new = iperf3.Iperf(native_mptcp=True)
    assert iperf3.iperf_server_argv(old, 5201, True) == ["mptcpize", "run", "iperf3", "-s", "-1", "-J", "-p", "5201"]
    assert iperf3.iperf_server_argv(new, 5201, True) == ["iperf3", "--mptcp", "-s", "-1", "-J", "-p", "5201"]
    assert iperf3.iperf_server_argv(old, 5201, False) == ["iperf3", "-s", "-1", "-J", "-p", "5201"]
    argv = iperf3.iperf_client_argv(old, s, "10.0.1.2", "10.0.1.1", 5201, True)
    assert argv[:2] == ["mptcpize", "run"]
    assert argv[2:9] == ["iperf3", "-c", "10.0.1.2", "-B", "10.0.1.1", "-p", "5201"]
    assert "-R" in argv and argv[argv.index("-t") + 1] == "7" and argv[argv.index("-i") + 1] == "0.5"


def test_iperf_fixed_size_transfer_sends_extra_and_the_receiver_reports_finely():
    s = sc("traffic: {bytes: 10MB}\n")
    argv = iperf3.iperf_client_argv(iperf3.Iperf(), s, "10.0.1.2", "10.0.1.1", 5201, False)
    # iperf3 ends at the last write: the extra covers what is still in the send buffer then
    assert argv[argv.index("-n") + 1] == str(10_000_000 + (1 << 20)) and "-t" not in argv
    assert argv[argv.index("-i") + 1] == "1"                        # the client only sends (upload)
    assert iperf3.iperf_server_argv(iperf3.Iperf(), 5201, False, s)[-2:] == ["-i", "0.1"]
    big = sc("traffic: {bytes: 10MB}\nsockets: {send: [4KiB, 4MiB, 8MiB]}\n")
    assert base.fixed_size_extra(big) == 6 << 20                       # 1.5x a 4 MiB initial send buffer
    down = sc("traffic: {bytes: 10MB, direction: download}\n")
    argv = iperf3.iperf_client_argv(iperf3.Iperf(), down, "10.0.1.2", "10.0.1.1", 5201, False)
    assert argv[argv.index("-i") + 1] == "0.1"                      # the client receives
    assert "-i" not in iperf3.iperf_server_argv(iperf3.Iperf(), 5201, False, down)
    timed = sc("traffic: {duration: 5}\n")
    assert "-i" not in iperf3.iperf_server_argv(iperf3.Iperf(), 5201, False, timed)


def test_sysctls_stay_in_namespaces_and_scheduler_only_when_asked():
    keys = dict(mptcp_config.sysctls(sc(), scheduler_available=False))
    assert keys["net.mptcp.enabled"] == "1" and keys["net.ipv4.tcp_congestion_control"] == "cubic"
    assert "net.mptcp.scheduler" not in keys
    assert dict(mptcp_config.sysctls(sc(), scheduler_available=True))["net.mptcp.scheduler"] == "default"


def test_socket_buffers_become_namespace_sysctls_and_defaults_come_back():
    s = sc("sockets: {send: [4KiB, 4MiB, 16MiB]}\n")
    keys = dict(mptcp_config.sysctls(s, False, {"net.ipv4.tcp_wmem": "4096 16384 4194304",
                                     "net.ipv4.tcp_rmem": "4096 131072 6291456"}))
    assert keys["net.ipv4.tcp_wmem"] == "4096 4194304 16777216"
    assert keys["net.ipv4.tcp_rmem"] == "4096 131072 6291456"      # unset: the namespace's own value again
    assert "net.ipv4.tcp_wmem" not in dict(mptcp_config.sysctls(sc(), False))


def test_add_addr_timeout_is_set_in_whole_seconds_and_put_back_for_points_without_it():
    keys = dict(mptcp_config.sysctls(sc("mptcp: {add_addr_timeout: 2s}\n"), False))
    assert keys["net.mptcp.add_addr_timeout"] == "2"
    assert "net.mptcp.add_addr_timeout" not in dict(mptcp_config.sysctls(sc(), False))     # the kernel's own
    # the same network, a later point without it: the kernel's default comes back
    assert dict(mptcp_config.sysctls(sc(), False, set_before={"net.mptcp.add_addr_timeout"}))[
        "net.mptcp.add_addr_timeout"] == "120"


@pytest.mark.parametrize("value", ["500ms", "1.5s", "0s", "7200s"])
def test_add_addr_timeout_must_be_whole_seconds(value):
    from scenarios.spec.loader import ScenarioError
    with pytest.raises(ScenarioError, match="mptcp.add_addr_timeout") as e:
        sc(f"mptcp: {{add_addr_timeout: {value}}}\n")
    assert "whole seconds between 1s and 3600s" in e.value.render()


@pytest.mark.parametrize("value, msg", [
    ("[4KiB, 4MiB]", "at least 3"),
    ("[8MiB, 4MiB, 16MiB]", "min <= initial <= max"),
    ("[4KiB, 4MiB, 2GiB]", "at most 1GiB"),
    ("[4KiB, lots, 16MiB]", "sockets.send"),
])
def test_bad_socket_buffers_are_named(value, msg):
    from scenarios.spec.loader import ScenarioError
    with pytest.raises(ScenarioError, match=msg) as e:
        sc(f"sockets: {{send: {value}}}\n")
    assert "sockets.send" in str(e.value)


def test_switched_pings_warm_up_then_measure_with_addresses_kept_out_of_the_script(tmp_path, monkeypatch):
    import subprocess
    fake = tmp_path / "ping"
    fake.write_text('#!/bin/sh\nprintf "[%s]" "$@"; echo\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    hostile = "10.0.0.1; touch " + str(tmp_path / "pwned")
    out = subprocess.run(pings.ping_after_one_echo_argv(hostile, "10.0.1.2"), capture_output=True,
                         text=True).stdout
    # the warm-up's output is discarded; the measured ping got the address as one word
    assert out.strip() == f"[-n][-c][5][-i][0.02][-W][3][-I][{hostile}][10.0.1.2]"
    assert not (tmp_path / "pwned").exists()


def test_pings_are_argument_lists_with_each_address_one_word():
    hostile = "10.0.0.1; touch /tmp/pwned"
    assert pings.measured_request(hostile, "10.0.1.2").argv == ["ping", "-n", "-c", "5", "-i", "0.02", "-W", "3", "-I",
                                                       hostile, "10.0.1.2"]
    # the warm-up: echoes 0.2 s apart until one is answered, for at most 10 s
    assert pings.warm_up_request(hostile, "10.0.1.2").argv == ["ping", "-n", "-q", "-c", "1", "-w", "10", "-i",
                                                               "0.2", "-I", hostile, "10.0.1.2"]


def test_every_shaped_interface_hands_netem_one_segment_per_packet():
    """netem drops and queues whole packets: TCP's GSO packets (2+ segments even with `gso off`) turned a
    5 % loss into bursts and a 100-packet queue into more; each shaped end gets gso_max_segs 1."""
    from runners.pipeline.network import setup_per_node
    p = plan(sc())
    per_node = setup_per_node(p)
    shaped = [(i.node, i.name) for i in p.interfaces if i.shaping is not None]
    assert shaped
    for node, ifname in shaped:
        argvs = per_node[node]
        assert ["ip", "link", "set", "dev", ifname, "gso_max_segs", "1"] in argvs
        assert network.segmentation_offloads_off_argv(ifname) in argvs


def test_every_link_end_has_its_own_fixed_locally_administered_mac():
    """The builder sets these as it makes each veth pair (no shell round trips), and the export's script
    sets the same: captures and neighbour tables read the same in every run."""
    from topologies.plan import link_mac
    p = plan(sc())
    macs = p.link_macs()
    assert len(macs) == len(p.links)
    flat = [m for pair in macs for m in pair]
    assert len(set(flat)) == len(flat)
    assert macs[0] == ("02:00:00:00:01:01", "02:00:00:00:01:02")
    assert link_mac(258, 2) == "02:00:00:01:02:02"
    for m in flat:
        first = int(m.split(":")[0], 16)
        assert first & 0b10 and not first & 0b01    # locally administered, unicast
    for bad in ((0, 1), (1, 3), (1 << 16, 1)):
        with pytest.raises(ValueError):
            link_mac(*bad)
