"""Steered flows deleted over a bridge's OpenFlow socket: the messages as os-ken encodes them, and a
conversation with a stand-in switch on a Unix socket that answers as ovs-vswitchd does."""
import os
import socket
import struct
import threading

import pytest
from os_ken.ofproto import ofproto_parser, ofproto_protocol, ofproto_v1_3 as ofp, ofproto_v1_3_parser as parser

from controller.decisions import STEER_COOKIE
from runners.collect import steering
from runners.errors import ControlPlaneError
from runners.linux import openflow

DP = ofproto_protocol.ProtocolDesc(ofp.OFP_VERSION)


def test_the_delete_is_byte_for_byte_what_os_ken_encodes():
    want = parser.OFPFlowMod(DP, cookie=STEER_COOKIE, cookie_mask=(1 << 64) - 1, table_id=ofp.OFPTT_ALL,
                             command=ofp.OFPFC_DELETE, out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY,
                             buffer_id=ofp.OFP_NO_BUFFER, match=parser.OFPMatch())
    want.set_xid(7)
    want.serialize()
    assert openflow.delete_by_cookie(7, STEER_COOKIE) == bytes(want.buf)
    barrier = parser.OFPBarrierRequest(DP)
    barrier.set_xid(8)
    barrier.serialize()
    assert openflow.message(openflow.OFPT_BARRIER_REQUEST, 8) == bytes(barrier.buf)


def _hello_of_ovs() -> bytes:
    """ovs-vswitchd's HELLO with every version it speaks (1.0-1.5) in a version bitmap element."""
    element = struct.pack("!HHI", 1, 8, 0b1111110)
    return struct.pack("!BBHI", 6, 0, 8 + len(element), 1) + element


def _read_message(conn) -> tuple[int, int, bytes]:
    head = b""
    while len(head) < 8:
        head += conn.recv(8 - len(head))
    version, msg_type, length, xid = struct.unpack("!BBHI", head)
    body = b""
    while len(body) < length - 8:
        body += conn.recv(length - 8 - len(body))
    return msg_type, xid, head + body


class StandInSwitch:
    """Listens on `<rundir>/<bridge>.mgmt`, answers one conversation as `reply` says, keeps what it got."""

    def __init__(self, rundir, bridge: str, reply: str):
        self.path, self.reply, self.got = str(rundir / f"{bridge}.mgmt"), reply, []
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(1)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            conn.sendall(_hello_of_ovs())
            self.got.append(_read_message(conn))          # its HELLO
            if self.reply == "close":
                return
            self.got.append(_read_message(conn))          # the FLOW_MOD
            _, barrier_xid, _ = _read_message(conn)      # the BARRIER
            if self.reply == "error":                    # OFPET_FLOW_MOD_FAILED, OFPFMFC_EPERM, on the FLOW_MOD
                flow_mod_xid = self.got[-1][1]
                conn.sendall(struct.pack("!BBHIHH", 4, 1, 12, flow_mod_xid, 5, 6))
                return
            conn.sendall(struct.pack("!BBHI", 4, 2, 12, 99) + b"ping")   # an ECHO_REQUEST meanwhile
            echo = _read_message(conn)
            self.got.append(echo)
            conn.sendall(struct.pack("!BBHI", 4, 21, 8, barrier_xid))


@pytest.fixture
def rundir(tmp_path, monkeypatch):
    d = tmp_path / "run"
    d.mkdir()
    monkeypatch.setenv("OVS_RUNDIR", str(d))
    return d


def test_steered_flows_are_deleted_and_the_switch_confirms(rundir):
    switch = StandInSwitch(rundir, "s1", "ok")
    steering.clear_steered_flows("s1")
    switch.thread.join(5)
    (hello_type, _, _), (mod_type, xid, raw), (echo_type, echo_xid, echo) = switch.got
    assert hello_type == openflow.OFPT_HELLO and mod_type == openflow.OFPT_FLOW_MOD
    assert (echo_type, echo_xid, echo[8:]) == (openflow.OFPT_ECHO_REPLY, 99, b"ping")
    mod = ofproto_parser.msg(DP, 4, mod_type, len(raw), xid, raw)     # read back by os-ken's own parser
    assert (mod.command, mod.table_id, mod.cookie, mod.cookie_mask) == \
        (ofp.OFPFC_DELETE, ofp.OFPTT_ALL, STEER_COOKIE, (1 << 64) - 1)
    assert (mod.out_port, mod.out_group, len(mod.match.fields)) == (ofp.OFPP_ANY, ofp.OFPG_ANY, 0)


@pytest.mark.parametrize("reply, says", [("error", "refused request .*type 5, code 6"),
                                         ("close", "closed the connection")])
def test_a_refusal_or_a_dropped_connection_names_the_switch(rundir, reply, says):
    StandInSwitch(rundir, "s2", reply)
    with pytest.raises(ControlPlaneError, match=f"switch s2: deleting its steered flows failed: .*{says}"):
        steering.clear_steered_flows("s2")


def test_no_socket_there_means_ovs_ofctl(rundir, monkeypatch):
    ran = []
    monkeypatch.setattr(steering, "ofctl", lambda argv: ran.append(argv) or "")
    steering.clear_steered_flows("s3")
    assert ran == [steering.ofctl_clear_argv("s3", STEER_COOKIE)] and not os.path.exists(rundir / "s3.mgmt")


def test_a_socket_nobody_listens_on_is_a_control_plane_error(rundir):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(rundir / "s4.mgmt"))
    s.close()                            # the file stays, nothing accepts: a switch that died
    with pytest.raises(ControlPlaneError, match="switch s4: deleting its steered flows failed"):
        steering.clear_steered_flows("s4")


def test_a_hello_says_which_versions_by_its_bitmap_where_it_has_one():
    bitmap = lambda bits: struct.pack("!HHI", 1, 8, bits)          # noqa: E731
    assert openflow.speaks_1_3(6, bitmap(0b1111110))                # ovs-vswitchd's: 1.0-1.5
    assert not openflow.speaks_1_3(5, bitmap(0b100010))             # 1.0 and 1.4 only
    assert openflow.speaks_1_3(4, b"") and not openflow.speaks_1_3(3, b"")   # no elements: up to the header's
