"""`ip mptcp` endpoint and limit commands done by this process over generic netlink, as iproute2's
ip/ipmptcp.c does them, with its output.

Before every MPTCP run each host's endpoints are flushed and set, and during the rest between runs
every host's endpoints are read: an `ip` process per host each time, 0.05-0.2 s in a TCG guest. The
forms the testbed writes (runners.pipeline.mptcp_config, runners.collect.counters) are few:

    mptcp endpoint flush
    mptcp endpoint add ADDRESS [dev NAME] [port N] [signal|subflow|backup|fullmesh]...
    mptcp endpoint change ADDRESS backup|nobackup
    mptcp limits set [subflows N] [add_addr_accepted N]
    mptcp endpoint show            (on its own)

Each becomes the request ip sends (the same attributes in the same order) to the `mptcp_pm` family;
`show` prints each endpoint as ip prints it. Where ip would stop before asking the kernel (a device
that does not exist) or cannot ask (no `mptcp_pm` family), UseTheProgram sends the batch to `ip`,
which then says so in its own words.
"""
from __future__ import annotations

import ipaddress
import socket
import struct
from dataclasses import dataclass

from runners.linux.nlrequest import ask, attr, dump, ifname_ok, open_socket
from runners.linux.rtnetlink import attribute_records

NETLINK_GENERIC = 16
GENL_ID_CTRL, CTRL_CMD_GETFAMILY, CTRL_ATTR_FAMILY_ID, CTRL_ATTR_FAMILY_NAME = 0x10, 3, 1, 2
GENLMSGHDR = struct.Struct("=BBH")    # command, version, reserved
MPTCP_PM_NAME, MPTCP_PM_VER = "mptcp_pm", 1
CMD_ADD_ADDR, CMD_GET_ADDR, CMD_FLUSH_ADDRS, CMD_SET_LIMITS, CMD_SET_FLAGS = 1, 3, 4, 5, 7
ATTR_ADDR, ATTR_RCV_ADD_ADDRS, ATTR_SUBFLOWS = 1, 2, 3
ADDR_FAMILY, ADDR_ID, ADDR_ADDR4, ADDR_ADDR6, ADDR_PORT, ADDR_FLAGS, ADDR_IF_IDX = 1, 2, 3, 4, 5, 6, 7
NLA_F_NESTED = 0x8000
# ip's names for the flags, in the order it prints them
FLAGS = {"signal": 0x1, "subflow": 0x2, "backup": 0x4, "fullmesh": 0x8, "implicit": 0x10}
SETTABLE = ("signal", "subflow", "backup", "fullmesh")

SHOW_ARGV = ["ip", "mptcp", "endpoint", "show"]


class UseTheProgram(Exception):
    """Not for this process: `ip` itself is to run the batch (nothing of it was done here)."""


@dataclass(frozen=True)
class MptcpChange:
    kind: str                   # "flush", "add", "change", "limits"
    address: str = ""
    dev: str = ""
    port: int = 0
    flags: int = 0
    limits: tuple = ()          # ((attribute, value), ...) in ip's order


def parse_words(w: list[str]) -> MptcpChange | None:
    """The words after `mptcp` as a change; None for anything else (then `ip` runs the batch)."""
    if w == ["endpoint", "flush"]:
        return MptcpChange("flush")
    if len(w) >= 3 and w[:2] == ["endpoint", "add"] and _address(w[2]):
        return _parse_add(w[2], w[3:])
    if len(w) == 4 and w[:2] == ["endpoint", "change"] and _address(w[2]) and w[3] in ("backup", "nobackup"):
        return MptcpChange("change", address=w[2], flags=FLAGS["backup"] if w[3] == "backup" else 0)
    if len(w) in (4, 6) and w[:2] == ["limits", "set"]:
        given = dict(zip(w[2::2], w[3::2]))
        if set(given) - {"subflows", "add_addr_accepted"} or len(given) * 2 != len(w) - 2 or \
                not all(v.isdigit() and int(v) < 2 ** 32 for v in given.values()):
            return None
        limits = tuple((attr, int(given[name])) for name, attr in (("add_addr_accepted", ATTR_RCV_ADD_ADDRS),
                                                                   ("subflows", ATTR_SUBFLOWS)) if name in given)
        return MptcpChange("limits", limits=limits)
    return None


def _parse_add(address: str, rest: list[str]) -> MptcpChange | None:
    dev, port, flags, i = "", 0, 0, 0
    while i < len(rest):
        word = rest[i]
        if word in SETTABLE:
            flags |= FLAGS[word]
            i += 1
        elif word in ("dev", "port") and i + 1 < len(rest):
            value = rest[i + 1]
            if word == "dev":
                if not ifname_ok(value):
                    return None
                dev = value
            elif value.isdigit() and 0 < int(value) < 2 ** 16:
                port = int(value)
            else:
                return None
            i += 2
        else:
            return None
    # what ip refuses before asking the kernel: left to ip, which says it
    if (flags & FLAGS["signal"] and flags & FLAGS["fullmesh"]) or (port and not flags & FLAGS["signal"]):
        return None
    return MptcpChange("add", address=address, dev=dev, port=port, flags=flags)


def _address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def family_id(sock: socket.socket) -> int:
    """The `mptcp_pm` family's number (the kernel's, the same in every namespace); UseTheProgram
    without one (no MPTCP in this kernel: ip says so)."""
    global _family
    if _family is None:
        name = attr(CTRL_ATTR_FAMILY_NAME, MPTCP_PM_NAME.encode() + b"\0")
        try:
            payload = ask(sock, GENL_ID_CTRL, 0, GENLMSGHDR.pack(CTRL_CMD_GETFAMILY, 1, 0) + name)
            found = dict(attribute_records(payload or b"", GENLMSGHDR.size)).get(CTRL_ATTR_FAMILY_ID)
        except OSError:
            found = None
        if found is None:
            raise UseTheProgram()
        _family = struct.unpack("=H", found[:2])[0]
    return _family


_family: int | None = None


def apply(sock: socket.socket, family: int, change: MptcpChange) -> None:
    """One change, acknowledged; nlrequest.Refused with the kernel's words if it refused."""
    _, body = request(change)
    ask(sock, family, 0, body)


def show(timeout: float) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `ip mptcp endpoint show` in the calling thread's namespace: a dump
    that fails part-way keeps the lines before, as ip's does."""
    with open_socket(NETLINK_GENERIC, timeout) as sock:
        lines: list[str] = []
        try:
            complete = dump_lines(sock, family_id(sock), lines)
        except OSError:
            complete = False
        return (0, "".join(lines), "") if complete else (2, "".join(lines), "Dump terminated\n")


def check_devices(changes) -> None:
    """UseTheProgram when a change names a device this namespace lacks (ip stops at it, and the batch)."""
    for c in changes:
        if isinstance(c, MptcpChange) and c.dev:
            try:
                socket.if_nametoindex(c.dev)
            except OSError:
                raise UseTheProgram() from None


def request(change: MptcpChange) -> tuple[int, bytes]:
    """(command, the genetlink header and attributes) of a change, as ip builds it."""
    if change.kind == "flush":
        return CMD_FLUSH_ADDRS, GENLMSGHDR.pack(CMD_FLUSH_ADDRS, MPTCP_PM_VER, 0)
    if change.kind == "limits":
        body = b"".join(attr(kind, struct.pack("=I", value)) for kind, value in change.limits)
        return CMD_SET_LIMITS, GENLMSGHDR.pack(CMD_SET_LIMITS, MPTCP_PM_VER, 0) + body
    cmd = CMD_ADD_ADDR if change.kind == "add" else CMD_SET_FLAGS
    address = ipaddress.ip_address(change.address)
    nested = b""
    if change.flags:
        nested += attr(ADDR_FLAGS, struct.pack("=I", change.flags))
    if change.dev:
        nested += attr(ADDR_IF_IDX, struct.pack("=I", socket.if_nametoindex(change.dev)))
    if change.port:
        nested += attr(ADDR_PORT, struct.pack("=H", change.port))
    family = socket.AF_INET if address.version == 4 else socket.AF_INET6
    nested += attr(ADDR_FAMILY, struct.pack("=H", family))
    nested += attr(ADDR_ADDR4 if address.version == 4 else ADDR_ADDR6, address.packed)
    return cmd, GENLMSGHDR.pack(cmd, MPTCP_PM_VER, 0) + attr(ATTR_ADDR | NLA_F_NESTED, nested)


def show_request() -> bytes:
    return GENLMSGHDR.pack(CMD_GET_ADDR, MPTCP_PM_VER, 0)


def endpoint_line(payload: bytes) -> str | None:
    """One endpoint of a GET_ADDR dump as `ip mptcp endpoint show` prints it; None without an address
    attribute (ip stops its dump there)."""
    attrs = dict(attribute_records(payload, GENLMSGHDR.size))
    nested = next((v for k, v in attrs.items() if k & ~NLA_F_NESTED == ATTR_ADDR), None)
    if nested is None:
        return None
    a = dict(attribute_records(nested))
    out = []
    family = a[ADDR_FAMILY][0] if ADDR_FAMILY in a else socket.AF_UNSPEC
    raw = a.get(ADDR_ADDR4 if family == socket.AF_INET else ADDR_ADDR6)
    if raw is not None:
        out.append(socket.inet_ntop(socket.AF_INET if family == socket.AF_INET else socket.AF_INET6, raw))
    port = struct.unpack("=H", a[ADDR_PORT][:2])[0] if ADDR_PORT in a else 0
    if port:
        out.append(f"port {port}")
    if ADDR_ID in a:
        out.append(f"id {a[ADDR_ID][0]}")
    if ADDR_FLAGS in a:
        flags = struct.unpack("=I", a[ADDR_FLAGS][:4])[0]
        if flags & FLAGS["implicit"]:   # `rawflags 10` to Debian 12's iproute2, `implicit` to later ones: ip says it
            raise UseTheProgram()
        out += [name for name, mask in FLAGS.items() if flags & mask]
        unknown = flags & ~sum(FLAGS.values())
        if unknown:
            out.append(f"rawflags {unknown:02x}")
    if ADDR_IF_IDX in a:
        index = struct.unpack("=i", a[ADDR_IF_IDX][:4])[0]
        if index:
            try:
                out.append(f"dev {socket.if_indextoname(index)}")
            except OSError:   # a device gone since: ip names it by its number
                out.append(f"dev if{index}")
    return "".join(f"{part} " for part in out if part) + "\n"


def dump_lines(sock: socket.socket, family: int, lines: list[str]) -> bool:
    """Every endpoint into `lines`, as ip prints them: a GET_ADDR dump read to its end (True), or to a
    message ip cannot print (False, as its dump stops there)."""
    for payload in dump(sock, family, show_request()):
        line = endpoint_line(payload)
        if line is None:
            return False
        lines.append(line)
    return True
