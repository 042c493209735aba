"""`ip mptcp` commands done in process (runners.linux.mptcp_pm): which forms it takes, the requests it
sends (the attributes ip sends, in ip's order), and `show`'s lines as ip prints them. Checked against ip
itself on a real kernel in tests/integration/test_inprocess_changes.py."""
import socket
import struct

import pytest

from runners.linux import ipbatch, ipchanges, mptcp_pm, nsexec
from runners.linux.mptcp_pm import MptcpChange


def test_the_testbeds_forms_are_taken():
    lines = ("mptcp endpoint flush", "mptcp limits set subflows 2 add_addr_accepted 1",
             "mptcp endpoint add 10.0.2.2 dev h2-eth1 signal", "mptcp endpoint add 10.0.1.2 dev h2-eth0 signal port 5301",
             "mptcp endpoint add fd00::1 dev h1-eth1 subflow backup", "mptcp endpoint change 10.0.1.1 backup",
             "link set dev lo up")
    got = ipchanges.parse_lines((), lines)
    assert got[:6] == [MptcpChange("flush"), MptcpChange("limits", limits=((2, 1), (3, 2))),
                       MptcpChange("add", "10.0.2.2", "h2-eth1", flags=1),
                       MptcpChange("add", "10.0.1.2", "h2-eth0", port=5301, flags=1),
                       MptcpChange("add", "fd00::1", "h1-eth1", flags=2 | 4), MptcpChange("change", "10.0.1.1", flags=4)]


@pytest.mark.parametrize("line", [
    "mptcp endpoint add 10.0.2.2 id 3 signal",            # id: left to ip
    "mptcp endpoint add 10.0.2.2 signal fullmesh",        # ip refuses both itself
    "mptcp endpoint add 10.0.2.2 port 5300",              # port without signal: ip refuses
    "mptcp endpoint add 10.0.2.300 signal",
    "mptcp endpoint delete id 1",
    "mptcp limits set subflows x",
    "mptcp limits set subflows 1 subflows 2",
    "mptcp endpoint change 10.0.1.1 fullmesh",
])
def test_other_mptcp_lines_go_to_ip(line):
    assert ipchanges.parse_lines((), (line,)) is None


def test_options_send_mptcp_lines_to_ip():
    assert ipchanges.parse_lines(("-6",), ("mptcp endpoint flush",)) is None


def test_an_endpoint_is_asked_for_as_ip_asks(monkeypatch):
    monkeypatch.setattr(mptcp_pm.socket, "if_nametoindex", lambda name: 5)
    cmd, body = mptcp_pm.request(MptcpChange("add", "10.0.1.2", "h2-eth0", port=5301, flags=1))
    assert cmd == mptcp_pm.CMD_ADD_ADDR
    nested = (struct.pack("=HHI", 8, 6, 1) + struct.pack("=HHI", 8, 7, 5) + struct.pack("=HHH", 6, 5, 5301) + b"\0\0"
              + struct.pack("=HHH", 6, 1, socket.AF_INET) + b"\0\0" + struct.pack("=HH", 8, 3) + bytes([10, 0, 1, 2]))
    assert body == struct.pack("=BBH", 1, 1, 0) + struct.pack("=HH", 4 + len(nested), 1 | 0x8000) + nested
    cmd, body = mptcp_pm.request(MptcpChange("change", "fd00::1", flags=0))    # nobackup: no flags attribute
    assert cmd == mptcp_pm.CMD_SET_FLAGS and body[8:12] == struct.pack("=HHH", 6, 1, socket.AF_INET6)[:4]
    cmd, body = mptcp_pm.request(MptcpChange("limits", limits=((2, 1), (3, 2))))
    assert (cmd, body) == (5, struct.pack("=BBH", 5, 1, 0) + struct.pack("=HHI", 8, 2, 1) + struct.pack("=HHI", 8, 3, 2))


def _endpoint(*attrs):
    nested = b"".join(struct.pack("=HH", 4 + len(v), k) + v + bytes((4 - len(v) % 4) % 4) for k, v in attrs)
    return struct.pack("=BBH", 3, 1, 0) + struct.pack("=HH", 4 + len(nested), 1 | 0x8000) + nested


def test_show_prints_each_endpoint_as_ip_does(monkeypatch):
    monkeypatch.setattr(mptcp_pm.socket, "if_indextoname", lambda i: {5: "h2-eth1"}[i])
    v4 = _endpoint((1, struct.pack("=H", 2)), (2, b"\x01"), (3, bytes([10, 0, 2, 2])), (5, struct.pack("=H", 0)),
                   (6, struct.pack("=I", 1)), (7, struct.pack("=i", 5)))
    assert mptcp_pm.endpoint_line(v4) == "10.0.2.2 id 1 signal dev h2-eth1 \n"
    v6 = _endpoint((1, struct.pack("=H", 10)), (2, b"\x02"), (4, socket.inet_pton(socket.AF_INET6, "fd00::1")),
                   (5, struct.pack("=H", 5300)), (6, struct.pack("=I", 0x4 | 0x2 | 0x40)), (7, struct.pack("=i", 0)))
    assert mptcp_pm.endpoint_line(v6) == "fd00::1 port 5300 id 2 subflow backup rawflags 40 \n"
    gone = _endpoint((1, struct.pack("=H", 2)), (2, b"\x03"), (3, bytes([10, 0, 3, 1])), (7, struct.pack("=i", 9)))
    monkeypatch.setattr(mptcp_pm.socket, "if_indextoname", lambda i: (_ for _ in ()).throw(OSError(6, "gone")))
    assert mptcp_pm.endpoint_line(gone) == "10.0.3.1 id 3 dev if9 \n"     # ip names a device gone by number
    implicit = _endpoint((1, struct.pack("=H", 2)), (3, bytes([10, 0, 3, 1])), (6, struct.pack("=I", 0x10)))
    with pytest.raises(mptcp_pm.UseTheProgram):   # iproute2 versions print it differently: ip says it
        mptcp_pm.endpoint_line(implicit)


def test_show_alone_is_done_in_process_and_a_missing_device_is_left_to_ip(monkeypatch):
    unit = ipbatch.units([mptcp_pm.SHOW_ARGV])[0]
    assert nsexec._done_here(unit, mptcp_pm.SHOW_ARGV) is not None
    monkeypatch.setattr(mptcp_pm.socket, "if_nametoindex", lambda name: (_ for _ in ()).throw(OSError(19, "No such device")))
    with pytest.raises(mptcp_pm.UseTheProgram):
        mptcp_pm.check_devices(ipchanges.parse_lines((), ("mptcp endpoint add 10.0.1.1 dev gone0 subflow",)))
