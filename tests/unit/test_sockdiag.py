"""The client's MPTCP subflows over sock_diag (runners.linux.sockdiag), parsed from recorded dumps.

Each fixture pair was recorded in one namespace at one moment (2026-11-28, kernel 6.18, iproute2 6.1):
two veth paths, the server announcing path 2's address (a `signal` endpoint) and the client joining it
as a backup; an AF_INET6 MPTCP connection to a v4-mapped address, an IPv6 MPTCP connection and a plain
TCP connection. Then `ss -tinMO state established` and the sock_diag dump of both families, as
SubflowReader asks for it. In `sockdiag-*` the data was acknowledged and the connections idle (their
windows open); in `sockdiag-held-*` the server read nothing, so every sender held data against a zero
window. The dump must give what `ss` showed: the fields the records keep and the windows.
"""
import itertools
import json
import socket
import struct
import time
import types
from pathlib import Path

import pytest

from runners.linux import rtnetlink as nl, sockdiag as sd, ss
from runners.traffic import base
from runners.traffic.base import TrafficTool, subflow_samples_json, subflow_schedule

FIX = Path(__file__).resolve().parent.parent / "fixtures"


def dumped(name: str) -> list[tuple[int, bytes]]:
    """The answers of both families' dumps, each ended by its NLMSG_DONE."""
    return nl.messages((FIX / f"{name}-dump.bin").read_bytes())


def by_socket(entries):
    return sorted(entries, key=lambda e: (e["local"], e["local_port"]))


def by_window(windows):
    return sorted(windows, key=lambda w: (w["local"], w["token"]))


@pytest.mark.parametrize("name", ["sockdiag", "sockdiag-held"])
def test_the_dump_gives_what_ss_showed(name):
    ours = [e for e in (sd.parse_socket(p) for kind, p in dumped(name) if kind == sd.SOCK_DIAG_BY_FAMILY) if e]
    text = (FIX / f"{name}-ss.txt").read_text()
    assert by_socket(map(sd.as_ss_subflow, ours)) == by_socket(ss.parse_ss_subflows(text))
    assert by_window(filter(None, map(sd.send_window, ours))) == by_window(ss.send_windows(text))
    cwnds = {(e["local"], e["local_port"]): e["cwnd"] for e in ss.parse_ss_subflows(text, windows=True)}
    assert {(e["local"], e["local_port"]): e["cwnd"] for e in ours} == cwnds


def test_subflows_of_both_families_with_their_flags_and_the_plain_tcp_socket_left_out():
    answers = [p for kind, p in dumped("sockdiag") if kind == sd.SOCK_DIAG_BY_FAMILY]
    ours = [sd.parse_socket(p) for p in answers]
    assert len(answers) == 5 and ours.count(None) == 1       # the plain TCP connection to port 5202
    subflows = by_socket(e for e in ours if e)
    assert [(e["local"], e["family"], e["flags"], e["backup"]) for e in subflows] == [
        ("10.0.1.1", "ipv4", "Mmec", False),       # an AF_INET6 socket's v4-mapped addresses, named as IPv4
        ("10.0.2.1", "ipv4", "Jjbec", True), ("10.0.2.1", "ipv4", "Jjbec", True),   # the joins, as backups
        ("fd00:1::1", "ipv6", "Mmec", False)]
    initial = subflows[0]
    assert initial["token"] == "ce9b5e43" and (initial["local_id"], initial["remote_id"]) == (0, 0)
    assert initial["bytes_acked"] == 309433 and initial["mss"] == 1448 and initial["snd_wnd"] == 551936


def test_a_held_sender_has_data_queued_and_no_window():
    held = [e for e in (sd.parse_socket(p) for kind, p in dumped("sockdiag-held") if kind == sd.SOCK_DIAG_BY_FAMILY)
            if e]
    sending = [e for e in held if not e["app_limited"]]
    assert sending and all(e["send_q"] > 0 and e["snd_wnd"] == 0 for e in sending)
    assert [sd.send_window(e) for e in held] == [None] * len(held)     # ss prints no zero window either


def test_a_shorter_tcp_info_of_an_older_kernel_leaves_out_what_it_lacks():
    payload = next(p for kind, p in dumped("sockdiag") if kind == sd.SOCK_DIAG_BY_FAMILY and sd.parse_socket(p))
    attrs = nl.attribute_records(payload, sd.DIAG_MSG_SIZE)
    info = dict(attrs)[sd.INET_DIAG_INFO][:104]      # tcp_info up to tcpi_total_retrans (Linux 4.1 and older)
    rebuilt = payload[:sd.DIAG_MSG_SIZE]
    for kind, value in attrs:
        value = info if kind == sd.INET_DIAG_INFO else value
        rebuilt += nl.RTATTR.pack(nl.RTATTR.size + len(value), kind) + value + b"\0" * (-len(value) % 4)
    entry = sd.parse_socket(rebuilt)
    assert entry["rtt_ms"] and entry["cwnd"] and "bytes_acked" not in entry and entry["snd_wnd"] is None
    assert sd.send_window(entry) is None


def rebuilt(payload: bytes, wqueue: int, mptcp: dict[int, bytes], snd_wnd: int) -> bytes:
    """A recorded answer with its Send-Q, the subflow's MPTCP attributes and its offered window replaced."""
    head = bytearray(payload[:sd.DIAG_MSG_SIZE])
    struct.pack_into("=I", head, sd.DIAG_MSG.size + sd.SOCKID.size + 8, wqueue)       # idiag_wqueue

    def attr(kind: int, value: bytes) -> bytes:
        return nl.RTATTR.pack(nl.RTATTR.size + len(value), kind) + value + b"\0" * (-len(value) % 4)
    out = bytes(head)
    for kind, value in nl.attribute_records(payload, sd.DIAG_MSG_SIZE):
        if kind == sd.INET_DIAG_INFO:
            value = bytearray(value)
            struct.pack_into("=I", value, sd.TCPI_SND_WND, snd_wnd)
        elif kind == sd.INET_DIAG_ULP_INFO:
            value = attr(sd.INET_ULP_INFO_NAME, b"mptcp\0") + attr(
                sd.INET_ULP_INFO_MPTCP, b"".join(attr(k, v) for k, v in mptcp.items()))
        out += attr(kind, bytes(value))
    return out


def test_ids_tokens_flags_and_a_window_are_read_as_ss_prints_them():
    """What the recordings cannot tell apart: ids that differ, a token below 0x10000000 (ss: %04x), the
    peer's backup flag and a valid mapping, and a sender holding data against an open window."""
    payload = next(p for kind, p in dumped("sockdiag") if kind == sd.SOCK_DIAG_BY_FAMILY and sd.parse_socket(p))
    flags = (1 << 2) | (1 << 4) | (1 << 6) | (1 << 8)          # JOIN_REM, BKUP_REM, FULLY_ESTABLISHED, MAPVALID
    mptcp = {sd.MPTCP_SUBFLOW_ATTR_TOKEN_REM: struct.pack("=I", 0x1234abcd),
             sd.MPTCP_SUBFLOW_ATTR_TOKEN_LOC: struct.pack("=I", 0xabc),
             sd.MPTCP_SUBFLOW_ATTR_FLAGS: struct.pack("=I", flags),
             sd.MPTCP_SUBFLOW_ATTR_ID_REM: b"\x02", sd.MPTCP_SUBFLOW_ATTR_ID_LOC: b"\x05"}
    entry = sd.parse_socket(rebuilt(payload, wqueue=30_000, mptcp=mptcp, snd_wnd=42_496))
    assert (entry["token"], entry["remote_id"], entry["local_id"]) == ("0abc", 2, 5)
    assert entry["flags"] == "JBev" and entry["backup"] is True
    window = sd.send_window(entry)
    assert (window["snd_wnd"], window["send_q"], window["token"]) == (42_496, 30_000, "0abc")
    no_flags = sd.parse_socket(rebuilt(payload, 0, {**mptcp, sd.MPTCP_SUBFLOW_ATTR_FLAGS: b"\0" * 4}, 1))
    assert "flags" not in no_flags and "backup" not in no_flags     # ss prints no flags when there are none
    no_ids = {k: v for k, v in mptcp.items() if k != sd.MPTCP_SUBFLOW_ATTR_ID_REM}
    assert "token" not in sd.parse_socket(rebuilt(payload, 0, no_ids, 1))   # ss needs all four for its token


def test_the_request_asks_for_established_tcp_sockets_with_tcp_info():
    header = sd.dump_request_header(socket.AF_INET6)
    family, protocol, ext, states = sd.REQ_V2.unpack_from(header)
    assert (family, protocol, ext, states) == (socket.AF_INET6, socket.IPPROTO_TCP, 1 << 1, 1 << 1)
    assert sd.SOCKID.unpack_from(header, sd.REQ_V2.size)[-2:] == (0xFFFFFFFF, 0xFFFFFFFF)   # no cookie
    assert len(header) == 56      # sizeof(struct inet_diag_req_v2)


class RecordedSubflowReader(sd.SubflowReader):
    """Answers each family's request with that family's recorded answers."""

    def __init__(self, name):
        super().__init__(pid=0)
        self.found, self.asked = dumped(name), []

    def dump(self, kind, header):
        family = header[0]
        self.asked.append((kind, family))
        return [(k, p) for k, p in self.found if k == sd.SOCK_DIAG_BY_FAMILY and p[0] == family]


def test_the_reader_asks_both_families_and_keeps_the_subflows():
    reader = RecordedSubflowReader("sockdiag")
    got = reader.subflows()
    assert reader.asked == [(sd.SOCK_DIAG_BY_FAMILY, socket.AF_INET), (sd.SOCK_DIAG_BY_FAMILY, socket.AF_INET6)]
    assert len(got) == 4 and {e["family"] for e in got} == {"ipv4", "ipv6"}


class FakeClient:
    """A tool's client process that ends after `reads` samples were taken."""

    def __init__(self, reader, reads):
        self.reader, self.reads = reader, reads

    def poll(self):
        return 0 if self.reader.calls >= self.reads else None


class CountingReader:
    def __init__(self, fail=False):
        self.calls, self.fail = 0, fail

    def subflows(self):
        self.calls += 1
        if self.fail:
            raise nl.NetlinkError("netlink: no answer to a dump within 5 s")
        return RecordedSubflowReader("sockdiag").subflows()


def tool_with(reader, log=None, duration=0.2, events=(), checked=None):
    network = types.SimpleNamespace(subflow_reader=lambda name: reader)
    scenario = types.SimpleNamespace(traffic=types.SimpleNamespace(duration=duration, omit=0), events=list(events),
                                     topology=types.SimpleNamespace(kind="dual-homed", paths=[]))
    host = types.SimpleNamespace(scenario=scenario, client=types.SimpleNamespace(name="h1"), network=network,
                                 log=log if log is not None else print,
                                 check_control_plane=(checked.append if checked is not None else lambda when: None))
    return TrafficTool(host)


def test_samples_are_taken_until_the_client_ends_and_the_raw_file_keeps_each_whole():
    reader = CountingReader()
    samples = tool_with(reader).watch_subflows(FakeClient(reader, reads=2), t0=time.monotonic())
    # the schedule of a 0.2 s run: the first read after 0.1 s, the next 0.5 s later
    assert len(samples) == 2 and 0.05 < samples[0]["t"] < samples[1]["t"] < 1.5, samples
    assert all(len(s["subflows"]) == 4 and len(s["windows"]) == 4 for s in samples)
    assert "snd_wnd" not in samples[0]["subflows"][0]          # a run's records keep ss's fields
    raw = json.loads(subflow_samples_json(samples))
    assert [x["t"] for x in raw] == [s["t"] for s in samples] and raw[0]["subflows"][0]["snd_wnd"] == 64512


def test_a_run_whose_paths_change_is_sampled_every_half_second_to_its_end():
    """Lab 6 (2026-11-28): B's window held the sender from 4.2 s on, after a 0.3 s burst at its full rate,
    and the third of a timed run's three samples fell in the burst. A run with events is sampled to its end."""
    assert list(subflow_schedule(20, False)) == [2.0, 4.0, 4.0]
    assert list(itertools.islice(subflow_schedule(20, True), 5)) == [2.0, 0.5, 0.5, 0.5, 0.5]
    assert list(subflow_schedule(None, False)) == [0.3, 0.3, 0.4, 0.5, 1.0, 2.0]
    assert list(itertools.islice(subflow_schedule(None, True), 6)) == [0.3, 0.3, 0.4, 0.5, 0.5, 0.5]
    reader, checked = CountingReader(), []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(base, "EVENT_SUBFLOW_INTERVAL_S", 0.3)   # the test's time, not the run's 0.5 s
        samples = tool_with(reader, duration=2.4, events=["a-down"], checked=checked).watch_subflows(
            FakeClient(reader, reads=99), t0=time.monotonic())
    # after 1.2 s, then every 0.3 s (plus each read's time) while a wait still ends by the run's 2.4 s: four
    # samples, where a timed run without events has three; the client outlived it: the wait takes over
    times = [s["t"] for s in samples]
    assert len(times) == 4 and 1.2 <= times[0] < 1.4 and all(0.3 <= b - a < 0.45 for a, b in zip(times, times[1:]))
    assert len(checked) == 4     # the controller and ovs-vswitchd watched meanwhile, as the wait watches them


def test_a_fixed_size_transfer_whose_paths_change_is_sampled_up_to_the_tools_timeout():
    """...where the wait for its client, counted from the same start, gives up: the sampling must not
    make a stuck transfer wait longer than the timeout it is told of."""
    reader = CountingReader()
    tool = tool_with(reader, duration=None, events=["a-down"])
    tool.timeout = lambda: 1.5
    started = time.monotonic()
    samples = tool.watch_subflows(FakeClient(reader, reads=99), t0=started)
    assert time.monotonic() - started < 1.5 and len(samples) >= 3, [s["t"] for s in samples]


def test_a_failed_read_is_said_and_ends_the_sampling_not_the_run():
    reader, said = CountingReader(fail=True), []
    assert tool_with(reader, said.append).watch_subflows(FakeClient(reader, reads=5), t0=0.0) == []
    assert reader.calls == 1 and said == ["warning: h1: its MPTCP subflows could not be read over sock_diag "
                                          "(netlink: no answer to a dump within 5 s); no more subflow samples "
                                          "in this run (0 taken)"]


def test_a_tcp_run_has_no_subflows_to_sample():
    reader = CountingReader()
    assert tool_with(reader).watch_subflows(FakeClient(reader, reads=5), t0=0.0, mptcp=False) == []
    assert reader.calls == 0


def test_a_truncated_answer_is_refused_not_misread():
    payload = next(p for kind, p in dumped("sockdiag") if kind == sd.SOCK_DIAG_BY_FAMILY)
    bad = bytearray(payload)
    struct.pack_into("=H", bad, sd.DIAG_MSG_SIZE, 0xFFF0)        # the first attribute's length
    with pytest.raises(nl.NetlinkError, match="runs past"):
        sd.parse_socket(bytes(bad))
