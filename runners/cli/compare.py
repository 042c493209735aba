"""`run-scenario compare DIR...`: result sets side by side, a table and an overlay figure."""
from __future__ import annotations

import argparse
from pathlib import Path

from runners.console.output import err
from runners.errors import EXIT_INPUT, EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run-scenario compare",
                                description="Several result sets side by side: a table of means with 95 % "
                                            "intervals, and with --by an overlay figure (nothing is re-run).")
    p.add_argument("dirs", nargs="+", metavar="DIR", help="result set folders (results/<scenario>/<stamp>)")
    p.add_argument("--metric", default="throughput_mbps", help="a run metric (default: throughput_mbps; "
                                                               "e.g. seconds, ofo_mptcp, efficiency)")
    p.add_argument("--by", metavar="PARAM", help="a swept key for the x axis, e.g. traffic.bytes")
    p.add_argument("--out", metavar="DIR", help="where the figure goes (default: the current folder)")
    p.add_argument("--svg", action="store_true", help="write the figure as SVG too")
    return p


def main(argv: list[str]) -> int:
    p = build_parser()
    a = p.parse_args(argv)
    from runners.analysis.compare import CompareError, compare_rows, load_sets, overlay_figure, render_table
    try:
        rows = compare_rows(load_sets([Path(d) for d in a.dirs]), a.metric)
        print(render_table(rows, a.metric), flush=True)
        if a.by:
            from runners.analysis.plots import _safe, _save
            fig = overlay_figure(rows, a.metric, a.by)
            written = _save(fig, Path(a.out or "."), f"compare-{a.metric}-vs-{_safe(a.by)}",
                            ("png", "svg") if a.svg else ("png",))
            print("figure: " + ", ".join(str(w) for w in written))
    except CompareError as e:
        err(str(e))
        return EXIT_INPUT
    return EXIT_OK
