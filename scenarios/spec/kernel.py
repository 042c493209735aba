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


# The `kernel` sweep key (and `--kernel A --kernel B`): a release prefix of an installed kernel ('6.1',
# '6.12', '6.12.95+deb12-amd64'), or the path of a kernel image (a bzImage of one's own tree).
KERNEL_KEY = "kernel"
KERNEL_LABEL = r"^(\d+(\.\d+){0,2}([.+~_-][A-Za-z0-9.+~_-]*)?|[A-Za-z0-9_.+~/-]*/[A-Za-z0-9_.+~/-]+)$"
# a kernel in an expectation, `mptcp@6.12.throughput_mbps`: a release prefix
KERNEL_IN_CHECK = r"\d+(?:\.\d+)?(?:\.\d+)?"


def is_kernel_path(label: str) -> bool:
    """A kernel named by the path of its image rather than by its release."""
    return "/" in label


def kernel_label_problem(label: object) -> str | None:
    """Why a `kernel` sweep value is not usable, or None."""
    if not isinstance(label, str) or not re.match(KERNEL_LABEL, label) or label.startswith("-"):
        return (f"{label!r} is not a kernel: give a release prefix of an installed kernel (6.1, 6.12) "
                "or the path of a kernel image (a bzImage)")
    return None


def release_matches(label: str, release: str | None) -> bool:
    """Does a release ('6.12.95+deb12-amd64') belong to a release prefix ('6.12')? '6.1' is not '6.12'."""
    if not release or is_kernel_path(label):
        return False
    if release == label:
        return True
    return release.startswith(label) and not release[len(label)].isdigit()
