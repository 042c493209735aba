"""Qdisc counters of a host's namespace over rtnetlink: no process started.

A run reads every namespace's qdisc counters (packets sent, drops, backlog)
before and after its traffic, and the pause between runs asks whether the
shaped queues have drained. `tc -s -j qdisc show` costs 0.13-0.19 s per
namespace in a TCG guest (measured 2026-11-25), most of it starting the
process. Here a netlink socket is opened once inside the namespace (a thread
enters it with setns, makes the socket, and ends there; the socket stays bound
to that namespace) and a dump is one send and a few receives.

The parsing (`parse_*`) is pure and tested on recorded bytes; `QdiscReader`
touches the kernel.
"""
from __future__ import annotations

import json
import os
import socket
import struct
import threading
from collections.abc import Collection

from runners.errors import ParseError
from runners.linux.nsspawn import setns_to

RTM_NEWLINK, RTM_GETLINK = 16, 18
RTM_NEWQDISC, RTM_GETQDISC = 36, 38
NLMSG_ERROR, NLMSG_DONE = 2, 3
NLM_F_REQUEST, NLM_F_DUMP, NLM_F_DUMP_INTR = 0x1, 0x300, 0x10
IFLA_IFNAME = 3
TCA_KIND, TCA_STATS2 = 1, 7
TCA_STATS_BASIC, TCA_STATS_QUEUE, TCA_STATS_PKT64 = 1, 3, 8
TC_H_ROOT = 0xFFFFFFFF

NLMSGHDR = struct.Struct("=IHHII")      # length, type, flags, sequence, port
TCMSG = struct.Struct("=BxxxiIII")      # family, ifindex, handle, parent, info
IFINFOMSG = struct.Struct("=BxHiII")    # family, type, index, flags, change
RTATTR = struct.Struct("=HH")           # length, type
STATS_BASIC = struct.Struct("=QI")      # gnet_stats_basic: bytes, packets (32-bit)
STATS_QUEUE = struct.Struct("=IIIII")   # gnet_stats_queue: qlen, backlog, drops, requeues, overlimits


class NetlinkError(OSError):
    """The kernel refused a dump, or its answer could not be read."""


class DumpInterrupted(NetlinkError):
    """What was dumped changed during the dump (NLM_F_DUMP_INTR): its answer may miss or repeat entries."""


def _align(n: int) -> int:
    return (n + 3) & ~3


def attribute_records(data: bytes, offset: int = 0, end: int | None = None) -> list[tuple[int, bytes]]:
    """rtattr list -> [(type, payload)] in order, the nested and byte-order flag bits cleared; NetlinkError
    for one that runs past its message."""
    end = len(data) if end is None else end
    out = []
    while offset + RTATTR.size <= end:
        length, kind = RTATTR.unpack_from(data, offset)
        if length < RTATTR.size or offset + length > end:
            raise NetlinkError(f"rtattr of length {length} at {offset} runs past its message")
        out.append((kind & 0x3FFF, data[offset + RTATTR.size:offset + length]))
        offset += _align(length)
    return out


def attributes(data: bytes, offset: int = 0, end: int | None = None) -> dict[int, bytes]:
    """rtattr list -> {type: payload} (a later duplicate wins)."""
    return dict(attribute_records(data, offset, end))


def messages(data: bytes) -> list[tuple[int, bytes]]:
    """A receive buffer -> [(message type, payload)]; NetlinkError for an error message."""
    out, offset = [], 0
    while offset + NLMSGHDR.size <= len(data):
        length, kind, flags, _seq, _port = NLMSGHDR.unpack_from(data, offset)
        if length < NLMSGHDR.size or offset + length > len(data):
            raise NetlinkError(f"netlink message of length {length} at {offset} runs past the buffer")
        payload = data[offset + NLMSGHDR.size:offset + length]
        if flags & NLM_F_DUMP_INTR:
            raise DumpInterrupted("netlink: the dump was interrupted by a change")
        # an error message, or the end of a dump that failed part-way (its payload: a negative errno)
        if kind == NLMSG_ERROR or (kind == NLMSG_DONE and len(payload) >= 4):
            errno = -struct.unpack_from("=i", payload)[0]
            if errno > 0:
                raise NetlinkError(errno, f"netlink: {os.strerror(errno)}")
        out.append((kind, payload))
        offset += _align(length)
    return out


def parse_link(payload: bytes) -> tuple[int, str] | None:
    """An RTM_NEWLINK payload -> (ifindex, name)."""
    _family, _type, index, _flags, _change = IFINFOMSG.unpack_from(payload)
    name = attributes(payload, IFINFOMSG.size).get(IFLA_IFNAME)
    return (index, name.rstrip(b"\0").decode()) if name is not None else None


def parse_qdisc(payload: bytes, names: dict[int, str]) -> dict:
    """An RTM_NEWQDISC payload -> the fields `tc -s -j qdisc show` gives for it (counters, no options)."""
    _family, ifindex, handle, parent, _info = TCMSG.unpack_from(payload)
    attrs = attributes(payload, TCMSG.size)
    q = {"kind": attrs.get(TCA_KIND, b"").rstrip(b"\0").decode(), "handle": f"{handle >> 16:x}:",
         "dev": names.get(ifindex, f"if{ifindex}")}
    if parent == TC_H_ROOT:
        q["root"] = True
    else:
        q["parent"] = f"{parent >> 16:x}:{parent & 0xFFFF:x}"
    stats = attributes(attrs[TCA_STATS2]) if TCA_STATS2 in attrs else {}
    if TCA_STATS_BASIC in stats:
        q["bytes"], q["packets"] = STATS_BASIC.unpack_from(stats[TCA_STATS_BASIC])
    if TCA_STATS_PKT64 in stats:   # the 64-bit packet count, where the kernel gives one (tc prefers it too)
        q["packets"] = struct.unpack_from("=Q", stats[TCA_STATS_PKT64])[0]
    if TCA_STATS_QUEUE in stats:
        qlen, backlog, drops, requeues, overlimits = STATS_QUEUE.unpack_from(stats[TCA_STATS_QUEUE])
        q.update(drops=drops, overlimits=overlimits, requeues=requeues, backlog=backlog, qlen=qlen)
    return q


def dump_request(kind: int, seq: int, header: bytes) -> bytes:
    return NLMSGHDR.pack(NLMSGHDR.size + len(header), kind, NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + header


def namespace_id(pid: int) -> int:
    """Which network namespace process `pid` is in (its inode): nodes outside a namespace of their own, as
    Open vSwitch switches are, share the root one, and one read covers them all."""
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def socket_in_namespace_of(pid: int, protocol: int = socket.NETLINK_ROUTE) -> socket.socket:
    """A netlink socket (NETLINK_ROUTE unless `protocol` says) in the network namespace of process `pid`.

    A thread of its own enters the namespace (setns changes the calling
    thread only), makes the socket and ends there; this thread stays where it was.
    """
    made: dict = {}

    def enter() -> None:
        try:
            setns_to(pid, "net")
            made["socket"] = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, protocol)
        except BaseException as e:   # handed to the caller's thread
            made["error"] = e

    t = threading.Thread(target=enter, name=f"netns-{pid}")
    t.start()
    t.join()
    if "error" in made:
        raise made["error"]
    return made["socket"]


class NamespaceDumps:
    """Netlink dumps in one namespace: the socket is made on first use and kept until close(); one dump
    at a time (the sampler's thread and the runner's share a reader)."""

    def __init__(self, pid: int, protocol: int = socket.NETLINK_ROUTE, timeout: float = 5.0):
        self.pid, self.protocol, self.timeout = pid, protocol, timeout
        self._sock: socket.socket | None = None
        self._seq = 0
        self.lock = threading.Lock()
        self.closed = False

    def close(self) -> None:
        """For good: a sampler thread that outlived its run must not open the namespace again."""
        with self.lock:
            self.closed = True
            self.drop_socket()

    def drop_socket(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def dump(self, kind: int, header: bytes) -> list[tuple[int, bytes]]:
        """Sends a dump request of message type `kind` and returns its answer's messages (NLMSG_DONE ends
        it). Called with `lock` held. One interrupted by a change is made again once."""
        if self.closed:
            raise NetlinkError(f"netlink: the reader of process {self.pid}'s namespace is closed")
        try:
            return self._dump_or_drop(kind, header)
        except DumpInterrupted:
            return self._dump_or_drop(kind, header)

    def _dump_or_drop(self, kind: int, header: bytes) -> list[tuple[int, bytes]]:
        """Whatever ends a dump early (an error, a signal) leaves no socket behind, so that a late answer
        is never read as the next dump's."""
        try:
            return self._dump(kind, header)
        except BaseException:
            self.drop_socket()
            raise

    def _dump(self, kind: int, header: bytes) -> list[tuple[int, bytes]]:
        if self._sock is None:
            self._sock = socket_in_namespace_of(self.pid, self.protocol)
            self._sock.settimeout(self.timeout)
        self._seq += 1
        self._sock.send(dump_request(kind, self._seq, header))
        out: list[tuple[int, bytes]] = []
        while True:
            try:
                data = self._sock.recv(1 << 16)
            except socket.timeout:
                raise NetlinkError(f"netlink: no answer to a dump within {self.timeout:g} s") from None
            for msg_kind, payload in messages(data):
                if msg_kind == NLMSG_DONE:
                    return out
                out.append((msg_kind, payload))


class QdiscReader(NamespaceDumps):
    """Reads the qdiscs of one namespace."""

    def __init__(self, pid: int, timeout: float = 5.0):
        super().__init__(pid, socket.NETLINK_ROUTE, timeout)
        self._names: dict[int, str] = {}

    def qdiscs(self, devs: Collection[str] | None = None) -> list[dict]:
        """Every qdisc of the namespace, as parse_qdisc gives them; with `devs`, only those devices' root
        qdiscs: the others are skipped on their header, unparsed. The fidelity sampler reads ten times a
        second, and parsing every qdisc of a switch's namespace (the root one: every port and veth end)
        took 10 ms of a TCG guest's CPU per read, beside the traffic it judges (2026-11-28)."""
        with self.lock:
            found = self.dump(RTM_GETQDISC, TCMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0))
            payloads = [(TCMSG.unpack_from(p), p) for kind, p in found if kind == RTM_NEWQDISC]
            if any(head[1] not in self._names for head, _ in payloads):   # a device not seen yet
                links = self.dump(RTM_GETLINK, IFINFOMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0))
                self._names = dict(filter(None, (parse_link(p) for kind, p in links if kind == RTM_NEWLINK)))
        if devs is not None:
            wanted = {index for index, name in self._names.items() if name in devs}
            payloads = [(head, p) for head, p in payloads if head[3] == TC_H_ROOT and head[1] in wanted]
        return [parse_qdisc(p, self._names) for _, p in payloads]


def parse_qdisc_stats_by_dev(text: str) -> dict[str, dict[str, int]]:
    """`tc -s -j qdisc show` (every device of a namespace) -> {dev: root qdisc's packets and drops}."""
    try:
        doc = json.loads(text) if text.strip() else []
    except json.JSONDecodeError as e:
        raise ParseError(f"tc -s -j output is not JSON: {e}") from None
    return root_qdisc_counts(doc)


def root_qdisc_counts(qdiscs: list[dict]) -> dict[str, dict[str, int]]:
    """Qdiscs as `tc -s -j` or runners.linux.rtnetlink give them -> {dev: root qdisc's packets and drops}."""
    return {q["dev"]: {"packets": int(q.get("packets", 0)), "drops": int(q.get("drops", 0))}
            for q in qdiscs if q.get("root", False) and "dev" in q}
