"""Runs of `ip`/`tc` changes become one `-batch` process; each command keeps its own result."""
import os
import subprocess
from pathlib import Path

import pytest
from scenarios.spec.loader import load_scenario
from topologies.kinds import plan

from runners.linux import ipbatch
from runners.linux.nsexec import CommandError, batch_argv, run_batch, split_batch

REPO = Path(__file__).resolve().parents[2]

SETUP = [["ip", "addr", "flush", "dev", "h1-eth0"],
         ["ip", "addr", "add", "10.0.1.1/24", "dev", "h1-eth0"],
         ["ip", "link", "set", "dev", "h1-eth0", "up"],
         ["ip", "rule", "add", "from", "10.0.1.1", "table", "100", "priority", "100"],
         ["ethtool", "-K", "h1-eth0", "tso", "off", "gso", "off", "gro", "off"],
         ["ip", "-4", "addr", "flush", "dev", "r1-eth0"],
         ["ip", "-4", "route", "add", "10.0.2.0/24", "via", "10.1.1.2"],
         ["tc", "qdisc", "replace", "dev", "h1-eth0", "root", "netem", "rate", "10mbit", "delay", "15ms",
          "loss", "0.5%", "limit", "100"],
         ["ip", "mptcp", "endpoint", "show"]]


def test_runs_of_changes_with_the_same_tool_and_options_share_a_process_and_keep_their_order():
    units = ipbatch.units(SETUP)
    assert [u.argvs for u in units] == [SETUP[0:4], [SETUP[4]], SETUP[5:7], [SETUP[7]], [SETUP[8]]]
    assert [a for u in units for a in u.argvs] == SETUP
    first = units[0]
    assert first.lines == ("addr flush dev h1-eth0", "addr add 10.0.1.1/24 dev h1-eth0", "link set dev h1-eth0 up",
                           "rule add from 10.0.1.1 table 100 priority 100")
    assert first.argv("/tmp/b/0.ip") == ["ip", "-force", "-batch", "/tmp/b/0.ip"]
    assert units[2].argv("/tmp/b/2.ip") == ["ip", "-4", "-force", "-batch", "/tmp/b/2.ip"]
    assert units[2].lines == ("addr flush dev r1-eth0", "route add 10.0.2.0/24 via 10.1.1.2")
    assert units[1].argv() == SETUP[4] and units[3].argv() == SETUP[7]   # alone: runs as it is


def test_reads_options_with_values_and_words_the_line_parser_would_change_run_alone():
    alone = [["ip", "mptcp", "endpoint", "show"], ["tc", "-s", "qdisc", "show"], ["ip", "-j", "addr", "show"],
             ["ip", "-n", "ns1", "link", "set", "dev", "x", "up"], ["ip", "netns", "add", "x"],
             ["ip", "link", "set", "dev", "a b", "up"], ["ip", "link", "set", "dev", "a#b", "up"],
             ["ip", "link", "set", "dev", "a\"b", "up"], ["ip", "link", "set", "dev", "a\\", "up"],
             ["ip", "link", "set", "dev", "", "up"], ["ip", "route"], ["sysctl", "-q", "-w", "a.b=1"],
             ["tc", "-j", "qdisc", "show", "dev", "x"], ["ip", "route", "get", "10.0.0.1"]]
    for argv in alone:
        assert ipbatch.batch_key(argv) is None, argv
    doubled = [a for argv in alone for a in (argv, argv)]
    assert all(len(u.argvs) == 1 and not u.lines for u in ipbatch.units(doubled))


# what iproute2 6.1 printed for `ip -force -batch F` whose lines 2 and 3 failed (recorded in a namespace)
FAILED_2_AND_3 = ("Error: ipv4: Address already assigned.\nCommand failed /tmp/testbed-batch-x/0.ip:2\n"
                  "Error: too many addresses or duplicate one: -17.\nCommand failed /tmp/testbed-batch-x/0.ip:3\n")


def test_each_command_of_a_batch_gets_its_own_result_and_its_own_message():
    unit = ipbatch.units([["ip", "link", "set", "dev", "a0", "up"], ["ip", "addr", "add", "10.9.0.1/24", "dev", "a0"],
                          ["ip", "mptcp", "endpoint", "add", "10.9.0.1", "dev", "a0", "subflow"],
                          ["ip", "mptcp", "limits", "set", "subflows", "4"]])[0]
    assert ipbatch.spread(unit, 1, "", FAILED_2_AND_3) == [
        (0, "", ""), (1, "", "Error: ipv4: Address already assigned.\n"),
        (1, "", "Error: too many addresses or duplicate one: -17.\n"), (0, "", "")]
    assert ipbatch.spread(unit, 0, "", "") == [(0, "", "")] * 4
    # the tool never ran its file: every command failed with it
    assert ipbatch.spread(unit, -1, "", "did not run") == [(-1, "", "did not run")] * 4
    assert ipbatch.spread(unit, 127, "", "sh: 1: ip: not found\n") == [(127, "", "sh: 1: ip: not found\n")] * 4
    alone = ipbatch.units([["ip", "mptcp", "endpoint", "show"]])[0]
    assert ipbatch.spread(alone, 0, "10.9.0.1 id 1 subflow dev a0\n", "") == [(0, "10.9.0.1 id 1 subflow dev a0\n", "")]


def test_a_batch_process_passes_through_the_shell_batch_like_any_command():
    units = ipbatch.units(SETUP)
    argvs = [u.argv(f"/tmp/b/{k}.{u.tool}") for k, u in enumerate(units)]
    words = batch_argv(argvs, "@@m")
    assert words[words.index("@@m") + 1:words.index("@@m") + 6] == ["4", "ip", "-force", "-batch", "/tmp/b/0.ip"]
    out = "\n@@m 0 rc=0\n\n@@m 1 rc=0\n\n@@m 2 rc=1\n\n@@m 3 rc=0\n10.9.0.1 id 1\n@@m 4 rc=0\n"
    err = "@@m 0\n@@m 1\n@@m 2\nError: x\nCommand failed /tmp/b/2.ip:2\n@@m 3\n@@m 4\n"
    done = split_batch(argvs, "@@m", out, err)
    per_command = [r for u, d in zip(units, done) for r in ipbatch.spread(u, d.rc, d.out, d.err)]
    assert [rc for rc, _, _ in per_command] == [0, 0, 0, 0, 0, 0, 1, 0, 0]
    assert per_command[6][2] == "Error: x\n" and per_command[8][1] == "10.9.0.1 id 1"


NFT_COUNTERS = [["nft", "add", "table", "inet", "mptb"],
                ["nft", "add", "chain", "inet", "mptb", "in", "{ type filter hook input priority 0 ; policy accept ; }"],
                ["nft", "add", "rule", "inet", "mptb", "in", "ip", "saddr", "10.0.0.300", "counter", "comment", '"A"'],
                ["nft", "add", "rule", "inet", "mptb", "in", "ip", "saddr", "10.0.0.1", "counter", "comment", '"B"']]
# what nft 1.0.6 printed for `nft -f F` whose line 3 failed (recorded in a namespace, 2026-11-27)
NFT_LINE_3 = ("/tmp/testbed-batch-x/0.nft:3:32-41: Error: Could not resolve hostname: Name or service not known\n"
              'add rule inet mptb in ip saddr 10.0.0.300 counter comment "A"\n'
              "                               ^^^^^^^^^^\n")


def test_nft_changes_are_one_file_whose_lines_are_the_words_nft_would_have_joined():
    units = ipbatch.units([*NFT_COUNTERS, ["nft", "-j", "list", "table", "inet", "mptb"]])
    assert [len(u.argvs) for u in units] == [4, 1]
    assert units[0].lines[1] == "add chain inet mptb in { type filter hook input priority 0 ; policy accept ; }"
    assert units[0].lines[3] == 'add rule inet mptb in ip saddr 10.0.0.1 counter comment "B"'
    assert units[0].argv("/tmp/b/0.nft") == ["nft", "-f", "/tmp/b/0.nft"]
    assert units[1].argv() == ["nft", "-j", "list", "table", "inet", "mptb"]     # a read runs on its own
    for alone in (["nft", "-j", "add", "table", "x"], ["nft", "add", "table", "inet", "a\nadd table inet b"],
                  ["nft", "list", "ruleset"], ["nft", "add"]):
        assert ipbatch.batch_key(alone) is None, alone


def test_a_failed_nft_batch_fails_every_command_and_names_the_line_that_did():
    unit = ipbatch.units(NFT_COUNTERS)[0]
    got = ipbatch.spread(unit, 1, "", NFT_LINE_3)
    assert [rc for rc, _, _ in got] == [1, 1, 1, 1]      # all or nothing: nothing was applied
    assert got[2][2] == NFT_LINE_3
    assert all(e.startswith("not applied: `nft -f` applies its batch all or nothing, and line 3 failed")
               for _, _, e in (got[0], got[1], got[3]))
    assert ipbatch.spread(unit, 0, "", "") == [(0, "", "")] * 4
    assert ipbatch.spread(unit, 127, "", "sh: 1: nft: not found\n") == [(127, "", "sh: 1: nft: not found\n")] * 4


class _Node:
    """A namespace stand-in: runs the argument lists here, with `bin` first on PATH."""
    name = "h1"

    def __init__(self, bin_dir):
        self.env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}

    def popen(self, argv, **kw):
        return subprocess.Popen(argv, env=self.env, **kw)


def test_a_refused_nft_batch_raises_for_the_command_nft_named(tmp_path):
    # a stand-in nft that refuses line 3 of its file as nft 1.0.6 did (NFT_LINE_3)
    fake = tmp_path / "nft"
    fake.write_text("#!/bin/sh\nprintf '%s' \"$NFT_ERR\" >&2\nexit 1\n")
    fake.chmod(0o755)
    node = _Node(tmp_path)
    node.env["NFT_ERR"] = NFT_LINE_3
    with pytest.raises(CommandError) as e:
        run_batch(node, NFT_COUNTERS)
    assert "10.0.0.300" in str(e.value).split("failed")[0] and "Could not resolve hostname" in str(e.value)
    results = run_batch(node, NFT_COUNTERS, check=False)
    assert [r.rc for r in results] == [1, 1, 1, 1] and results[2].err == NFT_LINE_3


def test_a_routed_hosts_setup_with_its_shaping_is_at_most_two_ip_processes():
    """The plan's IPv6 rules (`ip -6`) stay last when the runner adds the shaped interfaces' gso lines."""
    from runners.pipeline.network import setup_per_node
    for name in ("e3-ipv6.yaml", "e3-mixed.yaml", "e1-shared-bottleneck.yaml"):
        per_node = setup_per_node(plan(load_scenario(REPO / "scenarios" / name)))
        for node, argvs in per_node.items():
            ip_units = [u for u in ipbatch.units(argvs) if u.tool == "ip"]
            assert len(ip_units) <= 2, (name, node, [len(u.argvs) for u in ip_units])
            assert all(a[1] == "-6" for u in ip_units[1:] for a in u.argvs), (name, node)


def test_every_namespace_brings_its_loopback_up_in_its_setup_batch():
    """topologies.net's hosts skip Mininet's `ifconfig lo up`: every node with a namespace (hosts, routers,
    and a routed network's extra hosts) gets it in its setup, within one of its `ip` batches."""
    from runners.pipeline.network import setup_per_node
    lo_up = ["ip", "link", "set", "dev", "lo", "up"]
    for name in ("two-paths.yaml", "e1-shared-bottleneck.yaml", "e5-exp2.yaml", "e3-ipv6.yaml"):
        p = plan(load_scenario(REPO / "scenarios" / name))
        per_node = setup_per_node(p)
        switches = {w.name for w in p.switches}
        ends = {n for a, b, *_ in p.link_ports() for n in (a, b)} - switches
        assert ends and all(lo_up in per_node[n] for n in ends), name
        assert not any(lo_up in per_node.get(w, []) for w in switches), name
