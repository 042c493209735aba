"""A batch of `ip` link, address and MPTCP changes done by this process over netlink, as `ip -force -batch`
would do them.

Every namespace's setup brings its links up and gives them addresses with one `ip -batch` process;
in a TCG guest that start costs 0.2-0.3 s (ip loads libbpf, libelf, libmnl and libcap first), and every
host of a network pays it at once. The forms the testbed writes (topologies.plan, topologies.events,
runners.pipeline.network) are few:

    link set dev NAME up|down
    link set dev NAME gso_max_segs N
    addr add|replace ADDRESS/PREFIX dev NAME [nodad]
    addr flush dev NAME [scope global]
    mptcp endpoint|limits ...      (the forms runners.linux.mptcp_pm lists, over generic netlink)

A batch made only of these is done here, by the calling thread, in its network namespace (a host
spawner's thread, runners.linux.nsspawn); any other line sends the whole batch to `ip` (`parse_lines`
says None). As with `-force`, every line is tried, and a failed one reports `RTNETLINK answers: ...`
followed by `Command failed FILE:N`, which runners.linux.ipbatch reads back per command.
"""
from __future__ import annotations

import contextlib
import errno
import ipaddress
import socket
import struct
from dataclasses import dataclass

from runners.linux import mptcp_pm
from runners.linux.mptcp_pm import MptcpChange
from runners.linux.nlrequest import Refused, ask, attr, dump, ifname_ok, open_socket
from runners.linux.rtnetlink import IFINFOMSG, RTM_NEWLINK, attribute_records

RTM_NEWADDR, RTM_DELADDR, RTM_GETADDR = 20, 21, 22
NLM_F_REPLACE, NLM_F_EXCL, NLM_F_CREATE = 0x100, 0x200, 0x400
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


def parse_lines(options: tuple[str, ...], lines: tuple[str, ...]) -> list[Change | MptcpChange] | None:
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


def _parse_line(w: list[str], family: int | None) -> Change | MptcpChange | None:
    if w[:1] == ["mptcp"]:
        return mptcp_pm.parse_words(w[1:]) if family is None else None
    if len(w) >= 5 and w[:3] == ["link", "set", "dev"] and ifname_ok(w[3]):
        if len(w) == 5 and w[4] in ("up", "down"):
            return Change(w[4], w[3])
        if len(w) == 6 and w[4] == "gso_max_segs" and w[5].isdigit() and 0 < int(w[5]) < 2 ** 16:
            return Change("gso_max_segs", w[3], w[5])
        return None
    if len(w) in (5, 6) and w[0] == "addr" and w[1] in ("add", "replace") and w[3] == "dev" and ifname_ok(w[4]):
        try:
            iface = ipaddress.ip_interface(w[2])
        except ValueError:
            return None
        if "/" not in w[2] or (family is not None and iface.version != family) or w[5:] not in ([], ["nodad"]):
            return None
        return Change(f"addr {w[1]}", w[4], w[2], nodad=w[5:] == ["nodad"])
    if w[:3] == ["addr", "flush", "dev"] and len(w) in (4, 6) and ifname_ok(w[3]) and family is None:
        if len(w) == 6 and w[4:] != ["scope", "global"]:
            return None
        return Change("flush", w[3], global_only=len(w) == 6)
    return None


def apply(changes: list[Change | MptcpChange], batch_file: str | None) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `ip -force -batch batch_file` for these changes, done here; with no
    batch file, of the one `ip` command the single change stands for (it exits 2 when refused).
    mptcp_pm.UseTheProgram, nothing done, where ip itself is to run them."""
    errors, rc = [], 0
    mptcp_pm.check_devices(changes)
    with open_socket(socket.NETLINK_ROUTE, ANSWER_S) as sock, contextlib.ExitStack() as more:
        genl = family = None
        if any(isinstance(c, MptcpChange) for c in changes):
            genl = more.enter_context(open_socket(mptcp_pm.NETLINK_GENERIC, ANSWER_S))
            family = mptcp_pm.family_id(genl)
        for n, change in enumerate(changes, start=1):
            try:
                if isinstance(change, MptcpChange):
                    mptcp_pm.apply(genl, family, change)
                else:
                    _apply_one(sock, change)
            except _NoDevice:
                errors.append(f"Cannot find device \"{change.dev}\"\n")
                rc = 1
            except Refused as e:
                errors.append(e.as_ip_says())
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


def _apply_one(sock: socket.socket, c: Change) -> None:
    try:
        index = socket.if_nametoindex(c.dev)   # in this thread's namespace (an ioctl on a socket made here)
    except OSError:
        raise _NoDevice() from None
    if c.kind in ("up", "down"):
        ask(sock, RTM_NEWLINK, 0, IFINFOMSG.pack(0, 0, index, IFF_UP if c.kind == "up" else 0, IFF_UP))
    elif c.kind == "gso_max_segs":
        ask(sock, RTM_NEWLINK, 0, IFINFOMSG.pack(0, 0, index, 0, 0) + attr(IFLA_GSO_MAX_SEGS,
                                                                              struct.pack("=I", int(c.value))))
    elif c.kind.startswith("addr "):
        iface = ipaddress.ip_interface(c.value)
        family = socket.AF_INET if iface.version == 4 else socket.AF_INET6
        packed = iface.ip.packed
        body = IFADDRMSG.pack(family, iface.network.prefixlen, IFA_F_NODAD if c.nodad else 0, RT_SCOPE_UNIVERSE,
                              index) + attr(IFA_LOCAL, packed) + attr(IFA_ADDRESS, packed)
        if c.nodad:
            body += attr(IFA_FLAGS, struct.pack("=I", IFA_F_NODAD))
        ask(sock, RTM_NEWADDR, NLM_F_CREATE | (NLM_F_REPLACE if c.kind == "addr replace" else NLM_F_EXCL), body)
    else:
        for family, prefixlen, scope, rest in _addresses(sock, index):
            if not c.global_only or scope == RT_SCOPE_UNIVERSE:
                try:
                    ask(sock, RTM_DELADDR, 0, IFADDRMSG.pack(family, prefixlen, 0, scope, index) + rest)
                except OSError as e:   # a secondary address, gone with its primary, as `ip` tolerates
                    if e.errno != errno.EADDRNOTAVAIL:
                        raise


def _addresses(sock: socket.socket, index: int) -> list[tuple[int, int, int, bytes]]:
    """(family, prefix length, scope, the IFA_LOCAL/IFA_ADDRESS attributes) of each address of the link."""
    out = []
    for payload in dump(sock, RTM_GETADDR, IFADDRMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0)):
        family, prefixlen, _flags, scope, ifindex = IFADDRMSG.unpack_from(payload)
        if ifindex == index:
            rest = b"".join(attr(kind, value) for kind, value in attribute_records(payload, IFADDRMSG.size)
                            if kind in (IFA_LOCAL, IFA_ADDRESS))
            out.append((family, prefixlen, scope, rest))
    return out
