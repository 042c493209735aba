"""Commands a batch carries out in the runner's own process, in the node's namespace: `sysctl -q -w`,
`ethtool -K`, `ip` link and address changes, `nft -f`. The kernel side is tried against the programs in
tests/integration/test_inprocess_changes.py; here, what is parsed, what is refused, and how the results
reach each command, with the kernel calls stood in for."""
import struct
import subprocess

import pytest

from runners.linux import ethtool, ipbatch, ipchanges, nftlib, nsexec
from runners.linux.nsspawn import SpawnerGone


class SpawnerNode:
    """A host with a spawner: functions run by `call` (here, in this thread). Of the processes, only
    `echo` really starts: any other is recorded and stood in for by `false`, so that no test changes
    this machine's own network."""
    name = "h1"

    def __init__(self, gone: bool = False):
        self.started, self.called, self.gone = [], 0, gone
        self.spawners = self

    def call(self, node, fn):
        assert node is self
        if self.gone:
            raise SpawnerGone("gone")
        self.called += 1
        return fn()

    def popen(self, argv, **kw):
        self.started.append(argv)
        return subprocess.Popen(argv if argv[0] == "echo" else ["false"], **kw)


@pytest.fixture
def kernel(monkeypatch):
    """The kernel calls recorded instead of made."""
    calls = []
    monkeypatch.setattr(nsexec, "_write_sysctls", lambda pairs: (calls.append(("sysctl", pairs)), (None, 1))[1])
    monkeypatch.setattr(ethtool, "set_features", lambda i, w: (calls.append(("ethtool", i, w)), (0, ""))[1])
    monkeypatch.setattr(ipchanges, "apply", lambda c, f: (calls.append(("ip", [x.kind for x in c], f)), (0, "", ""))[1])
    monkeypatch.setattr(nftlib, "available", lambda: True)
    monkeypatch.setattr(nftlib, "run_file", lambda path: (calls.append(("nft", open(path).read())), (0, "", ""))[1])
    return calls


def test_a_hosts_setup_starts_only_the_commands_that_cannot_be_done_in_process(kernel):
    node = SpawnerNode()
    res = nsexec.run_batch(node, [
        ["sysctl", "-q", "-w", "net.ipv4.conf.all.arp_ignore=1"],
        ["ip", "addr", "add", "10.0.1.1/24", "dev", "h1-eth0"], ["ip", "link", "set", "dev", "h1-eth0", "up"],
        ["ethtool", "-K", "h1-eth0", "tso", "off", "gso", "off"],
        ["nft", "add", "table", "inet", "t"], ["nft", "add", "chain", "inet", "t", "c"],
        ["echo", "a process"]])
    assert [r.rc for r in res] == [0] * 7 and res[-1].out == "a process\n"
    assert node.started == [["echo", "a process"]]   # no shell around them, no ip, ethtool or nft program
    assert [c[0] for c in kernel] == ["sysctl", "ip", "ethtool", "nft"]   # in the batch's order
    assert kernel[0][1] == [("net.ipv4.conf.all.arp_ignore", "1")]
    assert kernel[1][1] == ["addr add", "up"] and kernel[1][2].endswith(".ip")
    assert kernel[2][1:] == ("h1-eth0", [("tso", 0), ("gso", 0)])
    assert kernel[3][1] == "add table inet t\nadd chain inet t c\n"
    assert node.called == 4


def test_a_change_the_process_cannot_do_starts_its_program(kernel):
    node = SpawnerNode()
    nsexec.run_batch(node, [["ip", "route", "add", "default", "dev", "h1-eth0", "table", "5"],
                            ["ip", "link", "set", "dev", "h1-eth0", "up"],
                            ["ethtool", "-K", "h1-eth0", "rx-gro-hw", "off"]], check=False)
    assert [argv[0] for argv in node.started] == ["ip", "ethtool"]   # the route sends its whole batch to `ip`
    assert node.started[0][:3] == ["ip", "-force", "-batch"] and kernel == []


def test_a_gone_spawner_falls_back_to_the_program(kernel, tmp_path):
    node = SpawnerNode(gone=True)
    res = nsexec.run_batch(node, [["ethtool", "-K", "no-such-if0", "gso", "off"]], check=False)
    assert node.started == [["ethtool", "-K", "no-such-if0", "gso", "off"]] and kernel == []
    assert res[0].rc != 0


def test_a_refused_change_is_raised_with_its_own_command(monkeypatch):
    monkeypatch.setattr(ethtool, "set_features", lambda i, w: (1, f"Could not change tx-checksum-ipv4 of {i}\n"))
    with pytest.raises(nsexec.CommandError, match="ethtool -K s1-eth1 tx off.*Could not change"):
        nsexec.run_batch(SpawnerNode(), [["ethtool", "-K", "s1-eth1", "tx", "off"]])


@pytest.mark.parametrize("argv", [
    ["ethtool", "-K", "h1-eth0", "tso", "off", "gso", "off", "gro", "off"],
    ["ethtool", "-K", "s1-eth1", "tx", "off", "tso", "on"],
])
def test_ethtool_feature_changes_parse(argv):
    ifname, wanted = ethtool.parse_features(argv)
    assert ifname == argv[2] and [f for f, _ in wanted] == argv[3::2]


@pytest.mark.parametrize("argv", [
    ["ethtool", "-k", "h1-eth0"],                              # a read
    ["ethtool", "-K", "h1-eth0", "tso"],                       # no state
    ["ethtool", "-K", "h1-eth0", "tso", "maybe"],
    ["ethtool", "-K", "h1-eth0", "rx-gro-hw", "off"],          # a kernel name: the program knows it
    ["ethtool", "-K", "a-name-far-too-long", "tso", "off"],
    ["ethtool", "-K", "../x", "tso", "off"],
    ["ethtool", "--features", "h1-eth0", "tso", "off"],
])
def test_other_ethtool_commands_run_the_program(argv):
    assert ethtool.parse_features(argv) is None


def test_ip_changes_parse_from_the_forms_the_testbed_writes():
    lines = ("addr flush dev h1-eth0 scope global", "addr flush dev h1-eth0", "addr add 10.0.1.1/24 dev h1-eth0",
             "addr replace fd00::1/64 dev h1-eth0 nodad", "link set dev lo up", "link set dev h1-eth0 down",
             "link set dev h1-eth0 gso_max_segs 1")
    changes = ipchanges.parse_lines((), lines)
    assert [c.kind for c in changes] == ["flush", "flush", "addr add", "addr replace", "up", "down", "gso_max_segs"]
    assert changes[0].global_only and not changes[1].global_only and changes[3].nodad and changes[6].value == "1"
    assert ipchanges.parse_lines(("-6",), ("addr add fd00::1/64 dev h1-eth0 nodad",))[0].value == "fd00::1/64"


@pytest.mark.parametrize("options,line", [
    ((), "route add default dev h1-eth0 table 5"),
    ((), "rule add from 10.0.1.1 table 5 priority 5"),
    ((), "addr add 10.0.1.1 dev h1-eth0"),              # no prefix: ip's own default applies
    ((), "addr add 10.0.1.300/24 dev h1-eth0"),
    ((), "addr add 10.0.1.1/24 dev h1-eth0 label x"),
    (("-6",), "addr add 10.0.1.1/24 dev h1-eth0"),      # the batch's family disagrees
    (("-6",), "addr flush dev h1-eth0"),
    ((), "link set dev h1-eth0 gso_max_segs 0"),
    ((), "link set dev h1-eth0 mtu 1400"),
    ((), "link set dev a-name-far-too-long up"),
    ((), "addr flush dev h1-eth0 scope link"),
    (("-n", "x"), "link set dev lo up"),
])
def test_other_ip_lines_send_the_batch_to_the_program(options, line):
    assert ipchanges.parse_lines(options, ("link set dev lo up", line)) is None


def test_ip_errors_read_as_the_programs_and_reach_each_command(monkeypatch):
    def apply_one(_sock, change):
        if change.dev == "gone0":
            raise ipchanges._NoDevice()
        if change.kind == "addr add":
            raise ipchanges._Refused(17, "ipv4: Address already assigned")

    monkeypatch.setattr(ipchanges, "_apply_one", apply_one)
    lines = ("link set dev lo up", "addr add 10.0.1.1/24 dev h1-eth0", "link set dev gone0 up")
    rc, out, err = ipchanges.apply(ipchanges.parse_lines((), lines), "/tmp/b.ip")
    assert rc == 1 and err == ("Error: ipv4: Address already assigned.\nCommand failed /tmp/b.ip:2\n"
                               "Cannot find device \"gone0\"\nCommand failed /tmp/b.ip:3\n")
    unit = ipbatch.Unit([["ip", *line.split()] for line in lines], (), lines)
    assert [r[0] for r in ipbatch.spread(unit, rc, out, err)] == [0, 1, 1]
    # one command alone: no batch file, and the program's exit codes (2 for the kernel's refusal)
    assert ipchanges.apply(ipchanges.parse_lines((), lines[1:2]), None)[:2] == (2, "")
    assert ipchanges.apply(ipchanges.parse_lines((), lines[2:]), None) == (1, "", "Cannot find device \"gone0\"\n")


def test_a_refusal_without_the_kernels_words_reads_as_rtnetlink_answers(monkeypatch):
    def apply_one(_sock, _change):
        raise ipchanges._Refused(1, "")
    monkeypatch.setattr(ipchanges, "_apply_one", apply_one)
    assert ipchanges.apply(ipchanges.parse_lines((), ("link set dev lo up",)), None)[2] == \
        "RTNETLINK answers: Operation not permitted\n"


def _attr(kind, data):
    length = 4 + len(data)
    return struct.pack("=HH", length, kind) + data + bytes((4 - length % 4) % 4)


def test_the_extended_acknowledgement_message_is_read_after_the_echoed_request():
    request = struct.pack("=IHHII", 16 + 12, 20, 0x605, 7, 0) + bytes(12)   # a 12-byte body, echoed whole
    tlvs = _attr(ipchanges.NLMSGERR_ATTR_MSG, b"ipv4: Address already assigned\0") + _attr(2, b"\0\0\0\0")
    payload = struct.pack("=i", -17) + request + tlvs
    assert ipchanges._ack_message(ipchanges.NLM_F_ACK_TLVS, payload) == "ipv4: Address already assigned"
    capped = struct.pack("=i", -17) + request[:16] + tlvs   # only the header echoed (NLM_F_CAPPED)
    assert ipchanges._ack_message(ipchanges.NLM_F_ACK_TLVS | ipchanges.NLM_F_CAPPED, capped) == \
        "ipv4: Address already assigned"
    assert ipchanges._ack_message(0, payload) == ""   # no TLVs flagged: the errno's words
