"""The summary printed after a run: a table of the runs, and MPTCP against TCP per primary path."""
from __future__ import annotations

import io

from runners.results.derived import counts_text, subflow_warning, with_derived
from runners.results.fidelity import OK, UNFAITHFUL, reasons_text, status_of


def summary(runs: list[dict], metadata: dict | None = None) -> str:
    """A short table of the runs, and the MPTCP/TCP ratio of mean throughputs (per kernel when the set
    sweeps kernels); then a warning per run with fewer subflows than its plan gives, a line per run the
    emulator did not keep up with (its fidelity), and the kernels that did not run the scenario, and why."""
    text = _runs_and_ratios(runs)
    warnings = subflow_warnings(runs) + fidelity_lines(runs)
    refused = [f"kernel {k}: not run ({why})" for k, why in refused_kernels(metadata or {}).items()]
    return text + "".join(line + "\n" for line in warnings + refused)


def subflow_warnings(runs: list[dict]) -> list[str]:
    """A line per run with fewer subflows than its plan gives (derived.subflow_warning)."""
    return [f"warning: {w}" for w in map(subflow_warning, runs) if w]


def fidelity_lines(runs: list[dict]) -> list[str]:
    """A line per run whose fidelity is not ok, with its reasons; then how many the verdicts leave out."""
    lines = [f"fidelity {status_of(r)}: run {r['id']}: {reasons_text(r)}" for r in runs
             if status_of(r) not in (None, OK)]
    left_out = sum(status_of(r) == UNFAITHFUL for r in runs)
    if left_out:
        lines.append(f"fidelity: {left_out} of {len(runs)} run(s) unfaithful, left out of the verdicts "
                     "(docs/fidelity.md)")
    return lines


def subflows_text(m: dict) -> str:
    """A run's subflow count as the tables show it: "?" when unknown, "1 of 2" when some are missing."""
    if m.get("subflows") is None:
        return "?"
    return f"{m['subflows']} of {m['subflows_expected']}" if m.get("missing_subflows") else str(m["subflows"])


def refused_kernels(metadata: dict) -> dict[str, str]:
    """{kernel label: why it did not run} from a result set's metadata (runners/backends/vm/kernel_sets.py)."""
    return {label: k["refused"] for label, k in (metadata.get("kernels") or {}).items() if k.get("refused")}


def _runs_and_ratios(runs: list[dict]) -> str:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="runs", show_lines=False)
    for col in ("run", "mode", "primary", "Mbit/s", "s", "subflows", "OFO tcp/mptcp", "retrans", "bytes per path",
                "fidelity"):
        table.add_column(col)
    for r in runs:
        m = r["metrics"]
        shares = "  ".join(f"{n}:{(p.get('share') or 0) * 100:.0f}%" for n, p in r["paths"].items())
        table.add_row(r["id"], r["mode"] + ("" if r["status"] == "ok" else f" ({r['status']})"), r["primary"],
                      f"{m['throughput_mbps']:.2f}", f"{m.get('seconds') or 0:.2f}", subflows_text(m),
                      *counts_text(m), shares, status_of(r) or "-")
    console = Console(record=True, width=120, force_terminal=False, file=io.StringIO())
    console.print(table)
    if len({r.get("point", "p001") for r in runs}) > 1:
        # pooled means across sweep points or variants would mix unlike cases
        for line in per_kernel_lines(runs):
            console.print(line)
        console.print("several points: per-point means and intervals are in stats.csv and the verdicts")
        return console.export_text()
    runs = with_derived(runs)
    for line in comparison_lines(runs):
        console.print(line)
    return console.export_text()


def per_kernel_lines(runs: list[dict]) -> list[str]:
    """A kernel sweep: the comparison of each point, named by its other parameters and its kernel."""
    points: dict[str, list[dict]] = {}
    for r in runs:
        if "kernel" in (r.get("params") or {}):
            points.setdefault(r.get("point", "p001"), []).append(r)
    lines = []
    for pid, mine in sorted(points.items(), key=lambda kv: (_others(kv[1][0]), kv[0])):
        head = ", ".join(x for x in (_others(mine[0]), f"kernel {mine[0]['params']['kernel']}") if x)
        lines += [f"{head}: {line}" for line in comparison_lines(with_derived(mine))]
    return lines


def _others(run: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in (run.get("params") or {}).items() if k != "kernel")


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def comparison_lines(runs: list[dict]) -> list[str]:
    """Per primary path: MPTCP against the best single path's TCP and against the sum of the single
    paths' TCP, each labelled with the paths it stands for. The TCP of the primary path alone would
    flatter MPTCP whenever the primary is the slowest path."""
    ok = [r for r in runs if r["status"] == "ok"]
    tcp: dict[str, list[float]] = {}
    for r in ok:
        if r["mode"] == "tcp":
            tcp.setdefault(r["primary"], []).append(r["metrics"]["throughput_mbps"])
    tcp_means = {p: _mean(v) for p, v in sorted(tcp.items())}
    lines = []
    for primary in sorted({r["primary"] for r in ok if r["mode"] == "mptcp"}):
        mp = _mean([r["metrics"]["throughput_mbps"] for r in ok if r["mode"] == "mptcp" and r["primary"] == primary])
        line = f"primary {primary}: MPTCP {mp:.2f} Mbit/s"
        if tcp_means:
            best = max(tcp_means, key=tcp_means.get)
            line += f"; best single path (TCP on {best}) {tcp_means[best]:.2f} Mbit/s"
            line += f" = {mp / tcp_means[best]:.2f}x" if tcp_means[best] else ""
        if len(tcp_means) > 1:
            total = sum(tcp_means.values())
            line += (f"; sum of single paths (TCP on {'+'.join(tcp_means)}) {total:.2f} Mbit/s"
                     + (f" = {mp / total:.2f}" if total else ""))
        eff = [r["metrics"]["efficiency"] for r in ok if r["mode"] == "mptcp" and r["primary"] == primary
               and "efficiency" in r["metrics"]]
        if eff:
            line += f"; efficiency {_mean(eff):.3f} (MPTCP / sum of its paths' TCP)"
        lines.append(line)
    if not lines and tcp_means:
        lines.append("TCP alone: " + ", ".join(f"{p} {m:.2f} Mbit/s" for p, m in tcp_means.items()))
    return lines
