"""Tables, verdicts, JUnit and plots from a saved result set, without re-running anything.

`run-scenario report DIR` calls this; so does every run when it finishes.
Writes into DIR: stats.json, stats.csv (one row per point, case and metric),
verdicts.json, junit.xml (a case per run, and per expectation and point),
plots/*.png|svg, and the report as pages: report.md and a self-contained report.html.
"""
from __future__ import annotations

import csv
import io
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from scenarios.spec.expect import METRICS
from scenarios.spec.loader import load_experiment

from runners.analysis.junit import render_junit
from runners.analysis.pcap_subflows import write_subflow_tables
from runners.analysis.stats import describe
from runners.analysis.summary import summary
from runners.analysis.verdicts import (ACROSS_KERNELS, AT_A_POINT, FAIL, INCONCLUSIVE, PASS, Verdict, evaluate_points,
    regressions)
from runners.console.output import err, info
from runners.errors import EXIT_FAIL, EXIT_INPUT, EXIT_OK
from runners.results.derived import case_of, group_runs
from runners.results.fidelity import unfaithful
from runners.results.metadata import read_metadata_file
from runners.results.store import atomic_write, load_results
from runners.results.table import run_kernel_columns

STAT_METRICS = ("throughput_mbps", "efficiency", "seconds", "ofo_tcp", "ofo_mptcp", "retrans_segs", "subflows",
                "missing_subflows", "recovery_s", "stall_s")


@dataclass
class Report:
    dir: Path
    stats: list[dict]
    verdicts: list[Verdict]
    unfaithful: list[str] = field(default_factory=list)   # the runs the emulator did not keep up with

    @property
    def failed(self) -> bool:
        return any(v.outcome == FAIL for v in self.verdicts)

    def inconclusive_points(self) -> set[str]:
        return {v.point for v in self.verdicts if v.outcome == INCONCLUSIVE and v.kind == AT_A_POINT}

    def inconclusive_across_kernels(self) -> set[str]:
        """The points of cross-kernel checks still inconclusive (their ids are joined by '+')."""
        return {pid for v in self.verdicts if v.outcome == INCONCLUSIVE and v.kind == ACROSS_KERNELS
                for pid in v.point.split("+")}


def point_stats(doc: dict) -> list[dict]:
    rows = []
    for pid, (label, runs) in group_runs(doc).items():
        params = runs[0].get("params", {})
        kernel = run_kernel_columns(runs[0])
        for case in sorted({case_of(r) for r in runs}):
            sel = [r for r in runs if case_of(r) == case and r["status"] == "ok"]
            for metric in STAT_METRICS:
                vals = [r["metrics"][metric] for r in sel if r["metrics"].get(metric) is not None]
                if vals:
                    rows.append({"point": pid, "label": label, "params": params, **kernel, "case": case, "metric": metric,
                                 "unit": METRICS.get(metric, ""), **describe(vals, floor=0.0).to_dict()})
    return rows


def render_stats_csv(rows: list[dict]) -> str:
    """One row per point, case and metric: the point's label and swept values as columns, the unit."""
    params = list(dict.fromkeys(k for r in rows for k in r["params"]))
    kernel = [k for k in ("kernel", "kernel_release") if k not in params]   # `kernel` is a param when swept
    fields = ["point", "label", *params, *kernel, "case", "metric", "unit", "n", "mean", "median", "q1", "q3", "min",
              "max", "stdev", "ci_low", "ci_high", "ci_clipped"]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows({**r, **r["params"]} for r in rows)
    return buf.getvalue()


def verdict_table(verdicts: list[Verdict]) -> str:
    from rich.console import Console
    from rich.table import Table

    t = Table(title="verdicts")
    for col in ("point", "expectation", "verdict", "detail"):
        t.add_column(col)
    for v in verdicts:
        mark = {PASS: "pass", FAIL: "FAIL", INCONCLUSIVE: "inconclusive"}[v.outcome]
        t.add_row(f"{v.point} {v.label}", v.name, mark, v.detail)
    c = Console(record=True, width=140, file=io.StringIO())
    c.print(t)
    return c.export_text()


def make_report(run_dir: Path, baseline: Path | None = None, plots: bool = True, svg: bool = False,
                keep_unfaithful: bool = False) -> Report:
    run_dir = Path(run_dir)
    doc = load_results(run_dir)
    # a kernel sweep made on the command line (--kernel A --kernel B) is part of the set's experiment
    exp = load_experiment(run_dir / "scenario.yaml", (doc.get("metadata") or {}).get("kernel_sweep"), read_traces=False)
    groups = group_runs(doc)
    stats = point_stats(doc)
    verdicts = evaluate_points(exp.scenario, groups, keep_unfaithful)   # unfaithful runs left out unless kept
    if baseline is not None:
        verdicts += regressions(groups, group_runs(load_results(baseline)), keep_unfaithful=keep_unfaithful)
    atomic_write(run_dir / "stats.json", json.dumps(stats, indent=1, default=str) + "\n")
    atomic_write(run_dir / "stats.csv", render_stats_csv(stats))
    atomic_write(run_dir / "verdicts.json", json.dumps([v.to_dict() for v in verdicts], indent=1) + "\n")
    atomic_write(run_dir / "junit.xml", render_junit(exp.scenario.name, verdicts,
                                                     doc.get("metadata", {}).get("started_utc", ""),
                                                     runs=doc["runs"], metadata=doc.get("metadata", {})))
    if plots and doc["runs"]:
        from .page import render_html, render_markdown
        from .plots import write_plots
        figures = [f for f in write_plots(run_dir / "plots", doc, stats, svg=svg) if f.suffix == ".png"]
        scenario_text = (run_dir / "scenario.yaml").read_text()
        atomic_write(run_dir / "report.md", render_markdown(run_dir, doc, scenario_text, verdicts, figures))
        atomic_write(run_dir / "report.html", render_html(run_dir, doc, scenario_text, verdicts, figures))
    return Report(run_dir, stats, verdicts, [r["id"] for r in doc["runs"] if unfaithful(r)])


def summary_and_report(run_dir: Path, options, code: int) -> int:
    """Print the summary, write stats/plots/verdicts/JUnit, time it; a failed verdict turns exit 0 into 1."""
    from runners.results.store import ResultStore, load_results

    t0 = time.monotonic()
    doc = load_results(run_dir)
    print(summary(doc["runs"], doc.get("metadata")), flush=True)
    verdict_code = report_set(run_dir, Path(options.baseline) if options.baseline else None, svg=options.svg,
                           plots=not options.no_plots,
                           junit=Path(options.junit) if options.junit else None)
    store = ResultStore(run_dir)
    store.metadata = read_metadata_file(run_dir)
    store.finish_metadata(phases={**store.metadata.get("phases", {}), "report": round(time.monotonic() - t0, 3)})
    if code != EXIT_OK:
        return code
    strict = strict_fidelity_code(doc["runs"]) if options.strict_fidelity else EXIT_OK
    return verdict_code if verdict_code != EXIT_OK else strict


def strict_fidelity_code(runs: list[dict]) -> int:
    """--strict-fidelity: a set with unfaithful runs ends with exit 1, naming them (their records stay)."""
    bad = [r["id"] for r in runs if unfaithful(r)]
    if not bad:
        return EXIT_OK
    err(f"--strict-fidelity: {len(bad)} run(s) unfaithful: {', '.join(bad)} (the emulator did not keep up; "
        "their reasons are in the summary above and in results.json)")
    return EXIT_FAIL


def report_set(run_dir: Path, baseline: Path | None, svg: bool = False, junit: Path | None = None,
            plots: bool = True, keep_unfaithful: bool = False) -> int:
    """Stats, plots, verdicts and JUnit for a result set; 1 when a verdict failed. The verdicts leave the
    unfaithful runs out (runners.results.fidelity) unless `keep_unfaithful`."""
    from scenarios.spec.loader import ScenarioError

    from runners.analysis.report import make_report, verdict_table
    from runners.results.store import atomic_write

    try:
        rep = make_report(run_dir, baseline, plots=plots, svg=svg, keep_unfaithful=keep_unfaithful)
    except ScenarioError as e:   # a result set's scenario.yaml edited by hand: the file and the field
        print(e.render(), file=sys.stderr)
        return EXIT_INPUT
    # --capture's subflow tables: here, not in make_report, which --until-conclusive calls between rounds
    # in the guest, where tshark is slow; here runs on the host for a micro-VM's set
    for warning in write_subflow_tables(run_dir, load_results(run_dir)):
        info(f"warning: {warning}")
    if rep.verdicts:
        print(verdict_table(rep.verdicts), flush=True)
    if rep.unfaithful and rep.verdicts:   # the summary above named them; here, how to count them anyway
        info(f"fidelity: {len(rep.unfaithful)} run(s) unfaithful ({', '.join(rep.unfaithful)}): "
             + ("counted in the verdicts (--keep-unfaithful)" if keep_unfaithful else
                f"left out of the verdicts (`run-scenario report {run_dir} --keep-unfaithful` counts them)"))
    info(f"junit: {run_dir / 'junit.xml'}")
    if junit is not None:
        atomic_write(junit, (run_dir / "junit.xml").read_text())
        info(f"junit: {junit}")
    info(f"plots: {run_dir / 'plots'}" if plots else f"plots: none (--no-plots; `run-scenario report {run_dir}`)")
    return EXIT_FAIL if rep.failed else EXIT_OK
