"""JUnit XML for CI: one test case per expectation and point.

A failed verdict is a <failure>, an inconclusive one a <skipped> with the
reason, so CI systems show both without treating "needs more runs" as green.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET

from .verdicts import FAIL, INCONCLUSIVE, Verdict


def render_junit(suite: str, verdicts: list[Verdict], timestamp: str = "") -> str:
    failures = sum(v.outcome == FAIL for v in verdicts)
    skipped = sum(v.outcome == INCONCLUSIVE for v in verdicts)
    root = ET.Element("testsuites", name=suite, tests=str(len(verdicts)), failures=str(failures),
                      errors="0", skipped=str(skipped))
    ts = ET.SubElement(root, "testsuite", name=suite, tests=str(len(verdicts)), failures=str(failures),
                       errors="0", skipped=str(skipped), time="0")
    if timestamp:
        ts.set("timestamp", timestamp)
    for v in verdicts:
        case = ET.SubElement(ts, "testcase", classname=f"{suite}.{v.point}", name=f"{v.name} [{v.label}]",
                             time="0")
        text = f"{v.check}\n{v.detail}\nruns: left {v.n_left}, right {v.n_right}"
        if v.outcome == FAIL:
            el = ET.SubElement(case, "failure", message=v.detail, type="verdict")
            el.text = text
        elif v.outcome == INCONCLUSIVE:
            ET.SubElement(case, "skipped", message=f"inconclusive: {v.detail}")
        else:
            out = ET.SubElement(case, "system-out")
            out.text = text
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
