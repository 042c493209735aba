"""Netlink requests that are answered: an attribute's bytes, a request sent, its acknowledgement (and
answer) awaited, the kernel's refusal with its extended acknowledgement's words.

Shared by the changes this process makes itself instead of starting `ip` (runners.linux.ipchanges over
rtnetlink, runners.linux.mptcp_pm over generic netlink): both ask as ip asks, and report a refusal in
ip's words (`Error: MESSAGE.` when the kernel gave one, else `RTNETLINK answers: STRERROR`).
"""
from __future__ import annotations

import itertools
import os
import socket
import struct
from collections.abc import Iterator

from runners.linux.rtnetlink import (NLM_F_DUMP, NLM_F_REQUEST, NLMSG_DONE, NLMSG_ERROR, NLMSGHDR, RTATTR,
                                     NetlinkError, attribute_records)

NLM_F_ACK = 0x4
NLM_F_CAPPED, NLM_F_ACK_TLVS = 0x100, 0x200   # in an acknowledgement's header
SOL_NETLINK, NETLINK_EXT_ACK, NLMSGERR_ATTR_MSG = 270, 11, 1


class Refused(OSError):
    """The kernel's refusal of a request: its errno, and its extended acknowledgement's message if any."""

    def __init__(self, code: int, message: str):
        super().__init__(code, os.strerror(code))
        self.message = message

    def as_ip_says(self) -> str:
        return f"Error: {self.message}.\n" if self.message else f"RTNETLINK answers: {self.strerror}\n"


def open_socket(protocol: int, timeout: float) -> socket.socket:
    """A netlink socket of `protocol` in the calling thread's network namespace, asking for the kernel's
    words with each refusal, as ip does."""
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, protocol)
    try:
        sock.setsockopt(SOL_NETLINK, NETLINK_EXT_ACK, 1)
        sock.settimeout(timeout)
        sock.bind((0, 0))
    except OSError:
        sock.close()
        raise
    return sock


def attr(kind: int, payload: bytes) -> bytes:
    length = RTATTR.size + len(payload)
    return RTATTR.pack(length, kind) + payload + bytes((4 - length % 4) % 4)


_sequence = itertools.count(1)   # next() is one step under the GIL: the hosts' threads share it


def send(sock: socket.socket, kind: int, flags: int, body: bytes) -> int:
    seq = next(_sequence) & 0xFFFFFFFF
    sock.send(NLMSGHDR.pack(NLMSGHDR.size + len(body), kind, NLM_F_REQUEST | flags, seq, 0) + body)
    return seq


def ask(sock: socket.socket, kind: int, flags: int, body: bytes) -> bytes | None:
    """One request, its acknowledgement awaited; the payload of its answer, if it had one before the
    acknowledgement. Refused with the kernel's errno and words if it refused."""
    seq = send(sock, kind, flags | NLM_F_ACK, body)
    answer = None
    while True:
        for msg_type, msg_flags, msg_seq, payload in split(sock.recv(65536)):
            if msg_seq != seq:
                continue
            if msg_type != NLMSG_ERROR:
                answer = payload
                continue
            code = -struct.unpack_from("=i", payload)[0]
            if code:
                raise Refused(code, ack_message(msg_flags, payload))
            return answer


def dump(sock: socket.socket, kind: int, body: bytes) -> Iterator[bytes]:
    """The payload of each answer to a dump request, to the dump's end; OSError with the kernel's errno
    if the dump failed."""
    seq = send(sock, kind, NLM_F_DUMP, body)
    while True:
        for msg_type, _flags, msg_seq, payload in split(sock.recv(65536)):
            if msg_seq != seq:
                continue
            if msg_type == NLMSG_DONE:
                return
            if msg_type == NLMSG_ERROR:
                code = -struct.unpack_from("=i", payload)[0]
                if code:
                    raise OSError(code, os.strerror(code))
                continue
            yield payload


def ifname_ok(name: str) -> bool:
    """A name the kernel could give a device (under IFNAMSIZ, no slash, not blank), as ip checks it."""
    return 0 < len(name.encode()) < 16 and "/" not in name and not name.isspace()


def ack_message(flags: int, payload: bytes) -> str:
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


def split(data: bytes) -> list[tuple[int, int, int, bytes]]:
    """A receive buffer -> [(type, flags, sequence, payload)]."""
    out, offset = [], 0
    while offset + NLMSGHDR.size <= len(data):
        length, kind, flags, seq, _port = NLMSGHDR.unpack_from(data, offset)
        if length < NLMSGHDR.size:
            break
        out.append((kind, flags, seq, data[offset + NLMSGHDR.size:offset + length]))
        offset += (length + 3) & ~3
    return out
