"""Several result sets side by side: one table, and overlay figures against a swept parameter.

Each set is named by its scenario (or folder, when two share a scenario); its points are matched by
their parameters, and each case (mode@primary) keeps its own line. E2's figure (completion time
against file size for TCP, MPTCP with one subflow, MPTCP with a subflow per path) is one call over
its three result sets.
"""
from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

from runners.analysis.stats import describe
from runners.results.derived import case_of, group_runs


@dataclass(frozen=True)
class Row:
    set_name: str
    case: str
    point_label: str
    params: dict
    n: int
    mean: float
    ci_low: float | None
    ci_high: float | None


class CompareError(ValueError):
    """A folder that is not a result set, or a metric no run has."""


def load_sets(dirs: list[Path]) -> dict[str, dict]:
    """{name: results.json document}, named by scenario (folder name added when two share one)."""
    docs = []
    for d in dirs:
        path = Path(d) / "results.json"
        if not path.is_file():
            raise CompareError(f"{d}: not a result set (no results.json)")
        doc = json.loads(path.read_text())
        docs.append((doc.get("metadata", {}).get("scenario") or Path(d).name, Path(d), doc))
    names = [n for n, _, _ in docs]
    return {(n if names.count(n) == 1 else f"{n} ({d.name})"): doc for n, d, doc in docs}


def compare_rows(sets: dict[str, dict], metric: str) -> list[Row]:
    rows = []
    for name, doc in sets.items():
        for _, (label, runs) in group_runs(doc).items():
            for case in sorted({case_of(r) for r in runs}):
                vals = [r["metrics"][metric] for r in runs if case_of(r) == case and r["status"] == "ok"
                        and r["metrics"].get(metric) is not None]
                if vals:
                    s = describe(vals, floor=0.0)
                    rows.append(Row(name, case, label, runs[0].get("params", {}), s.n, s.mean, s.ci_low, s.ci_high))
    if not rows:
        raise CompareError(f"no run in these result sets has the metric {metric!r}")
    return rows


def render_table(rows: list[Row], metric: str) -> str:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"{metric}: mean and 95 % interval")
    for col in ("result set", "case", "point", "n", "mean", "95 % CI"):
        t.add_column(col)
    for r in rows:
        ci = f"[{r.ci_low:.4g}, {r.ci_high:.4g}]" if r.ci_low is not None else "n < 2: none"
        t.add_row(r.set_name, r.case, r.point_label, str(r.n), f"{r.mean:.4g}", ci)
    c = Console(record=True, width=140, file=io.StringIO())
    c.print(t)
    return c.export_text()


def overlay_figure(rows: list[Row], metric: str, by: str):
    """One line per result set and case: the metric's mean with its interval against `by`."""
    from .plots import mean_lines_figure, numeric

    lines: dict[str, list[tuple[float, Row]]] = {}
    for r in rows:
        x = numeric(r.params.get(by), by) if by in r.params else None
        if x is not None:
            lines.setdefault(f"{r.set_name}: {r.case}", []).append((x, r))
    if not lines:
        raise CompareError(f"--by {by}: no result set sweeps {by!r}")
    return mean_lines_figure({name: [(x, r.mean, r.ci_low, r.ci_high, r.n) for x, r in pts]
                              for name, pts in lines.items()}, by, metric, (8, 5))
