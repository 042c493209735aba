"""JUnit XML for CI: a test case per run and one per expectation and point.

A run that ended as an MPTCP fallback is an <error> (its numbers are plain
TCP's); a run set that failed before finishing (or was merged from a shard
that did) gets one <error> case with the status. A failed verdict is a
<failure>, an inconclusive one a <skipped> with the reason, so CI systems show
both without treating "needs more runs" as green. Runs carry their wall time
(metadata phases), verdicts 0, and each run its fidelity as properties
(`fidelity`: ok, warn or unfaithful; `fidelity_reasons`), as pytest's JUnit
puts a test's properties in its test case.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET

from runners.analysis.verdicts import FAIL, INCONCLUSIVE, Verdict
from runners.results.derived import counts_text
from runners.results.fidelity import reasons_text, status_of
from runners.results.merge import MERGED


def render_junit(suite: str, verdicts: list[Verdict], timestamp: str = "", runs: list[dict] | None = None,
                 metadata: dict | None = None) -> str:
    runs, metadata = runs or [], metadata or {}
    walls = {r["id"]: r.get("wall", 0.0) for r in (metadata.get("phases") or {}).get("runs", [])}
    set_failed = metadata.get("status") not in (None, "ok", MERGED)
    errors = sum(r["status"] != "ok" for r in runs) + set_failed
    failures = sum(v.outcome == FAIL for v in verdicts)
    skipped = sum(v.outcome == INCONCLUSIVE for v in verdicts)
    tests = len(runs) + set_failed + len(verdicts)
    total_time = f"{sum(walls.values()):.3f}"
    counts = dict(tests=str(tests), failures=str(failures), errors=str(errors), skipped=str(skipped))
    root = ET.Element("testsuites", name=suite, time=total_time, **counts)
    ts = ET.SubElement(root, "testsuite", name=suite, time=total_time, **counts)
    if timestamp:
        ts.set("timestamp", timestamp)
    for r in runs:
        _run_case(ts, suite, r, walls.get(r["id"], 0.0))
    if set_failed:
        case = ET.SubElement(ts, "testcase", classname=f"{suite}.runs", name="run set", time="0")
        ET.SubElement(case, "error", message=f"the run set ended {metadata['status']}", type="run-set")
    for v in verdicts:
        _verdict_case(ts, suite, v)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _run_case(ts: ET.Element, suite: str, r: dict, wall: float) -> None:
    label = r.get("point_label", "base")
    case = ET.SubElement(ts, "testcase", classname=f"{suite}.runs.{r.get('point', 'p001')}",
                         name=f"{r['id']} [{label}]", time=f"{wall:.3f}")
    m = r.get("metrics", {})
    summary = (f"{m.get('throughput_mbps', 0):.2f} Mbit/s over {m.get('seconds') or 0:.2f} s, "
               f"subflows {m.get('subflows')}, OFO tcp/mptcp {counts_text(m)[0]}")
    if status_of(r) is not None:
        props = ET.SubElement(case, "properties")
        ET.SubElement(props, "property", name="fidelity", value=status_of(r))
        summary += f", fidelity {status_of(r)}"
        if reasons_text(r):
            ET.SubElement(props, "property", name="fidelity_reasons", value=reasons_text(r))
            summary += f": {reasons_text(r)}"
    if r["status"] != "ok":
        el = ET.SubElement(case, "error", message=f"run status {r['status']}", type=r["status"])
        el.text = summary
    else:
        ET.SubElement(case, "system-out").text = summary


def _verdict_case(ts: ET.Element, suite: str, v: Verdict) -> None:
    case = ET.SubElement(ts, "testcase", classname=f"{suite}.{v.point}", name=f"{v.name} [{v.label}]", time="0")
    text = f"{v.check}\n{v.detail}\nruns: left {v.n_left}, right {v.n_right}"
    if v.outcome == FAIL:
        el = ET.SubElement(case, "failure", message=v.detail, type="verdict")
        el.text = text
    elif v.outcome == INCONCLUSIVE:
        ET.SubElement(case, "skipped", message=f"inconclusive: {v.detail}")
    else:
        ET.SubElement(case, "system-out").text = text
