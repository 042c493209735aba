"""Commands a batch carries out in the runner's own process, in the node's namespace: `sysctl -q -w`,
`ethtool -K`, `ip` link and address changes, `nft -f`. The kernel side is tried against the programs in
tests/integration/test_inprocess_changes.py; here, what is parsed, what is refused, and how the results
reach each command, with the kernel calls stood in for."""
import struct
import subprocess

import pytest

from runners.linux import ethtool, ipbatch, ipchanges, nftlib, nlrequest, nsexec, rtnetlink
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
        # this thread is in this machine's own namespaces: only the stood-in kernel calls may run here
        assert STUBBED, "a test ran an in-process change without the `kernel` fixture"
        self.called += 1
        return fn()

    def popen(self, argv, **kw):
        self.started.append(argv)
        return subprocess.Popen(argv if argv[0] == "echo" else ["false"], **kw)


STUBBED = []


@pytest.fixture
def kernel(monkeypatch):
    """The kernel calls recorded instead of made."""
    calls = []
    STUBBED.append(True)
    monkeypatch.setattr(nsexec, "_write_sysctls", lambda pairs: (calls.append(("sysctl", pairs)), (None, 1))[1])
    monkeypatch.setattr(ethtool, "set_features", lambda i, w: (calls.append(("ethtool", i, w)), (0, ""))[1])
    monkeypatch.setattr(ipchanges, "apply", lambda c, f: (calls.append(("ip", [x.kind for x in c], f)), (0, "", ""))[1])
    monkeypatch.setattr(nftlib, "available", lambda: True)
    monkeypatch.setattr(nftlib, "run_file", lambda path: (calls.append(("nft", open(path).read())), (0, "", ""))[1])
    yield calls
    STUBBED.clear()


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


def test_a_refused_change_is_raised_with_its_own_command(kernel, monkeypatch):
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
            raise nlrequest.Refused(17, "ipv4: Address already assigned")

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
        raise nlrequest.Refused(1, "")
    monkeypatch.setattr(ipchanges, "_apply_one", apply_one)
    assert ipchanges.apply(ipchanges.parse_lines((), ("link set dev lo up",)), None)[2] == \
        "RTNETLINK answers: Operation not permitted\n"


def _attr(kind, data):
    length = 4 + len(data)
    return struct.pack("=HH", length, kind) + data + bytes((4 - length % 4) % 4)


def test_the_extended_acknowledgement_message_is_read_after_the_echoed_request():
    request = struct.pack("=IHHII", 16 + 12, 20, 0x605, 7, 0) + bytes(12)   # a 12-byte body, echoed whole
    tlvs = _attr(nlrequest.NLMSGERR_ATTR_MSG, b"ipv4: Address already assigned\0") + _attr(2, b"\0\0\0\0")
    payload = struct.pack("=i", -17) + request + tlvs
    assert nlrequest.ack_message(nlrequest.NLM_F_ACK_TLVS, payload) == "ipv4: Address already assigned"
    capped = struct.pack("=i", -17) + request[:16] + tlvs   # only the header echoed (NLM_F_CAPPED)
    assert nlrequest.ack_message(nlrequest.NLM_F_ACK_TLVS | nlrequest.NLM_F_CAPPED, capped) == \
        "ipv4: Address already assigned"
    assert nlrequest.ack_message(0, payload) == ""   # no TLVs flagged: the errno's words


NAMES = ["tx-scatter-gather", "tx-checksum-ipv4", "", "tx-checksum-ip-generic", "tx-generic-segmentation",
         "rx-gro", "tx-tcp-segmentation", "tx-tcp6-segmentation", "rx-checksum"] + [f"f{k}" for k in range(9, 40)]


class FakeEthtool:
    """The kernel's side of SIOCETHTOOL for one device: feature names, and the active bits it reports."""

    def __init__(self, active: int):
        self.active, self.sent = active, []

    def __call__(self, _sock, ifname, command: bytes) -> bytes:
        cmd = struct.unpack_from("I", command)[0]
        self.sent.append((ifname, cmd, command))
        if cmd == ethtool.ETHTOOL_GSSET_INFO:
            return command[:16] + struct.pack("I", len(NAMES))
        if cmd == ethtool.ETHTOOL_GSTRINGS:
            return command[:12] + b"".join(n.encode().ljust(ethtool.ETH_GSTRING_LEN, b"\0") for n in NAMES)
        if cmd == ethtool.ETHTOOL_SFEATURES:
            words = struct.unpack_from("I", command, 4)[0]
            blocks = struct.unpack_from(f"{2 * words}I", command, 8)
            for w in range(words):
                valid, requested = blocks[2 * w], blocks[2 * w + 1]
                self.active = (self.active & ~(valid << 32 * w)) | ((requested & valid) << 32 * w)
            return command
        if cmd == ethtool.ETHTOOL_GFEATURES:
            words = struct.unpack_from("I", command, 4)[0]
            return command[:8] + b"".join(struct.pack("4I", 0xFFFFFFFF, 0, self.active >> 32 * w & 0xFFFFFFFF, 0)
                                          for w in range(words))
        raise AssertionError(hex(cmd))


def test_ethtool_sets_every_kernel_feature_its_word_stands_for_in_one_request(monkeypatch):
    fake = FakeEthtool(active=(1 << len(NAMES)) - 1)
    monkeypatch.setattr(ethtool, "_ioctl", fake)
    monkeypatch.setattr(ethtool, "_names", None)
    monkeypatch.setattr(ethtool.socket, "socket", lambda *a: __import__("contextlib").nullcontext())
    assert ethtool.set_features("h1-eth0", [("tx", 0), ("tso", 0), ("gro", 0)]) == (0, "")
    sets = [c for _, cmd, c in fake.sent if cmd == ethtool.ETHTOOL_SFEATURES]
    assert len(sets) == 1
    words = struct.unpack_from("I", sets[0], 4)[0]
    assert words == 2   # 40 names: two blocks of 32
    valid, requested = struct.unpack_from("2I", sets[0], 8)
    assert valid == 0b11101010 and requested == 0   # checksums ipv4 and ip-generic, rx-gro, both TSO kinds
    assert not fake.active & 0b11101010 and fake.active & 0b100010001 == 0b100010001   # sg, gso, rx-checksum kept


def test_ethtool_says_which_features_did_not_take(monkeypatch):
    class Stuck(FakeEthtool):
        def __call__(self, sock, ifname, command):
            out = super().__call__(sock, ifname, command)
            self.active |= 1 << 5   # rx-gro stays on, whatever is asked
            return out

    monkeypatch.setattr(ethtool, "_ioctl", Stuck(active=1 << 5))
    monkeypatch.setattr(ethtool, "_names", None)
    monkeypatch.setattr(ethtool.socket, "socket", lambda *a: __import__("contextlib").nullcontext())
    assert ethtool.set_features("h1-eth0", [("gro", 0)]) == (1, "Could not change rx-gro of h1-eth0\n")


class FakeRtnl:
    """A netlink socket that records each request and acknowledges it (with `refuse` as its errno)."""

    def __init__(self, refuse: int = 0):
        self.sent, self.refuse = [], refuse

    def send(self, data):
        self.sent.append(data)

    def recv(self, _size):
        length, kind, flags, seq, port = rtnetlink.NLMSGHDR.unpack_from(self.sent[-1])
        payload = struct.pack("=i", -self.refuse) + self.sent[-1][:16]
        return rtnetlink.NLMSGHDR.pack(16 + len(payload), rtnetlink.NLMSG_ERROR, 0x100, seq, 0) + payload


def _request(data):
    length, kind, flags, _seq, _port = rtnetlink.NLMSGHDR.unpack_from(data)
    assert length == len(data)
    return kind, flags, data[16:]


def test_ip_changes_send_the_requests_ip_sends(monkeypatch):
    monkeypatch.setattr(ipchanges.socket, "if_nametoindex", lambda name: 7)
    sock = FakeRtnl()
    for line in ("link set dev h1-eth0 up", "link set dev h1-eth0 gso_max_segs 1",
                 "addr add 10.0.1.1/24 dev h1-eth0", "addr replace fd00::1/64 dev h1-eth0 nodad"):
        ipchanges._apply_one(sock, ipchanges.parse_lines((), (line,))[0])
    (k1, f1, up), (k2, f2, segs), (k3, f3, v4), (k4, f4, v6) = map(_request, sock.sent)
    assert (k1, up) == (ipchanges.RTM_NEWLINK, ipchanges.IFINFOMSG.pack(0, 0, 7, 1, 1))
    assert k2 == ipchanges.RTM_NEWLINK and segs[16:] == struct.pack("=HHI", 8, 40, 1)   # IFLA_GSO_MAX_SEGS = 40
    assert k3 == ipchanges.RTM_NEWADDR and f3 == 0x1 | 0x4 | 0x400 | 0x200   # request, ack, create, excl
    assert v4 == ipchanges.IFADDRMSG.pack(2, 24, 0, 0, 7) + struct.pack("=HH", 8, 2) + bytes([10, 0, 1, 1]) \
        + struct.pack("=HH", 8, 1) + bytes([10, 0, 1, 1])
    assert k4 == ipchanges.RTM_NEWADDR and f4 == 0x1 | 0x4 | 0x400 | 0x100   # replace, not excl
    assert v6[:8] == ipchanges.IFADDRMSG.pack(10, 64, 2, 0, 7) and v6.endswith(struct.pack("=HHI", 8, 8, 2))


def test_a_refused_ip_change_raises_with_its_errno(monkeypatch):
    monkeypatch.setattr(ipchanges.socket, "if_nametoindex", lambda name: 7)
    with pytest.raises(nlrequest.Refused) as e:
        ipchanges._apply_one(FakeRtnl(refuse=17), ipchanges.parse_lines((), ("addr add 10.0.1.1/24 dev h1-eth0",))[0])
    assert e.value.errno == 17 and e.value.message == ""


def test_an_unexpected_failure_in_process_is_that_commands_failure(kernel, monkeypatch):
    def broken(_i, _w):
        raise OSError(97, "Address family not supported by protocol")
    monkeypatch.setattr(ethtool, "set_features", broken)
    with pytest.raises(nsexec.CommandError, match="ethtool -K h1-eth0 gso off.*Address family"):
        nsexec.run_batch(SpawnerNode(), [["ethtool", "-K", "h1-eth0", "gso", "off"]])
