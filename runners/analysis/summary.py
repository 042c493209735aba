"""The summary printed after a run: a table of the runs, and MPTCP against TCP per primary path."""
from __future__ import annotations

import io

from ..derived import with_derived


def summary(runs: list[dict]) -> str:
    """A short table of the runs, and the MPTCP/TCP ratio of mean throughputs."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="runs", show_lines=False)
    for col in ("run", "mode", "primary", "Mbit/s", "s", "subflows", "OFO tcp/mptcp", "retrans", "bytes per path"):
        table.add_column(col)
    for r in runs:
        m = r["metrics"]
        shares = "  ".join(f"{n}:{(p.get('share') or 0) * 100:.0f}%" for n, p in r["paths"].items())
        table.add_row(r["id"], r["mode"] + ("" if r["status"] == "ok" else f" ({r['status']})"), r["primary"],
                      f"{m['throughput_mbps']:.2f}", f"{m.get('seconds') or 0:.2f}", str(m["subflows"]),
                      f"{m['ofo_tcp']}/{m['ofo_mptcp']}",
                      str(m["retrans_segs"]), shares)
    console = Console(record=True, width=110, force_terminal=False, file=io.StringIO())
    console.print(table)
    if len({r.get("point", "p001") for r in runs}) > 1:
        # pooled means across sweep points or variants would mix unlike cases
        console.print("several points: per-point means and intervals are in stats.csv and the verdicts")
        return console.export_text()
    runs = with_derived(runs)
    tcp = {r["primary"]: [] for r in runs if r["mode"] == "tcp"}
    for r in runs:
        if r["mode"] == "tcp":
            tcp[r["primary"]].append(r["metrics"]["throughput_mbps"])
    for primary in sorted({r["primary"] for r in runs if r["mode"] == "mptcp"} or tcp):
        mp = [r["metrics"]["throughput_mbps"] for r in runs if r["mode"] == "mptcp" and r["primary"] == primary]
        line = f"primary {primary}:"
        if mp:
            line += f" MPTCP {sum(mp) / len(mp):.2f} Mbit/s"
        if tcp.get(primary):
            t = sum(tcp[primary]) / len(tcp[primary])
            line += f", TCP {t:.2f} Mbit/s" + (f" = {sum(mp) / len(mp) / t:.2f}x" if mp and t else "")
        eff = [r["metrics"]["efficiency"] for r in runs if r["mode"] == "mptcp" and r["primary"] == primary
               and "efficiency" in r["metrics"]]
        if eff:
            line += f"; efficiency {sum(eff) / len(eff):.3f} (MPTCP / sum of per-path TCP)"
        console.print(line)
    others = sorted(set(tcp) - {r["primary"] for r in runs if r["mode"] == "mptcp"})
    if others:
        console.print("TCP alone: " + ", ".join(f"{p} {sum(tcp[p]) / len(tcp[p]):.2f} Mbit/s" for p in others))
    return console.export_text()
