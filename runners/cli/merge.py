"""`run-scenario merge DIR...`: result sets of one scenario (--shard runs) combined into one."""
from __future__ import annotations

import argparse
from pathlib import Path

from runners.analysis.report import report_set
from runners.analysis.summary import summary
from runners.console.output import err
from runners.errors import EXIT_INPUT
from runners.paths import RESULTS


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run-scenario merge",
                                description="Combine result sets of the same scenario (e.g. --shard runs) into one.")
    p.add_argument("dirs", nargs="+", metavar="DIR")
    p.add_argument("--out", default=str(RESULTS), metavar="DIR", help="base folder for the merged set")
    return p


def main(argv: list[str]) -> int:
    p = build_parser()
    a = p.parse_args(argv)
    from runners.results.merge import MergeError, merge
    try:
        merged = merge([Path(d) for d in a.dirs], Path(a.out).resolve())
    except MergeError as e:
        err(str(e))
        return EXIT_INPUT
    print(f"merged {len(a.dirs)} result sets into {merged}")
    from runners.results.store import load_results
    print(summary(load_results(merged)["runs"]))
    return report_set(merged, None)
