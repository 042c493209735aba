"""`ss`: the argument list that lists established TCP and MPTCP sockets, and its parsers (the subflows
of each MPTCP connection, and its sockets' cwnd and send buffers).

Pure: tested on recorded output. Used by the shell's `subflows`, which shows a person what `ss` shows. A
run's subflow samples are read over sock_diag since 2026-11-28 (runners.linux.sockdiag, with the same
fields); result sets from before keep them as `ss` printed them (raw/<run>/ss-subflows.txt), which
parse_ss_subflows and send_windows read."""
from __future__ import annotations

import re
from typing import Any

from runners.linux.nsexec import Argv


def ss_argv(memory: bool = False) -> Argv:
    """`memory`: socket memory too (skmem: the send buffer), for a person in the shell; the runs' samples
    stay without it (every extra ss field costs time under TCG)."""
    return ["ss", "-t", "-i", "-n", "-M", "-O", *(["-m"] if memory else []), "state", "established"]


_SS_ADDR = re.compile(r"^\S+\s+\d+\s+\d+\s+(\S+)\s+(\S+)")


def _split_hostport(s: str) -> tuple[str, int]:
    host, _, port = s.rpartition(":")
    return host.strip("[]"), int(port) if port.isdigit() else -1


def parse_ss_subflows(text: str, windows: bool = False) -> list[dict[str, Any]]:
    """TCP sockets that are MPTCP subflows (they carry `tcp-ulp-mptcp`) from `ss -tinMO`; `windows`: also
    cwnd and the send buffer (for the shell; a run's records keep their fields)."""
    out = []
    for line in text.splitlines():
        if "tcp-ulp-mptcp" not in line:
            continue
        m = _SS_ADDR.match(line.strip())
        if not m:
            continue
        local, lport = _split_hostport(m.group(1))
        remote, rport = _split_hostport(m.group(2))
        # an IPv4 subflow of an AF_INET6 MPTCP socket shows v4-mapped addresses
        local, remote = local.removeprefix("::ffff:"), remote.removeprefix("::ffff:")
        entry: dict[str, Any] = {"local": local, "local_port": lport, "remote": remote, "remote_port": rport,
                                 "family": "ipv6" if ":" in local else "ipv4"}
        for key in ("bytes_acked", "bytes_received", "bytes_sent"):
            km = re.search(rf"\b{key}:(\d+)", line)
            if km:
                entry[key] = int(km.group(1))
        rm = re.search(r"\brtt:([\d.]+)/([\d.]+)", line)
        if rm:
            entry["rtt_ms"] = float(rm.group(1))
        tm = re.search(r"token:([0-9a-f]+)\(id:(\d+)\)/([0-9a-f]+)\(id:(\d+)\)", line)
        if tm:
            # remote/local; the local token names this end's MPTCP connection.
            entry.update(token=tm.group(3), remote_id=int(tm.group(2)), local_id=int(tm.group(4)))
        if windows:
            entry.update(_cwnd_and_send_buffer(line))
        fm = re.search(r"tcp-ulp-mptcp flags:(\S+)", line)
        if fm:
            entry["flags"] = fm.group(1)
            # ss prints 'b' when the local end asked for backup, 'B' for the peer's request.
            entry["backup"] = "b" in fm.group(1) or "B" in fm.group(1)
        out.append(entry)
    return out


def _cwnd_and_send_buffer(line: str) -> dict[str, int]:
    """cwnd (segments) and, with `ss -m`, the send buffer (skmem tb) and what is queued in it (t)."""
    out = {}
    cm = re.search(r"\bcwnd:(\d+)", line)
    if cm:
        out["cwnd"] = int(cm.group(1))
    sm = re.search(r"skmem:\(([^)]*)\)", line)
    if sm:
        fields = dict(re.findall(r"([a-z]+)(\d+)", sm.group(1)))
        if "tb" in fields:
            out["sndbuf_bytes"] = int(fields["tb"])
        if "t" in fields:
            out["sndbuf_used_bytes"] = int(fields["t"])
    return out


def parse_ss_mptcp_sockets(text: str) -> dict[str, dict[str, int]]:
    """The MPTCP sockets of `ss -tinMOm` (netid mptcp), by their local token: the connection-level send
    buffer, which before Linux 6.7 follows the largest subflow's."""
    out = {}
    for line in text.splitlines():
        if not line.startswith("mptcp "):
            continue
        tm = re.search(r"\btoken:([0-9a-f]+)", line)
        if tm:
            out[tm.group(1)] = _cwnd_and_send_buffer(line)
    return out


def send_windows(text: str) -> list[dict[str, Any]]:
    """Each MPTCP subflow's local address and connection (`token`), the window its peer offers
    (`snd_wnd`, bytes), its smoothed RTT (ms), its MSS, what it holds unacknowledged (`send_q`, ss's
    Send-Q), whether the kernel saw it waiting for data to send (`app_limited`) and the bytes it has had
    acknowledged, from `ss -tinMO`: what tells a sender held to its window from one with nothing to send."""
    out = []
    for line in text.splitlines():
        wm, qm = re.search(r"\bsnd_wnd:(\d+)", line), re.match(r"\S+\s+\d+\s+(\d+)\s", line.strip())
        for entry in parse_ss_subflows(line) if wm and qm else []:
            mm = re.search(r"\bmss:(\d+)", line)
            if entry.get("rtt_ms") and entry.get("token"):
                out.append({"local": entry["local"], "token": entry["token"], "snd_wnd": int(wm.group(1)),
                            "rtt_ms": entry["rtt_ms"], "mss": int(mm.group(1)) if mm else 1448,
                            "send_q": int(qm.group(1)), "app_limited": bool(re.search(r"\bapp_limited\b", line)),
                            "bytes_acked": entry.get("bytes_acked", 0)})
    return out
