"""Metrics derived from several runs of one point, computed on copies, never in place. The results
store writes them into results.json and runs.csv; the analysis reads them from there.

E3's efficiency: an MPTCP run's throughput over the sum of the mean TCP throughputs of the paths it
recorded (`efficiency_paths`, from runs.tcp_on), where each of them has a successful TCP run alone
in the same point.
"""
from __future__ import annotations

import copy


def case_of(run: dict) -> str:
    return f"{run['mode']}@{run['primary']}"


def efficiency_by_run(runs: list[dict]) -> dict[str, float]:
    """{run id: efficiency} for the MPTCP runs of one point that have every TCP baseline they name."""
    tcp: dict[str, list[float]] = {}
    for r in runs:
        if r["mode"] == "tcp" and r["status"] == "ok":
            tcp.setdefault(r["primary"], []).append(r["metrics"]["throughput_mbps"])
    out = {}
    for r in runs:
        names = r.get("efficiency_paths")
        if r["mode"] != "mptcp" or not names or any(n not in tcp for n in names):
            continue
        total = sum(sum(tcp[n]) / len(tcp[n]) for n in names)
        if total > 0:
            out[r["id"]] = r["metrics"]["throughput_mbps"] / total
    return out


def derived_metrics(runs: list[dict]) -> dict[str, dict]:
    """{run id: {metric: value}}: what one point's runs derive, for the runs that derive any."""
    return {run_id: {"efficiency": eff} for run_id, eff in efficiency_by_run(runs).items()}


def derived_by_run(runs: list[dict]) -> dict[str, dict]:
    """derived_metrics of runs of any points, each derived within its own point."""
    by_point: dict[str, list[dict]] = {}
    for r in runs:
        by_point.setdefault(r.get("point", "p001"), []).append(r)
    return {run_id: m for group in by_point.values() for run_id, m in derived_metrics(group).items()}


def with_derived(runs: list[dict]) -> list[dict]:
    """Copies of one point's runs, with the derived metrics in each run's `metrics`."""
    derived = derived_metrics(runs)
    out = []
    for r in runs:
        r = copy.deepcopy(r)
        r["metrics"].update(derived.get(r["id"], {}))
        out.append(r)
    return out


def group_runs(doc: dict) -> dict[str, tuple[str, list[dict]]]:
    """{point id: (point label, runs with derived metrics)}; a result set without points is one point."""
    out: dict[str, tuple[str, list[dict]]] = {}
    for r in doc["runs"]:
        out.setdefault(r.get("point", "p001"), (r.get("point_label", "base"), []))[1].append(r)
    return {pid: (label, with_derived(runs)) for pid, (label, runs) in sorted(out.items())}


def counts_text(m: dict) -> tuple[str, str]:
    """(OFO tcp/mptcp, retransmitted segments) as tables and progress lines show them: "-" where not
    counted (a TCP baseline run alongside others: nstat counts the whole namespace)."""
    def shown(v):
        return "-" if v is None else str(v)
    return f"{shown(m.get('ofo_tcp'))}/{shown(m.get('ofo_mptcp'))}", shown(m.get("retrans_segs"))


def subflow_warning(run: dict) -> str | None:
    """"expected 2 subflows, got 1 on r001-mptcp-A: <why>" for a run with fewer subflows than its plan
    gives (its `missing_subflows`), as the run's progress and the summary warn; else None."""
    m = run["metrics"]
    if not m.get("missing_subflows"):
        return None
    why = run.get("subflow_shortfall")
    return (f"expected {m['subflows_expected']} subflows, got {m['subflows']} on {run['id']}"
            + (f": {why}" if why else ""))
