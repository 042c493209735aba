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

from runners.results.derived import case_of, group_runs  # noqa: E402

LABELS = {"throughput_mbps": "throughput (Mbit/s)", "ofo_mptcp": "MPTCP out-of-order segments",
          "ofo_tcp": "TCP out-of-order segments", "seconds": "completion time (s)",
          "retrans_segs": "retransmitted segments", "subflows": "subflows", "efficiency": "efficiency",
          "recovery_s": "recovery after a path change (s)", "stall_s": "longest stall after a path change (s)"}
# the last part of a swept key -> what it is, in the unit numeric() turns it into
PARAM_WORDS = {"delay": "one-way delay (ms)", "bw": "rate (Mbit/s)", "loss": "loss (%)",
               "queue": "queue (packets)", "bytes": "transfer size (MiB)", "duration": "duration (s)",
               "send": "send buffer (MiB)", "receive": "receive buffer (MiB)"}
# sizes are drawn in MiB: in bytes, matplotlib put E2's 0.25-10 MiB on a "1e7" offset axis
SIZE_KEYS = {"bytes", "send", "receive"}
OWNER_WORDS = {"paths": "path", "links": "link"}


def warm_up() -> None:
    """Draw one small figure into memory: the fonts and the renderer load now, not at the first real one."""
    import io

    fig = plt.figure(figsize=(1, 1))
    fig.gca().set_title("warm-up")
    fig.savefig(io.BytesIO(), format="png")
    plt.close(fig)


def param_label(key: str) -> str:
    """'paths.A.delay' -> 'path A one-way delay (ms)'; 'traffic.bytes' -> 'transfer size (MiB)'."""
    parts = key.split(".")
    what = PARAM_WORDS.get(parts[-1], parts[-1])
    if len(parts) == 3 and parts[0] in OWNER_WORDS:
        return f"{OWNER_WORDS[parts[0]]} {parts[1]} {what}"
    return what


def _save(fig, out: Path, name: str, formats: tuple[str, ...]) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in formats:
        p = out / f"{name}.{ext}"
        fig.savefig(p, dpi=110, bbox_inches="tight")
        paths.append(p)
    plt.close(fig)
    return paths


def numeric(value, key: str = "") -> float | None:
    """A swept value as a number for the x axis: durations in ms, rates in Mbit/s, and for a size key
    (SIZE_KEYS, as param_label names it) MiB."""
    if isinstance(value, bool):
        return None
    if key.split(".")[-1] in SIZE_KEYS:
        try:
            return units.parse_size_bytes(value) / 2**20
        except ValueError:      # what is not a size (a list of buffer sizes) has no place on an axis
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


def boxplot_figure(doc: dict, metric: str):
    """One box per point and case; with fewer than 3 runs the runs themselves, marked 'no interval'."""
    groups = group_runs(doc)
    cases = sorted({case_of(r) for r in doc["runs"]})
    slots = len(groups) * len(cases)
    fig, ax = plt.subplots(figsize=(min(18, max(6, 1.2 * slots)), 4.5))
    crowded = slots > 16    # E3's 10 cases x 5: notes over every point would overlap; the legend says it
    width = 0.8 / max(len(cases), 1)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    top = 0.0
    for ci, case in enumerate(cases):
        color = colors[ci % len(colors)]
        counts = []
        for gi, (_, (_, runs)) in enumerate(groups.items()):
            vals = [r["metrics"][metric] for r in runs if case_of(r) == case and r["status"] == "ok"
                    and r["metrics"].get(metric) is not None]
            if not vals:
                continue
            counts.append(len(vals))
            top = max(top, *vals)
            x = gi + (ci - (len(cases) - 1) / 2) * width
            if len(vals) >= 3:
                bp = ax.boxplot([vals], positions=[x], widths=width * 0.9, patch_artist=True, manage_ticks=False,
                                medianprops={"color": "black", "linewidth": 2})
                for patch in bp["boxes"]:
                    patch.set_facecolor(color)
                    patch.set_alpha(0.6)
            else:
                ax.plot([x] * len(vals), vals, "o", color=color)
            if len(vals) < 3 and not crowded:
                ax.annotate(f"n={len(vals)},\nno interval", (x, max(vals)), textcoords="offset points",
                            xytext=(0, 6), ha="center", fontsize=6.5)
        if not counts:      # e.g. nstat counts of TCP baselines run together: the namespace's, not theirs
            ax.plot([], [], color=color, lw=8, alpha=0.2, label=f"{case} (not counted)")
            continue
        n = f"n={min(counts)}" if min(counts) == max(counts) else f"n={min(counts)}-{max(counts)}"
        no_interval = ", no interval" if crowded and max(counts) < 3 else ""
        ax.plot([], [], color=color, lw=8, alpha=0.6, label=f"{case} ({n} per point{no_interval})")
    ax.set_xticks(range(len(groups)))
    ax.set_xlim(-0.6, len(groups) - 0.4)
    ax.set_xticklabels([label for _, (label, _) in groups.items()], fontsize=7, rotation=0)
    ax.set_ylabel(LABELS.get(metric, metric))
    ax.set_ylim(0, top * 1.25 or 1)   # room above the highest run for its note and the legend
    # crowded: one row across the top, in the room kept above the highest run, not over the last points
    ax.legend(fontsize=8, loc="upper center" if crowded else "upper right", ncol=len(cases) if crowded else 1)
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(f"{LABELS.get(metric, metric)} per point")
    return fig


def boxplots(out: Path, doc: dict, metric: str, formats: tuple[str, ...] = ("png",)) -> list[Path]:
    return _save(boxplot_figure(doc, metric), out, f"box-{metric}", formats)


def timeseries_figure(run: dict):
    """Per-path rates and the connection's goodput over time, each value drawn over the interval it
    was measured in (from its start), as the receiver counted it."""
    fig, ax = plt.subplots(figsize=(7, 4))
    series = run.get("path_series_mbps") or []
    counted = run.get("path_series_basis", "receiver's counters")
    if series:
        paths = [k for k in series[0] if k not in ("t", "t0")]
        starts = _interval_starts(series)
        for p in paths:
            xs = starts + [series[-1]["t"]]
            ys = [s[p] for s in series] + [series[-1][p]]
            ax.step(xs, ys, where="post", label=f"path {p} ({counted})")
    iv = run.get("intervals") or []
    if iv:
        side = run.get("intervals_side", "client's")   # result sets before 2026-11-22 kept the client's
        ax.step([i["start"] for i in iv] + [iv[-1]["end"]], [i["mbps"] for i in iv] + [iv[-1]["mbps"]],
                where="post", color="k", lw=1.2, label=f"goodput, all paths ({side} iperf3 intervals)")
    ax.set_xlabel("time since the transfer started (s)")
    ax.set_ylabel("throughput (Mbit/s)")
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    _event_markers(ax, run)
    ax.set_title(f"run {run['id']}, {run.get('point_label', 'base')}")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return fig


def _event_markers(ax, run: dict) -> None:
    """Each applied change of the run as a labelled vertical line at the time it was applied."""
    changes = [c for c in (run.get("events") or {}).get("changes", []) if c.get("applied_s") is not None]
    top = ax.get_ylim()[1]
    for k, c in enumerate(changes):
        ax.axvline(c["applied_s"], color="tab:red", lw=0.9, ls="--")
        rec = c.get("recovery_s")
        note = f", recovered {rec:.2f} s" if rec is not None else ""
        ax.text(c["applied_s"], top * (0.97 - 0.08 * (k % 4)), f" {c['event']}: {c['detail']}{note}",
                fontsize=6.5, color="tab:red", va="top")


def _interval_starts(series: list[dict]) -> list[float]:
    """Each value's interval start: recorded as t0, or (older result sets) the previous sample's time."""
    if all("t0" in s for s in series):
        return [s["t0"] for s in series]
    first = series[0]["t"] - (series[1]["t"] - series[0]["t"] if len(series) > 1 else series[0]["t"])
    return [max(0.0, first)] + [s["t"] for s in series[:-1]]


def timeseries(out: Path, run: dict, formats: tuple[str, ...] = ("png",)) -> list[Path]:
    return _save(timeseries_figure(run), out, f"timeseries-{_safe(run['id'])}", formats)


def against_parameter_figure(stats: list[dict], key: str, metric: str):
    """One line per case (and per combination of the other parameters), mean with 95 % CI bars;
    None when the key's values are not numbers."""
    lines: dict[str, list[tuple[float, dict]]] = {}
    for row in stats:
        if row["metric"] != metric or key not in row["params"]:
            continue
        x = numeric(row["params"][key], key)
        if x is None:
            continue
        others = ", ".join(f"{k}={v}" for k, v in row["params"].items() if k != key)
        name = row["case"] + (f" ({others})" if others else "")
        lines.setdefault(name, []).append((x, row))
    if not lines:
        return None
    return mean_lines_figure({name: [(x, row["mean"], row["ci_low"], row["ci_high"], row["n"]) for x, row in pts]
                              for name, pts in lines.items()}, key, metric, (7, 4.5))


def mean_lines_figure(lines: dict[str, list[tuple]], key: str, metric: str, size: tuple[float, float]):
    """One line per name: (x, mean, ci_low, ci_high, n) points, sorted by x, with 95 % CI bars and n in
    the legend; the x axis names the swept key and its unit. Shared by the report and `compare`."""
    fig, ax = plt.subplots(figsize=size)
    for name, pts in sorted(lines.items()):
        pts = sorted(pts, key=lambda t: t[0])
        err = [[m - lo if lo is not None else 0 for _, m, lo, _, _ in pts],
               [hi - m if hi is not None else 0 for _, m, _, hi, _ in pts]]
        ns = sorted({n for *_, n in pts})
        n = f"n={ns[0]}" if len(ns) == 1 else f"n={ns[0]}-{ns[-1]}"
        ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=err, marker="o", capsize=3,
                    label=f"{name} ({n})")
    ax.set_xlabel(param_label(key))
    ax.set_ylabel(LABELS.get(metric, metric))
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    ax.set_title(f"{LABELS.get(metric, metric)} against {param_label(key)} (mean, 95% CI)")
    return fig


def against_parameter(out: Path, stats: list[dict], key: str, metric: str,
                      formats: tuple[str, ...] = ("png",)) -> list[Path]:
    fig = against_parameter_figure(stats, key, metric)
    return [] if fig is None else _save(fig, out, f"{metric}-vs-{_safe(key)}", formats)


def write_plots(out: Path, doc: dict, stats: list[dict], svg: bool = False) -> list[Path]:
    formats = ("png", "svg") if svg else ("png",)
    written = []
    for metric in ("throughput_mbps", "ofo_mptcp"):
        written += boxplots(out, doc, metric, formats)
    first = next((r for r in doc["runs"] if r["mode"] == "mptcp" and r["status"] == "ok"), doc["runs"][0])
    written += timeseries(out, first, formats)
    if any(r.get("events") for r in doc["runs"]):
        # with path changes, the baseline's series shows what MPTCP is for; recovery and stall per point
        tcp = next((r for r in doc["runs"] if r["mode"] == "tcp" and r.get("events")), None)
        written += timeseries(out, tcp, formats) if tcp is not None and tcp is not first else []
        for metric in ("recovery_s", "stall_s"):
            written += boxplots(out, doc, metric, formats)
    # a kernel is a category, not a number on an axis (6.10 is not 6.1): its points are boxes of their own
    keys = sorted({k for r in doc["runs"] for k in r.get("params", {}) if k not in ("variant", "kernel")})
    for key in keys:
        for metric in ("throughput_mbps", "ofo_mptcp", "seconds"):
            written += against_parameter(out, stats, key, metric, formats)
    return written
