"""One run's record, assembled from what the collectors saw: pure, tested on recorded counters.

Nothing here reads the kernel or the clock; the runner passes everything in.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace

from runners.collect.subflows import SubflowExpectation
from runners.linux import procfs
from runners.traffic.base import TrafficReport

OFO_COUNTERS = ["TcpExtTCPOFOQueue", "MPTcpExtOFOQueue", "MPTcpExtOFOQueueTail"]
OTHER_COUNTERS = ["TcpRetransSegs", "MPTcpExtMPCapableSYNRX", "MPTcpExtMPCapableACKRX",
                  "MPTcpExtMPJoinSynRx", "MPTcpExtMPJoinAckRx", "MPTcpExtMPJoinSynAckRx",
                  "MPTcpExtAddAddr", "MPTcpExtEchoAdd", "MPTcpExtMPFallbackTokenInit",
                  "MPTcpExtInfiniteMapRx", "MPTcpExtDSSNotMatching"]


SERIES_BASIS = {"iface": "receiver's interface counters: wire bytes", "nft": "receiver's nft counters: IP bytes"}
PATH_THROUGHPUT_BASIS = "share of the connection's goodput, by the path's share of received wire bytes"


@dataclass(frozen=True)
class RunIdentity:
    id: str
    mode: str            # mptcp | tcp
    repeat: int
    primary: str
    started: float       # wall-clock start, seconds since the epoch


@dataclass
class Observations:
    """Everything the collectors saw during one run."""
    before: dict                 # counter snapshot before the traffic
    after: dict                  # and after it
    pings: dict                  # path name -> {"rtt_avg_ms", "loss_pct"}
    path_samples: list[dict]     # cumulative received bytes per path, {"t": s, path: bytes}
    subflow_samples: list[dict]  # the client's subflows, sampled (runners.traffic.base.watch_subflows)
    server_receives: bool        # upload: the server is the receiver


@dataclass(frozen=True)
class Setting:
    """The parts of the scenario and plan a record depends on."""
    paths: tuple                 # the plan's PathPlans
    byte_counters: str           # iface | nft
    fixed_size_bytes: int | None  # traffic.bytes when iperf3 sends a fixed amount, else None
    n_clients: int
    alongside: tuple[str, ...] = ()   # paths whose flows ran at the same time (runs.tcp_together)
    subflows: SubflowExpectation | None = None   # an MPTCP run's expected subflows (commands.expected_subflows)
    tool: str = "iperf3"              # traffic.tool


# nstat counts for a whole namespace: with other flows alongside, these are not the run's own
NAMESPACE_METRICS = ("retrans_segs", "ofo_tcp", "ofo_mptcp", "ofo_mptcp_tail", "mptcp_joins")



def build(who: RunIdentity, report: TrafficReport, seen: Observations, setting: Setting) -> dict:
    """The run's record as results.json stores it."""
    counters = counter_deltas(seen)
    paths = path_records(report, seen, setting)
    subflow_list = best_subflows(seen.subflow_samples, report) if who.mode == "mptcp" else []
    # no sample saw the connection (the client ended before the first, or a read failed; with `ss`, under
    # TCG with four tcpdumps, one took 7.5 s and ended after the transfer): the count is unknown, not 0
    subflows = (len(subflow_list) or None) if who.mode == "mptcp" else 1
    metrics = run_metrics(report, counters, paths, setting, subflows)
    expected = 1 if who.mode == "tcp" else setting.subflows.count if setting.subflows else None
    metrics["subflows_expected"] = expected
    metrics["missing_subflows"] = (max(expected - subflows, 0) if expected is not None and subflows is not None
                                   else None)
    path_goodput(paths, metrics["throughput_mbps"])
    fallback = who.mode == "mptcp" and counters["server"]["MPTcpExtMPCapableSYNRX"] == 0
    shared = {}
    if setting.alongside:
        metrics.update(dict.fromkeys(NAMESPACE_METRICS))
        shared = {"alongside": list(setting.alongside),
                  "counters_note": "nstat counters are per namespace and counted the flows alongside too: "
                                   "retransmitted segments and OFO are null; iperf_retransmits is this flow's"}
    return {
        "id": who.id, "mode": who.mode, "repeat": who.repeat, "primary": who.primary,
        "status": "ok" if not fallback else "mptcp-fallback",
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(who.started)),
        "metrics": metrics, "paths": paths,
        "subflow_list": subflow_list,
        "counters": None if setting.alongside else {k: counters[k] for k in ("server", "client", "receiver_ofo")},
        "intervals": report.intervals,
        "intervals_side": report.intervals_side,
        "path_throughput_basis": PATH_THROUGHPUT_BASIS,
        "path_series_mbps": series_from_samples(seen.path_samples, [p.name for p in setting.paths]),
        "path_series_basis": SERIES_BASIS[setting.byte_counters],
        "iperf_connected": report.connected,
        "iperf_version": report.version,
        **shared,
        **({"cut_short": f"{report.cut_short}: goodput is the receiver's counters over the planned duration"}
           if report.cut_short else {}),
        **subflow_notes(who, setting, metrics, subflow_list, counters),
    }


def subflow_notes(who: RunIdentity, setting: Setting, metrics: dict, subflow_list: list[dict],
                  counters: dict) -> dict:
    """`subflow_shortfall` (why subflows are missing) for a run with fewer subflows than its plan gives;
    `subflows_expected_unknown` (why the count cannot be known) for an MPTCP run without one."""
    if metrics["missing_subflows"]:
        return {"subflow_shortfall": shortfall(setting, subflow_list, counters)}
    if who.mode == "mptcp" and setting.subflows is not None and setting.subflows.unknown:
        return {"subflows_expected_unknown": setting.subflows.unknown}
    return {}


def shortfall(setting: Setting, subflow_list: list[dict], counters: dict) -> str:
    """The planned joins no subflow of the data connection made, and what nstat saw of the joins: did the
    ADD_ADDRs reach the client, did join SYNs reach the server?"""
    joins = setting.subflows.joins if setting.subflows else ()
    absent = [j for j in joins if not any(j.made(s) for s in subflow_list)]
    text = "; ".join(f"no subflow left {j.describe()}" if j.how == "subflow" else f"no join reached {j.describe()}"
                     for j in absent) or "every planned join has its subflow, yet fewer subflows than planned"
    seen = [f"ADD_ADDRs the client received: {counters['client'].get('MPTcpExtAddAddr', 0)}",
            f"join SYNs the server received: {counters['server'].get('MPTcpExtMPJoinSynRx', 0)}"]
    text += f" ({', '.join(seen)}, for every MPTCP connection of the run)"
    if setting.tool == "command" and any(j.how == "signal" for j in absent):
        # iperf3's server listens on the wildcard address; a command's may not, and a join SYN to an
        # announced address nothing listens on is answered with a RST before MPTCP sees it
        text += ("; traffic.tool command: the server must listen on every path's address (the wildcard "
                 "address, 0.0.0.0 or ::), not on {server_ip} alone")
    return text


def counter_deltas(seen: Observations) -> dict:
    rx_side, tx_side = ("server", "client") if seen.server_receives else ("client", "server")
    b, a = seen.before, seen.after
    return {"server": procfs.counter_delta(b["server_nstat"], a["server_nstat"], OTHER_COUNTERS),
            "client": procfs.counter_delta(b["client_nstat"], a["client_nstat"], OTHER_COUNTERS),
            "receiver_ofo": procfs.counter_delta(b[f"{rx_side}_nstat"], a[f"{rx_side}_nstat"], OFO_COUNTERS),
            "sender_retrans": procfs.counter_delta(b[f"{tx_side}_nstat"], a[f"{tx_side}_nstat"], ["TcpRetransSegs"])}


def path_bytes(seen: Observations, setting: Setting, path) -> tuple[int, int, int, int]:
    """(bytes received, bytes sent, packets received, packets sent) on one path, in the data direction."""
    rx_side, tx_side = ("server", "client") if seen.server_receives else ("client", "server")
    b, a = seen.before, seen.after
    if setting.byte_counters == "nft":
        def nft(side, key):
            return a[f"{side}_paths"].get(path.name, {}).get(key, 0) - b[f"{side}_paths"].get(path.name, {}).get(key, 0)
        return (nft(rx_side, "in_bytes"), nft(tx_side, "out_bytes"),
                nft(rx_side, "in_packets"), nft(tx_side, "out_packets"))
    rx_if = path.server_if if seen.server_receives else path.client_if
    tx_if = path.client_if if seen.server_receives else path.server_if

    def link(side, ifname, key):
        return a[f"{side}_links"][ifname][key] - b[f"{side}_links"][ifname][key]
    return (link(rx_side, rx_if, "rx_bytes"), link(tx_side, tx_if, "tx_bytes"),
            link(rx_side, rx_if, "rx_packets"), link(tx_side, tx_if, "tx_packets"))


def path_records(report: TrafficReport, seen: Observations, setting: Setting) -> dict[str, dict]:
    paths: dict[str, dict] = {}
    for p in setting.paths:
        rx, tx, rx_pk, tx_pk = path_bytes(seen, setting, p)
        paths[p.name] = {"bytes_received": rx, "bytes_sent": tx, "packets_received": rx_pk, "packets_sent": tx_pk,
                         # data direction: what the path's shaping qdiscs dropped (random loss and full
                         # queues); interface counters never see those packets
                         "loss_pct": path_loss_pct(seen.before["qdiscs"], seen.after["qdiscs"],
                                                     p.egress_up if seen.server_receives else p.egress_down),
                         "rtt_avg_ms": seen.pings[p.name].get("rtt_avg_ms"),
                         "ping_loss_pct": seen.pings[p.name].get("loss_pct")}
    total_rx = sum(p["bytes_received"] for p in paths.values())
    for p in paths.values():
        p["share"] = p["bytes_received"] / total_rx if total_rx else None
    return paths


def path_goodput(paths: dict[str, dict], goodput_mbps: float) -> None:
    """Each path's throughput: its share of the received wire bytes times the connection's goodput
    (PATH_THROUGHPUT_BASIS). Wire bytes over the tool's seconds overstated it: the counters' window
    is longer than the transfer, and headers count."""
    for p in paths.values():
        p["throughput_mbps"] = p["share"] * goodput_mbps if p["share"] is not None else None


def run_metrics(report: TrafficReport, counters: dict, paths: dict, setting: Setting,
                subflows: int | None) -> dict:
    if report.counters_only:
        # the tool reports nothing itself: what the receiver got on all paths, over the client's run time
        total = sum(p["bytes_received"] for p in paths.values())
        mbps = total * 8 / report.seconds / 1e6 if report.seconds else 0.0
        report = replace(report, bytes_received=total, throughput_mbps=mbps, throughput_per_client_mbps=mbps,
                         clients=None)
    metrics = {
        "throughput_mbps": report.throughput_mbps,
        "sender_throughput_mbps": report.sender_throughput_mbps,
        "seconds": report.seconds,
        "bytes_received": report.bytes_received,
        "iperf_retransmits": report.retransmits,
        "retrans_segs": counters["sender_retrans"]["TcpRetransSegs"],
        "ofo_tcp": counters["receiver_ofo"]["TcpExtTCPOFOQueue"],
        "ofo_mptcp": counters["receiver_ofo"]["MPTcpExtOFOQueue"],
        "ofo_mptcp_tail": counters["receiver_ofo"]["MPTcpExtOFOQueueTail"],
        "subflows": subflows,
        "mptcp_joins": counters["server"]["MPTcpExtMPJoinAckRx"],
        "sender_mean_rtt_ms": report.sender_mean_rtt_ms,
        "throughput_per_client_mbps": (report.throughput_per_client_mbps if report.throughput_per_client_mbps
                                       is not None else report.throughput_mbps),
        "throughput_min_client_mbps": min((c["throughput_mbps"] for c in (report.clients or {}).values()),
                                          default=report.throughput_mbps),
    }
    if report.clients_start_spread_s is not None:    # several clients
        metrics["clients_start_spread_s"] = report.clients_start_spread_s
    if setting.fixed_size_bytes is not None:
        # 1.0 when the receiver got every byte and the run was timed to that moment; less when iperf3
        # ended first (esnet/iperf#382) and the run is timed to iperf3's end
        metrics["delivered_fraction"] = report.bytes_received / (setting.fixed_size_bytes
                                                                    * max(setting.n_clients, 1))
    return metrics


def best_subflows(subflow_samples: list[dict], report: TrafficReport) -> list[dict]:
    """The sample with the most subflows of the data connection."""
    data_port = report.connected[0]["local_port"] if report.connected else None
    best: list[dict] = []
    for s in subflow_samples:
        conn = data_connection(s["subflows"], data_port)
        if len(conn) > len(best):
            best = conn
    return best


def data_connection(subflows: list[dict], data_port: int | None) -> list[dict]:
    """The subflows of iperf3's data connection (not its control connection), grouped by MPTCP token."""
    if not subflows:
        return []
    tokens: dict[str, list[dict]] = {}
    for s in subflows:
        tokens.setdefault(s.get("token", "?"), []).append(s)
    if data_port is not None:
        for group in tokens.values():
            if any(s["local_port"] == data_port for s in group):
                return group
    return max(tokens.values(), key=lambda g: sum(s.get("bytes_acked", 0) + s.get("bytes_received", 0) for s in g))


def series_from_samples(samples: list[dict], paths: list[str]) -> list[dict]:
    """Cumulative byte samples -> Mbit/s per path over each interval between samples [t0, t]."""
    out = []
    for a, b in zip(samples, samples[1:]):
        dt = b["t"] - a["t"]
        if dt <= 0:
            continue
        out.append({"t0": a["t"], "t": b["t"], **{p: (b[p] - a[p]) * 8 / dt / 1e6 for p in paths}})
    return out


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
