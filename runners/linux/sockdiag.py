"""The client's MPTCP subflows over sock_diag (NETLINK_SOCK_DIAG): no `ss` process started.

A run samples the client's subflows while its traffic flows: which joins were made, each subflow's
bytes, RTT and backup flag, and the window its peer offers (what tells a sender held to its window,
issue 30). `ss -tinMO` cost 0.3-0.5 s of a TCG guest's CPU per sample (2026-11-28), taken from the
emulated network the run measures. Here a sock_diag socket, made once inside the client's namespace
(runners.linux.rtnetlink.NamespaceDumps), dumps the established TCP sockets of both families with
their tcp_info and, for an MPTCP subflow, its ULP information: what `ss` itself asks the kernel for.

Each subflow is given with the fields that runners.linux.ss.parse_ss_subflows reads from `ss`, named and
formatted as there (the token as ss prints it), so that a run's records keep their fields, and with
the fields of ss.send_windows.

The parsing (`parse_socket`) is pure and tested on recorded bytes; `SubflowReader` touches the kernel.
"""
from __future__ import annotations

import ipaddress
import socket
import struct

from runners.linux.rtnetlink import NamespaceDumps, attributes

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
TCP_ESTABLISHED = 1
INET_DIAG_INFO, INET_DIAG_ULP_INFO = 2, 19
INET_ULP_INFO_NAME, INET_ULP_INFO_MPTCP = 1, 3
MPTCP_SUBFLOW_ATTR_TOKEN_REM, MPTCP_SUBFLOW_ATTR_TOKEN_LOC = 1, 2
MPTCP_SUBFLOW_ATTR_FLAGS, MPTCP_SUBFLOW_ATTR_ID_REM, MPTCP_SUBFLOW_ATTR_ID_LOC = 8, 9, 10
INET_DIAG_NOCOOKIE = 0xFFFFFFFF

# inet_diag_req_v2: family, protocol, extensions, pad, states, then inet_diag_sockid (ports big-endian,
# addresses, interface, cookie)
SOCKID = struct.Struct("=HH16s16sIII")
REQ_V2 = struct.Struct("=BBBxI")
# inet_diag_msg: family, state, timer, retransmits, sockid, expires, rqueue, wqueue, uid, inode
DIAG_MSG = struct.Struct("=BBBB")
DIAG_MSG_TAIL = struct.Struct("=IIIII")
DIAG_MSG_SIZE = DIAG_MSG.size + SOCKID.size + DIAG_MSG_TAIL.size

# struct tcp_info (include/uapi/linux/tcp.h) grows only at its end; the offsets of the fields read here
# (the last of them, tcpi_snd_wnd, came with Linux 5.4; the kernel gives as much as it has)
TCPI_APP_LIMITED_BYTE = 7        # tcpi_delivery_rate_app_limited: bit 0 of the 8th byte (x86's bit order)
TCPI_U32 = {"snd_mss": 16, "rtt_us": 68, "rttvar_us": 72, "snd_cwnd": 80}
TCPI_U64 = {"bytes_acked": 120, "bytes_received": 128, "bytes_sent": 200}
TCPI_SND_WND = 228

# MPTCP_SUBFLOW_FLAG_* bits, as `ss` prints them after "tcp-ulp-mptcp flags:" (iproute2's ss.c)
FLAG_LETTERS = ((0, "M"), (1, "m"), (2, "J"), (3, "j"), (4, "B"), (5, "b"), (6, "e"), (7, "c"), (8, "v"))


def dump_request_header(family: int) -> bytes:
    """A dump of `family`'s established TCP sockets with their tcp_info and, for a reader with CAP_NET_ADMIN
    over the namespace (the runner is root), each one's ULP information: without it no socket shows as an
    MPTCP subflow (tcp_diag_get_aux)."""
    sockid = SOCKID.pack(0, 0, b"\0" * 16, b"\0" * 16, 0, INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE)
    return REQ_V2.pack(family, socket.IPPROTO_TCP, 1 << (INET_DIAG_INFO - 1), 1 << TCP_ESTABLISHED) + sockid


def _address(family: int, raw: bytes) -> str:
    if family == socket.AF_INET:
        return str(ipaddress.IPv4Address(raw[:4]))
    address = ipaddress.IPv6Address(raw)
    # an IPv4 subflow of an AF_INET6 MPTCP socket has v4-mapped addresses: named as IPv4, as ss is read
    return str(address.ipv4_mapped or address)


def _flags_text(flags: int) -> str:
    return "".join(letter for bit, letter in FLAG_LETTERS if flags & (1 << bit))


def _tcp_info(raw: bytes) -> dict:
    """The fields of tcp_info that the records and the window check read; those past what the kernel
    gave are left out."""
    out: dict = {}
    if len(raw) > TCPI_APP_LIMITED_BYTE:
        out["app_limited"] = bool(raw[TCPI_APP_LIMITED_BYTE] & 1)
    for name, offset in TCPI_U32.items():
        if len(raw) >= offset + 4:
            out[name] = struct.unpack_from("=I", raw, offset)[0]
    for name, offset in TCPI_U64.items():
        if len(raw) >= offset + 8:
            out[name] = struct.unpack_from("=Q", raw, offset)[0]
    if len(raw) >= TCPI_SND_WND + 4:
        out["snd_wnd"] = struct.unpack_from("=I", raw, TCPI_SND_WND)[0]
    return out


def parse_socket(payload: bytes) -> dict | None:
    """A SOCK_DIAG_BY_FAMILY answer -> the subflow as ss.parse_ss_subflows gives it, with cwnd, mss,
    snd_wnd, send_q (ss's Send-Q) and app_limited; None for a TCP socket that is no MPTCP subflow."""
    family, _state, _timer, _retrans = DIAG_MSG.unpack_from(payload)
    sport, dport, src, dst, _if, _c0, _c1 = SOCKID.unpack_from(payload, DIAG_MSG.size)
    _expires, _rqueue, wqueue, _uid, _inode = DIAG_MSG_TAIL.unpack_from(payload, DIAG_MSG.size + SOCKID.size)
    attrs = attributes(payload, DIAG_MSG_SIZE)
    ulp = attributes(attrs.get(INET_DIAG_ULP_INFO, b""))
    if ulp.get(INET_ULP_INFO_NAME, b"").split(b"\0", 1)[0] != b"mptcp":
        return None
    local, remote = _address(family, src), _address(family, dst)
    entry: dict = {"local": local, "local_port": socket.ntohs(sport), "remote": remote,
                   "remote_port": socket.ntohs(dport), "family": "ipv6" if ":" in local else "ipv4"}
    info = _tcp_info(attrs.get(INET_DIAG_INFO, b""))
    # as ss prints them: the byte counters and the RTT only when not zero
    for key in ("bytes_acked", "bytes_received", "bytes_sent"):
        if info.get(key):
            entry[key] = info[key]
    if info.get("rtt_us"):
        entry["rtt_ms"] = info["rtt_us"] / 1000
    mptcp = attributes(ulp.get(INET_ULP_INFO_MPTCP, b""))
    token_and_ids = (MPTCP_SUBFLOW_ATTR_TOKEN_REM, MPTCP_SUBFLOW_ATTR_TOKEN_LOC, MPTCP_SUBFLOW_ATTR_ID_REM,
                     MPTCP_SUBFLOW_ATTR_ID_LOC)
    if all(k in mptcp for k in token_and_ids):   # ss prints the token only with all four
        entry.update(token=f"{struct.unpack('=I', mptcp[MPTCP_SUBFLOW_ATTR_TOKEN_LOC][:4])[0]:04x}",
                     remote_id=mptcp[MPTCP_SUBFLOW_ATTR_ID_REM][0], local_id=mptcp[MPTCP_SUBFLOW_ATTR_ID_LOC][0])
    flags = struct.unpack("=I", mptcp[MPTCP_SUBFLOW_ATTR_FLAGS][:4])[0] if MPTCP_SUBFLOW_ATTR_FLAGS in mptcp else 0
    if flags:
        entry["flags"] = _flags_text(flags)
        entry["backup"] = "b" in entry["flags"] or "B" in entry["flags"]
    entry.update(cwnd=info.get("snd_cwnd"), mss=info.get("snd_mss"), snd_wnd=info.get("snd_wnd"),
                 send_q=wqueue, app_limited=info.get("app_limited", False))
    return entry


# What ss.parse_ss_subflows gives: a run's record keeps these; the others serve the window check
SS_FIELDS = ("local", "local_port", "remote", "remote_port", "family", "bytes_acked", "bytes_received",
             "bytes_sent", "rtt_ms", "token", "remote_id", "local_id", "flags", "backup")


def as_ss_subflow(entry: dict) -> dict:
    return {k: entry[k] for k in SS_FIELDS if k in entry}


def send_window(entry: dict) -> dict | None:
    """A subflow's window as ss.send_windows gives it, or None where ss gives none: no RTT or token yet,
    a kernel without tcpi_snd_wnd, or a zero window, which `ss` does not print (the window check was
    made, and its runs recorded, with what `ss` printed)."""
    if not entry.get("rtt_ms") or not entry.get("token") or not entry.get("snd_wnd"):
        return None
    return {"local": entry["local"], "token": entry["token"], "snd_wnd": entry["snd_wnd"],
            "rtt_ms": entry["rtt_ms"], "mss": entry.get("mss") or 1448, "send_q": entry["send_q"],
            "app_limited": entry["app_limited"], "bytes_acked": entry.get("bytes_acked", 0)}


class SubflowReader(NamespaceDumps):
    """The MPTCP subflows among the established TCP sockets of one namespace."""

    def __init__(self, pid: int, timeout: float = 5.0):
        super().__init__(pid, NETLINK_SOCK_DIAG, timeout)

    def subflows(self) -> list[dict]:
        out = []
        with self.lock:
            for family in (socket.AF_INET, socket.AF_INET6):
                for kind, payload in self.dump(SOCK_DIAG_BY_FAMILY, dump_request_header(family)):
                    entry = parse_socket(payload) if kind == SOCK_DIAG_BY_FAMILY else None
                    if entry is not None:
                        out.append(entry)
        return out
