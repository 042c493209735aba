"""One row per TCP subflow seen in a run's captures, read with tshark (subflows-pcap.csv), written when
the set is reported (`write_subflow_tables`): by the host for a VM's set, where tshark runs at native
speed, and again by `run-scenario report` for any captured run that lacks its table.

The aggregation is pure (`SubflowTable`): the packets' fields go in, the rows come out, so it is tested
on recorded tshark output.
Each subflow is named by its 4-tuple as the side that sent the SYN sees it
(the client side), with its MPTCP connection (Wireshark's mptcp.stream), how
it began (MP_CAPABLE, MP_JOIN, or plain TCP), the backup flag of its SYN,
payload bytes each way, first and last packet time, and the segments
Wireshark's analysis marks as retransmissions.
"""
from __future__ import annotations

import csv
import io
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from runners.results.store import atomic_write

SUBFLOWS_CSV = "subflows-pcap.csv"

FIELDS = ("frame.time_epoch", "ip.src", "ipv6.src", "ip.dst", "ipv6.dst", "tcp.srcport", "tcp.dstport", "tcp.len",
          "tcp.flags.syn", "tcp.flags.ack", "tcp.options.mptcp.subtype", "tcp.options.mptcp.backup.flag",
          "tcp.analysis.retransmission", "mptcp.stream")
MP_CAPABLE, MP_JOIN = "0", "1"
COLUMNS = ("connection", "kind", "family", "client_addr", "client_port", "server_addr", "server_port", "path",
           "interface", "backup", "bytes_client_to_server", "bytes_server_to_client", "packets", "first_s", "last_s",
           "retransmissions")


def tshark_argv(pcap: Path) -> list[str]:
    argv = ["tshark", "-r", str(pcap), "-n", "-Y", "tcp", "-o", "mptcp.analyze_mptcp:TRUE",
            "-o", "mptcp.relative_sequence_numbers:TRUE", "-T", "fields", "-E", "separator=\t",
            "-E", "occurrence=a", "-E", "aggregator=,"]
    for f in FIELDS:
        argv += ["-e", f]
    return argv


def read_packets(pcap: Path, timeout: float = 300) -> str:
    """tshark's field lines for one capture (the caller handles a missing tshark)."""
    try:
        r = subprocess.run(tshark_argv(pcap), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"tshark took over {timeout:.0f} s on {pcap.name}") from None
    if r.returncode != 0:
        raise RuntimeError(f"tshark could not read {pcap.name}: {r.stderr.strip()[-300:]}")
    return r.stdout


@dataclass
class Subflow:
    client: tuple[str, int]
    server: tuple[str, int]
    interface: str
    kind: str = "unknown"            # the SYN was not captured
    backup: int = 0
    connection: str = ""
    up: int = 0                      # payload bytes, client to server
    down: int = 0
    packets: int = 0
    first: float = float("inf")
    last: float = 0.0
    retransmissions: int = 0
    _seen_syn: bool = field(default=False, repr=False)

    def row(self, t0: float, path_of: dict[str, str]) -> dict:
        return {"connection": self.connection, "kind": self.kind, "family": "ipv6" if ":" in self.client[0] else "ipv4",
                "client_addr": self.client[0], "client_port": self.client[1], "server_addr": self.server[0],
                "server_port": self.server[1], "path": path_of.get(self.client[0], ""), "interface": self.interface,
                "backup": self.backup, "bytes_client_to_server": self.up, "bytes_server_to_client": self.down,
                "packets": self.packets, "first_s": round(self.first - t0, 6), "last_s": round(self.last - t0, 6),
                "retransmissions": self.retransmissions}


def _first(value: str) -> str:
    return value.split(",")[0] if value else ""


def _packet(line: str) -> dict | None:
    parts = line.rstrip("\n").split("\t")
    if len(parts) != len(FIELDS) or not parts[0]:
        return None
    f = dict(zip(FIELDS, parts))
    src, dst = _first(f["ip.src"]) or _first(f["ipv6.src"]), _first(f["ip.dst"]) or _first(f["ipv6.dst"])
    return {"t": float(f["frame.time_epoch"]), "src": (src, int(f["tcp.srcport"])),
            "dst": (dst, int(f["tcp.dstport"])), "len": int(f["tcp.len"] or 0),
            "syn": f["tcp.flags.syn"] in ("1", "True"), "ack": f["tcp.flags.ack"] in ("1", "True"),
            "subtypes": f["tcp.options.mptcp.subtype"].split(",") if f["tcp.options.mptcp.subtype"] else [],
            "backup": f["tcp.options.mptcp.backup.flag"].split(",")[0] in ("1", "True"),
            "retransmission": bool(f["tcp.analysis.retransmission"]), "connection": _first(f["mptcp.stream"])}


class SubflowTable:
    """Packets from one or more captures (one per interface of the same side) -> one row per subflow."""

    def __init__(self) -> None:
        self.flows: dict[frozenset, Subflow] = {}

    def add(self, tshark_lines: str, interface: str) -> None:
        for line in tshark_lines.splitlines():
            p = _packet(line)
            if p is not None:
                self._count(p, interface)

    def _count(self, p: dict, interface: str) -> None:
        key = frozenset((p["src"], p["dst"]))
        flow = self.flows.get(key)
        if flow is None:
            # until a SYN says otherwise, the sender of the first packet seen is taken as the client
            flow = self.flows[key] = Subflow(client=p["src"], server=p["dst"], interface=interface)
        if p["syn"] and not p["ack"] and not flow._seen_syn:
            flow.client, flow.server, flow._seen_syn = p["src"], p["dst"], True
            flow.kind = "MP_JOIN" if MP_JOIN in p["subtypes"] else "MP_CAPABLE" if MP_CAPABLE in p["subtypes"] \
                else "TCP"
            flow.backup = int(flow.kind == "MP_JOIN" and p["backup"])
        if p["connection"] and not flow.connection:
            flow.connection = p["connection"]
        if p["src"] == flow.client:
            flow.up += p["len"]
        else:
            flow.down += p["len"]
        flow.packets += 1
        flow.first, flow.last = min(flow.first, p["t"]), max(flow.last, p["t"])
        flow.retransmissions += int(p["retransmission"])

    def rows(self, path_of: dict[str, str] | None = None) -> list[dict]:
        if not self.flows:
            return []
        t0 = min(f.first for f in self.flows.values())
        ordered = sorted(self.flows.values(), key=lambda f: (f.connection or "~", f.first))
        return [f.row(t0, path_of or {}) for f in ordered]


def render_csv(rows: list[dict]) -> str:
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return out.getvalue()


def data_connection(rows: list[dict]) -> list[dict]:
    """The subflows of the connection that carried the most payload (iperf3's data, not its control
    connection, which mptcpize makes an MPTCP connection too)."""
    by_conn: dict[str, list[dict]] = {}
    for r in rows:
        by_conn.setdefault(r["connection"] or f"tcp:{r['client_port']}", []).append(r)
    if not by_conn:
        return []
    return max(by_conn.values(), key=lambda rs: sum(r["bytes_client_to_server"] + r["bytes_server_to_client"]
                                                    for r in rs))


def subflows_csv(raw_dir: Path, files: list[dict], client_nodes: list[str], path_of: dict[str, str]) -> str:
    """subflows-pcap.csv's text from the client side's captures (else the server's)."""
    side = [f for f in files if f["node"] in client_nodes] or files
    table = SubflowTable()
    for f in side:
        table.add(read_packets(raw_dir / f["file"]), f["interface"])
    return render_csv(table.rows(path_of))


def write_subflow_tables(run_dir: Path, doc: dict) -> list[str]:
    """subflows-pcap.csv beside the pcaps of every captured run of the set `doc` (results.json) that lacks
    one (runs that shared a capture share a table); a warning for each that could not be written."""
    todo: dict[Path, dict] = {}
    for r in doc["runs"]:
        capture = r.get("capture") or {}
        raw = run_dir / (r.get("shared_raw") or f"raw/{r['id']}")
        if capture.get("files") and not (raw / SUBFLOWS_CSV).exists():
            todo.setdefault(raw, r)
    if todo and shutil.which("tshark") is None:
        return [f"{len(todo)} captured run(s) without {SUBFLOWS_CSV}: tshark is not installed (setup.sh installs "
                f"it; then `run-scenario report {run_dir}`)"]
    warnings = []
    for raw, r in todo.items():
        clients, path_of = capture_sides(r["capture"], (doc.get("metadata") or {}).get("address_plan") or {})
        try:
            if not clients:
                raise ValueError("the set does not say which nodes were clients")
            atomic_write(raw / SUBFLOWS_CSV, subflows_csv(raw, r["capture"]["files"], clients, path_of))
        except (RuntimeError, OSError, ValueError) as e:
            warnings.append(f"run {r['id']}: {SUBFLOWS_CSV} not written: {e}")
    return warnings


def capture_sides(capture: dict, address_plan: dict) -> tuple[list[str], dict[str, str]]:
    """The client nodes and each client address's path. Sets recorded before 2026-11-27 (their tables
    were written in the run) keep them only in metadata's address plan: `"client": "10.0.1.1 (h1-eth0)"`."""
    if "client_nodes" in capture:
        return capture["client_nodes"], capture.get("paths_by_address", {})
    clients = address_plan.get("clients") or [c for c in [address_plan.get("client")] if c]
    path_of = {str(p["client"]).split()[0]: p["name"] for p in address_plan.get("paths", [])
               if p.get("client") and p.get("name")}
    return clients, path_of
