"""Pure parsers of tool output, tested on recorded fixtures.

Each returns plain dicts and numbers; units are in the key names
(`_mbps`, `_ms`, `_bytes`) so the results stay self-describing.
"""
from __future__ import annotations

import json
import re
from typing import Any


class ParseError(ValueError):
    """A tool printed something we cannot interpret: a run failure, not bad input."""


# ---------------------------------------------------------------- iperf3 JSON

def parse_iperf3(text: str) -> dict[str, Any]:
    """Totals and per-interval throughput from one iperf3 `-J` report."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ParseError(f"iperf3 did not print JSON: {e}; output starts {text[:200]!r}") from None
    if not isinstance(doc, dict):
        raise ParseError("iperf3 JSON is not an object")
    if doc.get("error"):
        raise ParseError(f"iperf3 reported an error: {doc['error']}")
    end = doc.get("end") or {}
    sent = end.get("sum_sent") or {}
    received = end.get("sum_received") or {}
    if not received:
        raise ParseError("iperf3 JSON has no end.sum_received (the test did not finish)")
    start = doc.get("start") or {}
    test = start.get("test_start") or {}
    out: dict[str, Any] = {
        "version": start.get("version"),
        "reverse": bool(test.get("reverse", 0)),
        "throughput_mbps": received.get("bits_per_second", 0.0) / 1e6,
        "sender_throughput_mbps": sent.get("bits_per_second", 0.0) / 1e6,
        "bytes_received": int(received.get("bytes", 0)),
        "bytes_sent": int(sent.get("bytes", 0)),
        "seconds": float(received.get("seconds", 0.0)),
        "retransmits": sent.get("retransmits"),
        "connected": [{"local": c.get("local_host"), "local_port": c.get("local_port"),
                       "remote": c.get("remote_host"), "remote_port": c.get("remote_port")}
                      for c in start.get("connected") or []],
        "congestion": end.get("sender_tcp_congestion"),
    }
    out["sender_mean_rtt_ms"] = _sender_mean_rtt_ms(end)
    out["intervals"] = _intervals(doc)
    return out


def _intervals(doc: dict) -> list[dict]:
    return [{"start": iv["sum"]["start"], "end": iv["sum"]["end"],
             "mbps": iv["sum"]["bits_per_second"] / 1e6,
             "retransmits": iv["sum"].get("retransmits"),
             "omitted": bool(iv["sum"].get("omitted", False))}
            for iv in doc.get("intervals") or [] if "sum" in iv]


def intervals(text: str) -> list[dict] | None:
    """The per-interval totals of one side's iperf3 JSON (None without usable JSON)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return None
    return _intervals(doc) if isinstance(doc, dict) else None


def _sender_mean_rtt_ms(end: dict) -> float | None:
    """The sending side's mean smoothed RTT over its streams, in ms. A side that only received
    (the client of a download: "sender": false) has no RTT of its own: None, not its 0."""
    rtts = [s["sender"]["mean_rtt"] for s in end.get("streams") or []
            if isinstance(s.get("sender"), dict) and s["sender"].get("sender", True)
            and s["sender"].get("mean_rtt") is not None]
    return (sum(rtts) / len(rtts) / 1000.0) if rtts else None


def sender_mean_rtt_ms(text: str) -> float | None:
    """From either side's iperf3 JSON: the sender's mean RTT (None if this side did not send, or no JSON)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return None
    return _sender_mean_rtt_ms(doc.get("end") or {}) if isinstance(doc, dict) else None


def completion_time(receiver_text: str, amount: int) -> tuple[float | None, int]:
    """When the receiver's count reached `amount` bytes: (seconds from the test start, bytes it got).

    From the receiver's own iperf3 intervals, interpolated inside the interval
    that crossed `amount` (they are COMPLETION_INTERVAL long). None when it never
    got that far. Why: iperf3 -n ends once the sender has *written* the bytes,
    so its own end is not when they arrived (esnet/iperf#382).
    """
    try:
        doc = json.loads(receiver_text)
    except json.JSONDecodeError as e:
        raise ParseError(f"the receiver's iperf3 did not print JSON: {e}; output starts "
                         f"{receiver_text[:200]!r}") from None
    got = 0
    for iv in (doc.get("intervals") or []) if isinstance(doc, dict) else []:
        s = iv.get("sum") or {}
        n = int(s.get("bytes", 0))
        if n > 0 and got + n >= amount:
            start, end = float(s["start"]), float(s["end"])
            return start + (end - start) * (amount - got) / n, got + n
        got += n
    return None, got


# ---------------------------------------------------------------- nstat

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


# ---------------------------------------------------------------- ping

_PING_LOSS = re.compile(r"(\d+) packets transmitted, (\d+) (?:packets )?received.*?([\d.]+)% packet loss")


_PING_REPLY = re.compile(r"icmp_seq=(\d+) .*?time=([\d.]+) ms")


def parse_ping_after_warmup(text: str, warmup: int = 1) -> dict[str, Any]:
    """`ping` with per-reply lines -> loss and RTT of the echoes after the first `warmup` ones.

    The first echo pays for neighbour resolution; one ping with it left out
    measures what a separate warm-up ping and a second ping did, one process sooner.
    """
    m = _PING_LOSS.search(text)
    if not m:
        raise ParseError(f"ping summary not found in {text[-300:]!r}")
    sent = int(m.group(1)) - warmup
    if sent <= 0:
        raise ParseError(f"ping sent {m.group(1)} echoes, no more than the {warmup} warm-up ones")
    rtts = [float(t) for seq, t in _PING_REPLY.findall(text) if int(seq) > warmup]
    out: dict[str, Any] = {"sent": sent, "received": len(rtts),
                           "loss_pct": round(100.0 * (sent - len(rtts)) / sent, 3),
                           "rtt_min_ms": None, "rtt_avg_ms": None, "rtt_max_ms": None, "rtt_mdev_ms": None}
    if rtts:
        avg = sum(rtts) / len(rtts)
        # mdev as ping computes it: sqrt(mean(x^2) - mean(x)^2)
        mdev = max(0.0, sum(x * x for x in rtts) / len(rtts) - avg * avg) ** 0.5
        out.update(rtt_min_ms=min(rtts), rtt_avg_ms=round(avg, 3), rtt_max_ms=max(rtts), rtt_mdev_ms=round(mdev, 3))
    return out


# ---------------------------------------------------------------- ip -s -j link

# ---------------------------------------------------------------- tc -j qdisc

def qdiscs_of_dev(text: str, dev: str) -> str:
    """From `tc -j qdisc show` (every device), the JSON list of one device's qdiscs, as
    `tc -j qdisc show dev DEV` would print it."""
    try:
        doc = json.loads(text) if text.strip() else []
    except json.JSONDecodeError as e:
        raise ParseError(f"tc -j output is not JSON: {e}") from None
    return json.dumps([q for q in doc if q.get("dev") == dev])


def parse_netem(text: str) -> dict[str, Any] | None:
    """The root netem qdisc of `tc -j qdisc show dev X`, as rate/delay/loss/limit; None if absent."""
    try:
        doc = json.loads(text) if text.strip() else []
    except json.JSONDecodeError as e:
        raise ParseError(f"tc -j output is not JSON: {e}") from None
    for q in doc:
        if q.get("kind") != "netem" or not q.get("root", False):
            continue
        opts = q.get("options") or {}
        delay = opts.get("delay") or {}
        loss = opts.get("loss-random") or {}
        rate = opts.get("rate") or {}
        return {
            "limit": opts.get("limit"),
            "delay_ms": float(delay.get("delay", 0.0)) * 1000.0,
            "loss_pct": float(loss.get("loss", 0.0)) * 100.0,
            "rate_mbit": float(rate.get("rate", 0)) * 8 / 1e6,
        }
    return None


DELAY_GRANULARITY_MS = 0.002   # 2 us: what tc's read-back of a netem delay may differ by (clock rounding)


def shaping_mismatches(want: dict[str, float], got: dict[str, Any] | None) -> list[str]:
    """What differs between the netem we asked for and the one the kernel holds."""
    if got is None:
        return ["no netem qdisc is installed"]
    problems = []
    if got.get("limit") != want["limit"]:
        problems.append(f"limit {got.get('limit')} != {want['limit']}")
    # relative tolerances, with a floor only where the kernel's own granularity needs one: tc rounds
    # delays to the scheduler's clock (25 us reads back as 24 us); a rate has no absolute floor, so a
    # rate that did not take (1 bit/s shown as 0) is a mismatch however small it is
    for key, rel, floor in (("rate_mbit", 0.01, 0.0), ("delay_ms", 0.01, DELAY_GRANULARITY_MS),
                            ("loss_pct", 0.01, 1e-6)):
        w, g = want[key], got.get(key) or 0.0
        if abs(w - g) > max(rel * abs(w), floor):
            problems.append(f"{key} {g:g} != {w:g}")
    return problems


# ---------------------------------------------------------------- ss -tinMO

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


# ---------------------------------------------------------------- nft -j list table

def parse_nft_counters(text: str) -> dict[str, dict[str, int]]:
    """Per-path counters of `nft -j list table inet mptb` -> {path: {in_bytes, in_packets, out_bytes, out_packets}}."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ParseError(f"nft -j output is not JSON: {e}") from None
    out: dict[str, dict[str, int]] = {}
    for item in doc.get("nftables", []):
        rule = item.get("rule")
        if not rule or "comment" not in rule:
            continue
        counter = next((e["counter"] for e in rule.get("expr", []) if "counter" in e), None)
        if counter is None:
            continue
        d = out.setdefault(rule["comment"], {"in_bytes": 0, "in_packets": 0, "out_bytes": 0, "out_packets": 0})
        d[f"{rule['chain']}_bytes"] += int(counter.get("bytes", 0))
        d[f"{rule['chain']}_packets"] += int(counter.get("packets", 0))
    return out


# ---------------------------------------------------------------- tc -s -j qdisc

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


def path_loss_pct(before: dict, after: dict, hops) -> float | None:
    """Loss along a chain of egress qdiscs: 1 - product of (1 - drops/offered) per hop, in %.

    Hops without a shaping qdisc (unshaped links) are skipped.
    """
    kept, offered_any = 1.0, 0
    for hop in hops:
        if hop not in before or hop not in after:
            continue   # an unshaped interface: no qdisc counts there
        sent = after[hop]["packets"] - before[hop]["packets"]
        drops = after[hop]["drops"] - before[hop]["drops"]
        offered = sent + drops
        offered_any = max(offered_any, offered)
        if offered:
            kept *= 1 - drops / offered
    return 100.0 * (1 - kept) if offered_any >= 100 else None


def parse_ofctl_flows(text: str) -> list[dict]:
    """`ovs-ofctl -O OpenFlow13 --no-names dump-flows` -> one dict per flow: match fields, counters, outputs."""
    flows = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("cookie="):
            continue
        head, _, actions = line.partition(" actions=")
        fields: dict = {}
        for tok in re.split(r"[,\s]+", head):
            if not tok:
                continue
            k, eq, v = tok.partition("=")
            fields[k] = v if eq else True
        try:
            flows.append({
                "cookie": int(str(fields.get("cookie", "0")), 16),
                "n_packets": int(fields.get("n_packets", 0)), "n_bytes": int(fields.get("n_bytes", 0)),
                "priority": int(fields.get("priority", 0)),
                "in_port": int(fields["in_port"]) if str(fields.get("in_port", "")).isdigit() else None,
                "src": fields.get("nw_src") or fields.get("ipv6_src"),
                "dst": fields.get("nw_dst") or fields.get("ipv6_dst"),
                "tp_src": int(fields["tp_src"]) if "tp_src" in fields else None,
                "tp_dst": int(fields["tp_dst"]) if "tp_dst" in fields else None,
                "outputs": [int(m) for m in re.findall(r"output:(\d+)", actions)],
            })
        except ValueError as e:
            raise ParseError(f"ovs-ofctl dump-flows: cannot read {line[:120]!r}: {e}") from None
    return flows


def aggregate_clients(reports: dict[str, dict]) -> dict[str, Any]:
    """Several clients' iperf3 reports (run at once) -> one report: sums, plus a per-client table.

    Throughput is the aggregate the server received; `throughput_per_client_mbps`
    is its mean per client (E5 reports both). Intervals add up by index.
    """
    names = list(reports)
    first = reports[names[0]]
    out = dict(first)
    out["throughput_mbps"] = sum(r["throughput_mbps"] for r in reports.values())
    out["sender_throughput_mbps"] = sum(r["sender_throughput_mbps"] or 0.0 for r in reports.values())
    out["bytes_received"] = sum(r["bytes_received"] for r in reports.values())
    out["bytes_sent"] = sum(r["bytes_sent"] or 0 for r in reports.values())
    out["seconds"] = max(r["seconds"] for r in reports.values())
    rts = [r["retransmits"] for r in reports.values()]
    out["retransmits"] = None if any(x is None for x in rts) else sum(rts)
    rtts = [r["sender_mean_rtt_ms"] for r in reports.values() if r.get("sender_mean_rtt_ms") is not None]
    out["sender_mean_rtt_ms"] = sum(rtts) / len(rtts) if rtts else None
    n = min(len(r["intervals"]) for r in reports.values())
    out["intervals"] = [{**first["intervals"][i],
                         "mbps": sum(r["intervals"][i]["mbps"] for r in reports.values()),
                         "retransmits": None if any(r["intervals"][i].get("retransmits") is None
                                                    for r in reports.values())
                         else sum(r["intervals"][i]["retransmits"] for r in reports.values())}
                        for i in range(n)]
    out["throughput_per_client_mbps"] = out["throughput_mbps"] / len(reports)
    out["clients"] = {name: {k: r.get(k) for k in ("throughput_mbps", "bytes_received", "seconds", "retransmits",
                                                   "sender_mean_rtt_ms")}
                      for name, r in reports.items()}
    return out
