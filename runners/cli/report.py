"""`run-scenario report DIR`: stats, plots, verdicts and JUnit again from a saved result set."""
from __future__ import annotations

import argparse
from pathlib import Path

from runners.analysis.report import report_set
from runners.analysis.summary import summary
from runners.console.output import err
from runners.errors import EXIT_INPUT


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run-scenario report",
                                description="Regenerate stats, plots, verdicts and JUnit from saved results "
                                            "(nothing is re-run).")
    p.add_argument("dir", help="a result set folder (results/<scenario>/<stamp>)")
    p.add_argument("--baseline", metavar="DIR", help="flag significant regressions against this result set")
    p.add_argument("--svg", action="store_true", help="write every figure as SVG too (default: PNG only)")
    p.add_argument("--junit", metavar="PATH", help="also write the JUnit XML here (for a CI system)")
    p.add_argument("--keep-unfaithful", action="store_true",
                   help="count the runs whose fidelity is unfaithful in the verdicts too (by default they are "
                        "left out, and each verdict says how many: docs/fidelity.md)")
    return p


def main(argv: list[str]) -> int:
    p = build_parser()
    a = p.parse_args(argv)
    d = Path(a.dir)
    if not (d / "results.json").exists():
        err(f"{d}: no results.json here")
        return EXIT_INPUT
    from runners.results.store import load_results
    doc = load_results(d)
    print(summary(doc["runs"], doc.get("metadata")))
    return report_set(d, Path(a.baseline) if a.baseline else None, svg=a.svg, junit=Path(a.junit) if a.junit else None,
                      keep_unfaithful=a.keep_unfaithful)
