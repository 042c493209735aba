"""Expectations: small, checked comparisons between a point's runs.

    mptcp.throughput_mbps >= 1.8 * tcp.throughput_mbps
    mptcp@B.throughput_mbps > mptcp@A.throughput_mbps      (primary B beats primary A)
    mptcp@A.ofo_mptcp > mptcp@B.ofo_mptcp
    mptcp.subflows >= 2
    mptcp.missing_subflows == 0                                        (every planned subflow joined)
    mptcp@6.12.throughput_mbps >= 0.95 * mptcp@6.1.throughput_mbps   (kernel 6.12 against 6.1)
    mptcp@6.12@B.seconds <= mptcp@6.1@B.seconds                        (a kernel and a primary path)

A side is `<mode>[@<kernel>][@<primary path>].<metric>`; a kernel is a release
prefix (digits and dots; path names start with a letter) and needs a scenario
that sweeps `kernel`: such a check compares the points that differ only in
their kernel; the right side may be a number
or `<factor> * <side>`. The operators are >=, <=, >, < and == (for counts: every run
equal). Parsed with one regular expression, never eval'd.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .kernel import KERNEL_IN_CHECK

# Run metrics an expectation may name (the keys of every run's `metrics`).
METRICS = {
    "throughput_mbps": "Mbit/s",
    "sender_throughput_mbps": "Mbit/s",
    "seconds": "s",
    "bytes_received": "B",
    "iperf_retransmits": "segments",
    "retrans_segs": "segments",
    "ofo_tcp": "segments",
    "ofo_mptcp": "segments",
    "ofo_mptcp_tail": "segments",
    "subflows": "count",
    # what the run's plan should give (endpoints, signal ports, limits; 1 for TCP), and how many of
    # those the run lacked: null when the plan cannot say (runners.collect.subflows.expected_subflows)
    "subflows_expected": "count",
    "missing_subflows": "count",
    "mptcp_joins": "count",
    "sender_mean_rtt_ms": "ms",
    # several clients at once (E5): the mean and the smallest per-client throughput
    # (one client: both equal throughput_mbps)
    "throughput_per_client_mbps": "Mbit/s",
    "throughput_min_client_mbps": "Mbit/s",
    # several clients: the time between the first client's transfer starting and the last one's
    "clients_start_spread_s": "s",
    # derived when the point has TCP baselines on every path (runs.tcp_on: every-path):
    # MPTCP throughput / sum of the per-path TCP throughputs (E3's formula)
    "efficiency": "fraction",
    # fixed-size transfers (traffic.bytes): bytes the receiver got / bytes asked for; 1.0 unless
    # iperf3 ended before the receiver had them all (esnet/iperf#382; see runners.traffic.iperf3.Iperf3Tool._completion)
    "delivered_fraction": "fraction",
    # a scenario with events (runners.collect.event_record): the worst stall and recovery over the run's
    # changes (null when a change left no live path or goodput never recovered), and the largest lag of
    # an applied change behind its planned time
    "recovery_s": "s",
    "stall_s": "s",
    "event_drift_max_ms": "ms",
}
# Metrics for which a lower value is better (for baseline regressions).
LOWER_IS_BETTER = {"seconds", "iperf_retransmits", "retrans_segs", "ofo_tcp", "ofo_mptcp", "ofo_mptcp_tail",
                   "sender_mean_rtt_ms", "missing_subflows", "recovery_s", "stall_s", "event_drift_max_ms"}

_SIDE = (r"(?P<{p}mode>mptcp|tcp)(?:@(?P<{p}kernel>" + KERNEL_IN_CHECK + r"))?"
         r"(?:@(?P<{p}primary>[A-Za-z][A-Za-z0-9_-]*))?\.(?P<{p}metric>[a-z_]+)")
_NUM = r"\d+(?:\.\d+)?"
_CHECK = re.compile(
    rf"^\s*{_SIDE.format(p='l')}\s*(?P<op>>=|<=|==|>|<)\s*"
    rf"(?:(?P<const>{_NUM})|(?:(?P<factor>{_NUM})\s*\*\s*)?{_SIDE.format(p='r')})\s*$")


@dataclass(frozen=True)
class Side:
    mode: str
    primary: str | None
    metric: str
    kernel: str | None = None

    def __str__(self) -> str:
        return (f"{self.mode}{'@' + self.kernel if self.kernel else ''}"
                f"{'@' + self.primary if self.primary else ''}.{self.metric}")


@dataclass(frozen=True)
class Check:
    left: Side
    op: str
    right: Side | None
    factor: float
    const: float | None

    def __str__(self) -> str:
        if self.right is None:
            return f"{self.left} {self.op} {self.const:g}"
        f = f"{self.factor:g} * " if self.factor != 1 else ""
        return f"{self.left} {self.op} {f}{self.right}"

    @property
    def kernels(self) -> list[str]:
        """The kernels the check names (a cross-kernel check), in order."""
        return [s.kernel for s in (self.left, self.right) if s is not None and s.kernel]


def parse_check(text: str) -> Check:
    m = _CHECK.match(text)
    if not m:
        raise ValueError(f"{text!r} is not an expectation like 'mptcp.throughput_mbps >= 1.8 * tcp.throughput_mbps'")
    for p in ("l", "r"):
        metric = m.group(f"{p}metric")
        if metric is not None and metric not in METRICS:
            raise ValueError(f"unknown metric {metric!r} (known: {', '.join(METRICS)})")
    left = Side(m.group("lmode"), m.group("lprimary"), m.group("lmetric"), m.group("lkernel"))
    right = None
    if m.group("rmode"):
        right = Side(m.group("rmode"), m.group("rprimary"), m.group("rmetric"), m.group("rkernel"))
    if left.kernel and right is not None and not right.kernel or right is not None and right.kernel and not left.kernel:
        raise ValueError(f"{text!r}: name a kernel on both sides (mptcp@6.12.throughput_mbps >= "
                         "0.95 * mptcp@6.1.throughput_mbps), or on neither")
    return Check(left=left, op=m.group("op"), right=right,
                 factor=float(m.group("factor") or 1), const=float(m.group("const")) if m.group("const") else None)
