"""runs.csv: the result set as a tidy table, one row per run, metric and path (or client), with each swept
value as a column, and the run's fidelity (ok, warn or unfaithful, and its reasons) on each of its rows.
The store writes it beside results.json after every run."""
from __future__ import annotations

import csv
import io

from scenarios.spec.expect import METRICS


CSV_FIELDS = ["run_id", "point", "label", "mode", "repeat", "primary", "status", "fidelity", "fidelity_reasons", "metric",
              "path", "client", "value", "unit"]
CLIENT_METRICS = {"throughput_mbps": "Mbit/s", "bytes_received": "B", "seconds": "s", "retransmits": "segments",
                  "sender_mean_rtt_ms": "ms", "started_after_s": "s"}


# metric name -> unit (shared with expectations); the order is the CSV's.
RUN_METRICS = METRICS
PATH_METRICS = {
    "bytes_received": "B",
    "bytes_sent": "B",
    "packets_received": "packets",
    "packets_sent": "packets",
    "loss_pct": "%",
    "throughput_mbps": "Mbit/s",
    "share": "fraction",
    "rtt_avg_ms": "ms",
    "ping_loss_pct": "%",
}


def tidy_rows(runs: list[dict]) -> list[dict]:
    rows = []
    for r in runs:
        base = {"run_id": r["id"], "point": r.get("point", "p001"), "label": r.get("point_label", "base"),
                **run_kernel_columns(r), **(r.get("params") or {}), "mode": r["mode"], "repeat": r["repeat"],
                "primary": r.get("primary", ""), "status": r["status"],
                "fidelity": (r.get("fidelity") or {}).get("status", ""),
                "fidelity_reasons": "; ".join((r.get("fidelity") or {}).get("reasons") or [])}
        for name, unit in RUN_METRICS.items():
            v = (r.get("metrics") or {}).get(name)
            if v is not None:
                rows.append({**base, "metric": name, "path": "", "value": v, "unit": unit})
        for pname, pm in (r.get("paths") or {}).items():
            for name, unit in PATH_METRICS.items():
                v = pm.get(name)
                if v is not None:
                    rows.append({**base, "metric": name, "path": pname, "value": v, "unit": unit})
        for cname, cm in (r.get("clients") or {}).items():
            for name, unit in CLIENT_METRICS.items():
                v = cm.get(name)
                if v is not None:
                    rows.append({**base, "metric": name, "path": "", "client": cname, "value": v, "unit": unit})
    return rows


def run_kernel_columns(run: dict) -> dict:
    """`kernel`: the swept kernel's label (6.12), or the release the run ran on when kernels are not swept;
    `kernel_release`: that release, always."""
    return {"kernel": run.get("kernel"), "kernel_release": run.get("kernel")}


def param_columns(runs: list[dict]) -> list[str]:
    """One column per swept key (and `variant`), in the order they first appear, then the kernel's."""
    cols: dict[str, None] = {}
    for r in runs:
        for k in r.get("params") or {}:
            cols.setdefault(k, None)
    cols.setdefault("kernel", None)
    cols.setdefault("kernel_release", None)
    return [k for k in cols if k not in CSV_FIELDS]


def render_csv(runs: list[dict]) -> str:
    """Tidy: one row per run, metric and path (or client), with the point, its label and its swept
    values as columns, so pandas can group by any of them."""
    buf = io.StringIO()
    fields = CSV_FIELDS[:3] + param_columns(runs) + CSV_FIELDS[3:]
    w = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    for row in tidy_rows(runs):
        w.writerow(row)
    return buf.getvalue()
