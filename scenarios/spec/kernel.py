"""Kernel releases and the scenario's `requires.kernel` constraint: one parser for both.

A release such as '6.12.95+deb12-amd64' reads as (6, 12, 95); a requirement
such as '>=6.12' compares that many parts (missing parts count as 0).
"""
from __future__ import annotations

import operator
import re

KERNEL_REQ = r"^(>=|<=|==|>|<)\s*\d+(\.\d+){0,2}$"
_OPS = {">=": operator.ge, "<=": operator.le, "==": operator.eq, ">": operator.gt, "<": operator.lt}


def release_version(release: str) -> tuple[int, ...]:
    """'6.12.95+deb12-amd64' -> (6, 12, 95); '6.1.0-56-amd64' -> (6, 1, 0); no leading number -> ()."""
    m = re.match(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?", release)
    if not m:
        return ()
    return tuple(int(x) for x in m.groups() if x is not None)


def satisfies(release: str, requirement: str | None) -> bool:
    """Does a kernel release meet a constraint such as '>=6.12'? No constraint: yes."""
    if not requirement:
        return True
    m = re.match(r"^(>=|<=|==|>|<)\s*(\d+(?:\.\d+){0,2})$", requirement.strip())
    if not m:
        raise ValueError(f"bad kernel requirement {requirement!r}")
    want = tuple(int(x) for x in m.group(2).split("."))
    n = len(want)
    have = (release_version(release) + (0, 0, 0))[:n]
    return _OPS[m.group(1)](have, want)
