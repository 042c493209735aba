"""results.json's and runs.csv's text, made again after every run with only what changed made anew.

The store rewrites both files after every run, so that a finished run is never lost. Serialising every
run again each time made a set's writes grow with the square of its length: natively, the 200th run of a
set of lab 5's records took 0.63 s to store, and the set's stores 54 s in all; in a TCG guest each costs
about 15 times that (2026-11-28). So each run's text is kept from the last write and made again only when
its record is another object (added again, or read anew on resume) or its derived metrics changed (a new
TCP baseline of its point changes an MPTCP run's efficiency). The text is the same, byte for byte, as
`json.dumps(document, indent=2, default=str)` and table.render_csv give (tests/unit/test_set_text.py).
"""
from __future__ import annotations

import csv
import io
import json

from runners.results.table import CSV_FIELDS, param_columns, tidy_rows

_RUN_INDENT = "    "   # a run inside the document's "runs" list: two levels of json's indent=2


def with_metrics(run: dict, derived: dict | None) -> dict:
    """The run as written: its metrics with the derived ones (a copy; the record is left as it is)."""
    return {**run, "metrics": {**run["metrics"], **derived}} if derived else run


class SetText:
    """The last text of every run, by run id, with what it was made from."""

    def __init__(self) -> None:
        self._json: dict[str, tuple[dict, dict | None, str]] = {}
        self._csv: dict[str, tuple[dict, dict | None, tuple, str]] = {}

    def results_json(self, head: dict, runs: list[dict], derived: dict[str, dict]) -> str:
        """`json.dumps({**head, "runs": runs with their derived metrics}, indent=2, default=str) + "\\n"`."""
        texts = []
        for r in runs:
            d = derived.get(r["id"])
            kept = self._json.get(r["id"])
            if kept is None or kept[0] is not r or kept[1] != d:
                text = json.dumps(with_metrics(r, d), indent=2, default=str)
                kept = (r, d, "\n".join(_RUN_INDENT + line for line in text.split("\n")))
                self._json[r["id"]] = kept
            texts.append(kept[2])
        _forget_others(self._json, runs)
        head_text = json.dumps(head, indent=2, default=str)   # "{\n  ...\n}": the runs go before its "\n}"
        body = '"runs": [\n' + ",\n".join(texts) + "\n  ]" if texts else '"runs": []'
        return head_text[:-2] + ",\n  " + body + "\n}\n"

    def runs_csv(self, runs: list[dict], derived: dict[str, dict]) -> str:
        """table.render_csv of the runs with their derived metrics."""
        fields = tuple(CSV_FIELDS[:3] + param_columns(runs) + CSV_FIELDS[3:])
        out = io.StringIO()
        csv.DictWriter(out, fieldnames=fields, lineterminator="\n").writeheader()
        for r in runs:
            d = derived.get(r["id"])
            kept = self._csv.get(r["id"])
            if kept is None or kept[0] is not r or kept[1] != d or kept[2] != fields:
                buf = io.StringIO()
                w = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n", extrasaction="ignore")
                w.writerows(tidy_rows([with_metrics(r, d)]))
                kept = (r, d, fields, buf.getvalue())
                self._csv[r["id"]] = kept
            out.write(kept[3])
        _forget_others(self._csv, runs)
        return out.getvalue()


def _forget_others(kept: dict, runs: list[dict]) -> None:
    if len(kept) > len(runs):
        ids = {r["id"] for r in runs}
        for run_id in [k for k in kept if k not in ids]:
            del kept[run_id]
