"""A batch of `ip` link and address changes done by this process over rtnetlink, as `ip -force -batch`
would do them.

Every namespace's setup brings its links up and gives them addresses with one `ip -batch` process;
in a TCG guest that start costs 0.2-0.3 s (ip loads libbpf, libelf, libmnl and libcap first), and every
host of a network pays it at once. The forms the testbed writes (topologies.plan, topologies.events,
runners.pipeline.network) are few:

    link set dev NAME up|down
    link set dev NAME gso_max_segs N
    addr add|replace ADDRESS/PREFIX dev NAME [nodad]
    addr flush dev NAME [scope global]

A batch made only of these is done here, by the calling thread, in its network namespace (a host
spawner's thread, runners.linux.nsspawn); any other line sends the whole batch to `ip` (`parse_lines`
says None). As with `-force`, every line is tried, and a failed one reports `RTNETLINK answers: ...`
followed by `Command failed FILE:N`, which runners.linux.ipbatch reads back per command.
"""
from __future__ import annotations

import errno
import ipaddress
import itertools
import os
import socket
import struct
from dataclasses import dataclass

from runners.linux.rtnetlink import (IFINFOMSG, NLM_F_DUMP, NLM_F_REQUEST, NLMSG_DONE, NLMSG_ERROR, NLMSGHDR,
                                     RTATTR, RTM_NEWLINK, NetlinkError, attribute_records)

RTM_NEWADDR, RTM_DELADDR, RTM_GETADDR = 20, 21, 22
NLM_F_ACK, NLM_F_REPLACE, NLM_F_EXCL, NLM_F_CREATE = 0x4, 0x100, 0x200, 0x400
NLM_F_CAPPED, NLM_F_ACK_TLVS = 0x100, 0x200   # in an acknowledgement's header
SOL_NETLINK, NETLINK_EXT_ACK, NLMSGERR_ATTR_MSG = 270, 11, 1
IFF_UP = 0x1
IFLA_GSO_MAX_SEGS = 40
IFA_ADDRESS, IFA_LOCAL, IFA_FLAGS = 1, 2, 8
IFA_F_NODAD = 0x02
RT_SCOPE_UNIVERSE = 0
ANSWER_S = 10.0   # how long the kernel's answer to one change may take

IFADDRMSG = struct.Struct("=BBBBI")    # family, prefix length, flags, scope, index


@dataclass(frozen=True)
class Change:
    kind: str          # "up", "down", "gso_max_segs", "addr add", "addr replace", "flush"
    dev: str
    value: str = ""    # the segment count, the address with its prefix
    nodad: bool = False
    global_only: bool = False


def parse_lines(options: tuple[str, ...], lines: tuple[str, ...]) -> list[Change] | None:
    """The batch's lines as changes; None if any line (or the batch's options) is not one of the forms
    above, or names a value that would not parse."""
    if options not in ((), ("-4",), ("-6",)):
        return None
    family = {"-4": 4, "-6": 6}.get(options[0]) if options else None
    out = []
    for line in lines:
        change = _parse_line(line.split(), family)
        if change is None:
            return None
        out.append(change)
    return out


def _parse_line(w: list[str], family: int | None) -> Change | None:
    if len(w) >= 5 and w[:3] == ["link", "set", "dev"] and _name_ok(w[3]):
        if len(w) == 5 and w[4] in ("up", "down"):
            return Change(w[4], w[3])
        if len(w) == 6 and w[4] == "gso_max_segs" and w[5].isdigit() and 0 < int(w[5]) < 2 ** 16:
            return Change("gso_max_segs", w[3], w[5])
        return None
    if len(w) in (5, 6) and w[0] == "addr" and w[1] in ("add", "replace") and w[3] == "dev" and _name_ok(w[4]):
        try:
            iface = ipaddress.ip_interface(w[2])
        except ValueError:
            return None
        if "/" not in w[2] or (family is not None and iface.version != family) or w[5:] not in ([], ["nodad"]):
            return None
        return Change(f"addr {w[1]}", w[4], w[2], nodad=w[5:] == ["nodad"])
    if w[:3] == ["addr", "flush", "dev"] and len(w) in (4, 6) and _name_ok(w[3]) and family is None:
        if len(w) == 6 and w[4:] != ["scope", "global"]:
            return None
        return Change("flush", w[3], global_only=len(w) == 6)
    return None


def _name_ok(name: str) -> bool:
    return 0 < len(name.encode()) < 16 and "/" not in name and not name.isspace()


def apply(changes: list[Change], batch_file: str | None) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `ip -force -batch batch_file` for these changes, done here; with no
    batch file, of the one `ip` command the single change stands for (it exits 2 when refused)."""
    errors, rc = [], 0
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, socket.NETLINK_ROUTE) as sock:
        sock.setsockopt(SOL_NETLINK, NETLINK_EXT_ACK, 1)   # the kernel's own words for a refusal, as ip asks
        sock.settimeout(ANSWER_S)
        sock.bind((0, 0))
        for n, change in enumerate(changes, start=1):
            try:
                _apply_one(sock, change)
            except _NoDevice:
                errors.append(f"Cannot find device \"{change.dev}\"\n")
                rc = 1
            except _Refused as e:
                errors.append(f"Error: {e.message}.\n" if e.message else f"RTNETLINK answers: {e.strerror}\n")
                rc = 2
            except OSError as e:   # no answer in time, or the socket failed: the change's fate is unknown
                errors.append(f"RTNETLINK: {e.strerror or e or 'no answer'}\n")
                rc = 2
            else:
                continue
            if batch_file:
                errors.append(f"Command failed {batch_file}:{n}\n")
    return (min(rc, 1) if batch_file else rc), "", "".join(errors)


class _NoDevice(OSError):
    pass


class _Refused(OSError):
    """The kernel's refusal of a change: its errno, and its extended acknowledgement's message if any."""

    def __init__(self, code: int, message: str):
        super().__init__(code, os.strerror(code))
        self.message = message


def _apply_one(sock: socket.socket, c: Change) -> None:
    try:
        index = socket.if_nametoindex(c.dev)   # in this thread's namespace (an ioctl on a socket made here)
    except OSError:
        raise _NoDevice() from None
    if c.kind in ("up", "down"):
        _ask(sock, RTM_NEWLINK, 0, IFINFOMSG.pack(0, 0, index, IFF_UP if c.kind == "up" else 0, IFF_UP))
    elif c.kind == "gso_max_segs":
        _ask(sock, RTM_NEWLINK, 0, IFINFOMSG.pack(0, 0, index, 0, 0) + _attr(IFLA_GSO_MAX_SEGS,
                                                                              struct.pack("=I", int(c.value))))
    elif c.kind.startswith("addr "):
        iface = ipaddress.ip_interface(c.value)
        family = socket.AF_INET if iface.version == 4 else socket.AF_INET6
        packed = iface.ip.packed
        body = IFADDRMSG.pack(family, iface.network.prefixlen, IFA_F_NODAD if c.nodad else 0, RT_SCOPE_UNIVERSE,
                              index) + _attr(IFA_LOCAL, packed) + _attr(IFA_ADDRESS, packed)
        if c.nodad:
            body += _attr(IFA_FLAGS, struct.pack("=I", IFA_F_NODAD))
        _ask(sock, RTM_NEWADDR, NLM_F_CREATE | (NLM_F_REPLACE if c.kind == "addr replace" else NLM_F_EXCL), body)
    else:
        for family, prefixlen, scope, rest in _addresses(sock, index):
            if not c.global_only or scope == RT_SCOPE_UNIVERSE:
                try:
                    _ask(sock, RTM_DELADDR, 0, IFADDRMSG.pack(family, prefixlen, 0, scope, index) + rest)
                except OSError as e:   # a secondary address, gone with its primary, as `ip` tolerates
                    if e.errno != errno.EADDRNOTAVAIL:
                        raise


def _attr(kind: int, payload: bytes) -> bytes:
    length = RTATTR.size + len(payload)
    return RTATTR.pack(length, kind) + payload + bytes((4 - length % 4) % 4)


_sequence = itertools.count(1)   # next() is one step under the GIL: the hosts' threads share it


def _send(sock: socket.socket, kind: int, flags: int, body: bytes) -> int:
    seq = next(_sequence) & 0xFFFFFFFF
    sock.send(NLMSGHDR.pack(NLMSGHDR.size + len(body), kind, NLM_F_REQUEST | flags, seq, 0) + body)
    return seq


def _ask(sock: socket.socket, kind: int, flags: int, body: bytes) -> None:
    """One change, its acknowledgement awaited: OSError with the kernel's errno if it refused."""
    seq = _send(sock, kind, flags | NLM_F_ACK, body)
    while True:
        for msg_type, msg_flags, msg_seq, payload in _messages(sock.recv(65536)):
            if msg_type == NLMSG_ERROR and msg_seq == seq:
                code = -struct.unpack_from("=i", payload)[0]
                if code:
                    raise _Refused(code, _ack_message(msg_flags, payload))
                return


def _addresses(sock: socket.socket, index: int) -> list[tuple[int, int, int, bytes]]:
    """(family, prefix length, scope, the IFA_LOCAL/IFA_ADDRESS attributes) of each address of the link."""
    seq = _send(sock, RTM_GETADDR, NLM_F_DUMP, IFADDRMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0))
    out = []
    while True:
        for msg_type, _flags, msg_seq, payload in _messages(sock.recv(65536)):
            if msg_seq != seq:
                continue
            if msg_type == NLMSG_DONE:
                return out
            if msg_type == NLMSG_ERROR:
                code = -struct.unpack_from("=i", payload)[0]
                raise OSError(code, os.strerror(code))
            family, prefixlen, _flags, scope, ifindex = IFADDRMSG.unpack_from(payload)
            if ifindex == index:
                rest = b"".join(_attr(kind, value) for kind, value in attribute_records(payload, IFADDRMSG.size)
                                if kind in (IFA_LOCAL, IFA_ADDRESS))
                out.append((family, prefixlen, scope, rest))


def _ack_message(flags: int, payload: bytes) -> str:
    """The extended acknowledgement's text (NLMSGERR_ATTR_MSG), after the error code and the request
    echoed back (only its header, NLM_F_CAPPED, or all of it); "" if the kernel gave none."""
    if not flags & NLM_F_ACK_TLVS or len(payload) < 4 + NLMSGHDR.size:
        return ""
    echoed = NLMSGHDR.size if flags & NLM_F_CAPPED else NLMSGHDR.unpack_from(payload, 4)[0]
    try:
        records = attribute_records(payload, 4 + ((echoed + 3) & ~3))
    except NetlinkError:   # a record running past the message: no words to give
        return ""
    return next((value.split(b"\0")[0].decode(errors="replace") for kind, value in records
                 if kind == NLMSGERR_ATTR_MSG), "")


def _messages(data: bytes) -> list[tuple[int, int, int, bytes]]:
    """A receive buffer -> [(type, flags, sequence, payload)]."""
    out, offset = [], 0
    while offset + NLMSGHDR.size <= len(data):
        length, kind, flags, seq, _port = NLMSGHDR.unpack_from(data, offset)
        if length < NLMSGHDR.size:
            break
        out.append((kind, flags, seq, data[offset + NLMSGHDR.size:offset + length]))
        offset += (length + 3) & ~3
    return out
