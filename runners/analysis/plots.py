"""Figures like the papers': box plots per point, time series of a run, metric against a swept parameter.

Each figure is written as PNG, and also as SVG when asked. matplotlib runs headless (Agg).
"""
from __future__ import annotations

import atexit
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

# setup.sh builds matplotlib's font cache here once (building it takes ~20 s in a TCG guest)
FONT_CACHE_SEED = Path(sys.prefix) / "share" / "testbed-mplconfig"


def _writable_config_dir() -> None:
    """In the micro-VM the home folder is read-only: a temporary config dir, seeded with the font cache."""
    if "MPLCONFIGDIR" in os.environ or os.access(os.path.expanduser("~"), os.W_OK):
        return
    tmp = tempfile.mkdtemp(prefix="mpl-")
    atexit.register(shutil.rmtree, tmp, True)
    for cached in FONT_CACHE_SEED.glob("fontlist-*.json"):
        shutil.copy(cached, tmp)
    os.environ["MPLCONFIGDIR"] = tmp


_writable_config_dir()

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from scenarios.spec import units  # noqa: E402

from ..derived import case_of, group_runs  # noqa: E402

LABELS = {"throughput_mbps": "throughput (Mbit/s)", "ofo_mptcp": "MPTCP out-of-order segments",
          "ofo_tcp": "TCP out-of-order segments", "seconds": "completion time (s)",
          "retrans_segs": "retransmitted segments", "subflows": "subflows"}


def _save(fig, out: Path, name: str, formats: tuple[str, ...]) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in formats:
        p = out / f"{name}.{ext}"
        fig.savefig(p, dpi=110, bbox_inches="tight")
        paths.append(p)
    plt.close(fig)
    return paths


def numeric(value) -> float | None:
    """A swept value as a number for the x axis: durations in ms, rates in Mbit/s, sizes in bytes."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    for parse in (units.parse_duration_ms, units.parse_rate_mbit, units.parse_size_bytes):
        try:
            return float(parse(value))
        except ValueError:
            continue
    return None


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def boxplots(out: Path, doc: dict, metric: str, formats: tuple[str, ...] = ("png",)) -> list[Path]:

    groups = group_runs(doc)
    cases = sorted({case_of(r) for r in doc["runs"]})
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(groups) * len(cases)), 4.5))
    width = 0.8 / max(len(cases), 1)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ci, case in enumerate(cases):
        data, pos = [], []
        for gi, (_, (_, runs)) in enumerate(groups.items()):
            vals = [r["metrics"][metric] for r in runs if case_of(r) == case and r["status"] == "ok"
                    and r["metrics"].get(metric) is not None]
            if vals:
                data.append(vals)
                pos.append(gi + (ci - (len(cases) - 1) / 2) * width)
        if data:
            bp = ax.boxplot(data, positions=pos, widths=width * 0.9, patch_artist=True, manage_ticks=False)
            for patch in bp["boxes"]:
                patch.set_facecolor(colors[ci % len(colors)])
                patch.set_alpha(0.6)
            ax.plot([], [], color=colors[ci % len(colors)], lw=8, alpha=0.6, label=case)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([f"{pid}\n{label}" for pid, (label, _) in groups.items()], fontsize=7, rotation=0)
    ax.set_ylabel(LABELS.get(metric, metric))
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(f"{metric} per point")
    return _save(fig, out, f"box-{metric}", formats)


def timeseries(out: Path, run: dict, formats: tuple[str, ...] = ("png",)) -> list[Path]:
    fig, ax = plt.subplots(figsize=(7, 4))
    series = run.get("path_series_mbps") or []
    if series:
        paths = [k for k in series[0] if k != "t"]
        for p in paths:
            ax.plot([s["t"] for s in series], [s[p] for s in series], label=f"path {p} (interface counters)")
    iv = run.get("intervals") or []
    if iv:
        ax.step([i["end"] for i in iv], [i["mbps"] for i in iv], where="post", color="k", lw=1.2,
                label="total (iperf3 intervals)")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("throughput (Mbit/s)")
    ax.set_title(f"{run['id']} {run.get('point_label', '')}")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _save(fig, out, f"timeseries-{_safe(run['id'])}", formats)


def against_parameter(out: Path, stats: list[dict], key: str, metric: str,
                      formats: tuple[str, ...] = ("png",)) -> list[Path]:
    """One line per case (and per combination of the other parameters), mean with 95 % CI bars."""
    lines: dict[str, list[tuple[float, dict]]] = {}
    for row in stats:
        if row["metric"] != metric or key not in row["params"]:
            continue
        x = numeric(row["params"][key])
        if x is None:
            continue
        others = ", ".join(f"{k}={v}" for k, v in row["params"].items() if k != key)
        name = row["case"] + (f" ({others})" if others else "")
        lines.setdefault(name, []).append((x, row))
    if not lines:
        return []
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, pts in sorted(lines.items()):
        pts.sort(key=lambda t: t[0])
        xs = [x for x, _ in pts]
        ys = [r["mean"] for _, r in pts]
        err = [[r["mean"] - r["ci_low"] if r["ci_low"] is not None else 0 for _, r in pts],
               [r["ci_high"] - r["mean"] if r["ci_high"] is not None else 0 for _, r in pts]]
        ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=name)
    ax.set_xlabel(key)
    ax.set_ylabel(LABELS.get(metric, metric))
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    ax.set_title(f"{metric} against {key} (mean, 95% CI)")
    return _save(fig, out, f"{metric}-vs-{_safe(key)}", formats)


def write_plots(out: Path, doc: dict, stats: list[dict], svg: bool = False) -> list[Path]:
    formats = ("png", "svg") if svg else ("png",)
    written = []
    for metric in ("throughput_mbps", "ofo_mptcp"):
        written += boxplots(out, doc, metric, formats)
    first = next((r for r in doc["runs"] if r["mode"] == "mptcp" and r["status"] == "ok"), doc["runs"][0])
    written += timeseries(out, first, formats)
    keys = sorted({k for r in doc["runs"] for k in r.get("params", {}) if k != "variant"})
    for key in keys:
        for metric in ("throughput_mbps", "ofo_mptcp", "seconds"):
            written += against_parameter(out, stats, key, metric, formats)
    return written
