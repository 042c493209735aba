"""Counters read straight from /proc/<pid>/net of a process in a host's namespace: no process started.

Starting `nstat` or `ip -s link` costs 0.15-0.3 s each in a TCG guest, and a
run reads counters on every host before and after, and every sampling
interval. /proc/<pid>/net/{snmp,netstat} hold what nstat prints (nstat only
joins each table's prefix to the field name; the IPv6 tables of snmp6, which
the testbed does not use, are left out; TCP's and MPTCP's counters are shared
by both families), and /proc/<pid>/net/dev the
interface counters of `ip -s link`. A read is near-instant, so a sample's
time is the time of its read. The machine's own counters are here too: each CPU's time (/proc/stat),
the receive backlog's drops (/proc/net/softnet_stat) and a debug kernel's options (its configuration, or
its symbols in /proc/kallsyms).
"""
from __future__ import annotations

import re
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


# /proc/stat's columns of a cpu line, in their order (USER_HZ ticks since boot); guest and guest_nice are
# counted in user and nice already, so they are left out
CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def cpu_ticks(path: str = "/proc/stat") -> list[list[int]]:
    """Each CPU's ticks by CPU_FIELDS, from /proc/stat (the machine's, whatever namespace reads it)."""
    with open(path, "rb") as f:
        return parse_cpu_ticks(f.read().decode())


def parse_cpu_ticks(text: str) -> list[list[int]]:
    """/proc/stat -> [[user, nice, system, idle, iowait, irq, softirq, steal] of cpu0, of cpu1, ...]."""
    out = []
    for line in text.splitlines():
        if line.startswith("cpu") and line[3:4].isdigit():
            f = line.split()
            if len(f) < 9:
                raise ParseError(f"/proc/stat line not understood: {line!r}")
            out.append([int(x) for x in f[1:9]])
    if not out:
        raise ParseError("/proc/stat has no per-CPU lines")
    return out


def softnet_text() -> str:
    return Path("/proc/net/softnet_stat").read_text()


def parse_softnet(text: str) -> dict[str, int]:
    """/proc/net/softnet_stat (a line per CPU, hexadecimal) -> the machine's packets processed, dropped
    (the input backlog was full: net.core.netdev_max_backlog) and time squeezes (the receive softirq ran
    out of its budget with packets left), summed over the CPUs."""
    out = {"processed": 0, "dropped": 0, "time_squeeze": 0}
    for line in text.splitlines():
        f = line.split()
        if not f:
            continue
        if len(f) < 3:
            raise ParseError(f"/proc/net/softnet_stat line not understood: {line!r}")
        try:
            out["processed"] += int(f[0], 16)
            out["dropped"] += int(f[1], 16)
            out["time_squeeze"] += int(f[2], 16)
        except ValueError:
            raise ParseError(f"/proc/net/softnet_stat line not understood: {line!r}") from None
    return out


# Symbols only a debug kernel has, as the upstream MPTCP selftests look for them (simult_flows.sh widens
# its time bound when one is in /proc/kallsyms): the option each stands for
DEBUG_SYMBOLS = {b"kmemleak_init": "kmemleak", b"lockdep_init": "lockdep", b"kasan_init": "KASAN",
                 b"prove_locking": "lockdep"}


# The same options in the kernel's build configuration, where the running kernel's can be found
DEBUG_CONFIG = {"CONFIG_DEBUG_KMEMLEAK": "kmemleak", "CONFIG_LOCKDEP": "lockdep", "CONFIG_PROVE_LOCKING": "lockdep",
                "CONFIG_KASAN": "KASAN"}


def kernel_debug_options(kallsyms: str = "/proc/kallsyms", configs: tuple[str, ...] | None = None) -> list[str]:
    """The debug options (kmemleak, lockdep, KASAN) of the running kernel: from its build configuration
    (/proc/config.gz, or the distribution's /boot/config-RELEASE), else by their symbols in /proc/kallsyms.
    In a TCG guest the symbols took 0.22-0.26 s (the kernel writes 5 MB of text, then four searches of it),
    the configuration 0.02-0.03 s (2026-11-27, kernel 6.1)."""
    import gzip
    import os

    for config in configs if configs is not None else ("/proc/config.gz", f"/boot/config-{os.uname().release}"):
        try:
            raw = Path(config).read_bytes()
            text = (gzip.decompress(raw) if config.endswith(".gz") else raw).decode("utf-8", "replace")
        except (OSError, EOFError, gzip.BadGzipFile):
            continue
        return parse_debug_config(text)
    with open(kallsyms, "rb") as f:
        return parse_debug_symbols(f.read())


def parse_debug_config(text: str) -> list[str]:
    """A kernel's .config -> the options DEBUG_CONFIG names as built in, each once, in DEBUG_SYMBOLS' order."""
    built_in = {line.split("=", 1)[0] for line in text.splitlines() if line.endswith("=y")}
    found = {option for name, option in DEBUG_CONFIG.items() if name in built_in}
    return [option for option in dict.fromkeys(DEBUG_SYMBOLS.values()) if option in found]


def parse_debug_symbols(data: bytes) -> list[str]:
    """/proc/kallsyms bytes -> the options DEBUG_SYMBOLS names, each once, in DEBUG_SYMBOLS' order."""
    found = []
    for symbol, option in DEBUG_SYMBOLS.items():
        # a line is "address type name" or "address type name [module]": the name ends the line or a space
        if re.search(rb" " + symbol + rb"(?:$|[ \t])", data, re.M) and option not in found:
            found.append(option)
    return found
