"""Counters read straight from /proc/<pid>/net of a process in a host's namespace: no process started.

Starting `nstat` or `ip -s link` costs 0.15-0.3 s each in a TCG guest, and a
run reads counters on every host before and after, and every sampling
interval. /proc/<pid>/net/{snmp,netstat} hold what nstat prints (nstat only
joins each table's prefix to the field name; the IPv6 tables of snmp6, which
the testbed does not use, are left out; TCP's and MPTCP's counters are shared
by both families), and /proc/<pid>/net/dev the
interface counters of `ip -s link`. A read is near-instant, so a sample's
time is the time of its read.
"""
from __future__ import annotations

from pathlib import Path

from runners.errors import ParseError

TABLES = ("snmp", "netstat")


def nstat_text(pid: int | str) -> str:
    """The namespace's SNMP and extended counters as `nstat -a -z -s` prints them (name, value)."""
    lines = ["#kernel"]
    for table in TABLES:
        lines += counters_lines(Path(f"/proc/{pid}/net/{table}").read_text())
    return "\n".join(lines) + "\n"


def counters_lines(text: str) -> list[str]:
    """/proc/net/snmp and /proc/net/netstat come as pairs of lines: 'Tcp: Names...' then 'Tcp: values...'."""
    rows = text.splitlines()
    out = []
    for names, values in zip(rows[0::2], rows[1::2]):
        prefix, _, names = names.partition(":")
        prefix2, _, values = values.partition(":")
        if prefix != prefix2:
            raise ParseError(f"counter table lines do not pair: {prefix!r} / {prefix2!r}")
        for name, value in zip(names.split(), values.split()):
            out.append(f"{prefix}{name} {value}")
    return out


def net_dev_text(pid: int | str) -> str:
    return Path(f"/proc/{pid}/net/dev").read_text()


def parse_net_dev(text: str) -> dict[str, dict[str, int]]:
    """/proc/net/dev -> {ifname: {rx_bytes, rx_packets, rx_dropped, tx_bytes, tx_packets, tx_dropped}}."""
    out: dict[str, dict[str, int]] = {}
    for line in text.splitlines()[2:]:
        name, sep, rest = line.partition(":")
        if not sep:
            continue
        f = rest.split()
        if len(f) < 16:
            raise ParseError(f"/proc/net/dev line not understood: {line!r}")
        out[name.strip()] = {"rx_bytes": int(f[0]), "rx_packets": int(f[1]), "rx_dropped": int(f[3]),
                             "tx_bytes": int(f[8]), "tx_packets": int(f[9]), "tx_dropped": int(f[11])}
    return out


def listening(pid: int | str, port: int, udp: bool = False) -> bool:
    """Is a socket listening on TCP `port` (or, with udp, bound to UDP `port` too) in the namespace of `pid`?

    An MPTCP listener shows here too: its first subflow is a TCP listening socket.
    """
    tables = ("tcp", "tcp6", "udp", "udp6") if udp else ("tcp", "tcp6")
    want = f":{port:04X}"
    for table in tables:
        try:
            rows = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for row in rows:
            f = row.split()
            if len(f) > 3 and f[1].endswith(want) and (table.startswith("udp") or f[3] == "0A"):   # 0A: LISTEN
                return True
    return False


def parse_nstat(text: str) -> dict[str, int]:
    """`nstat -a -z -s` text -> {counter: value}."""
    counters: dict[str, int] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) < 2:
            continue
        try:
            counters[parts[0]] = int(parts[1])
        except ValueError:
            raise ParseError(f"nstat line not understood: {line!r}") from None
    return counters


def counter_delta(before: dict[str, int], after: dict[str, int], names: list[str]) -> dict[str, int]:
    return {n: after.get(n, 0) - before.get(n, 0) for n in names}
