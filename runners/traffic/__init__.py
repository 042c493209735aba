"""Traffic tools, by the name `traffic.tool` gives: one module each, one line in TOOLS. May import linux and errors.

A tool is a TrafficTool subclass (runners/traffic/base.py) made for one run:
`start_servers(TrafficRun)` before the pause between runs, `servers_ready(TrafficRun)` before the
pings, then `run(TrafficRun)` returns a
TrafficResult (the report collect.record reads, per-path samples, subflow samples).
"""
from __future__ import annotations

from runners.traffic.base import BASE_PORT, TrafficReport, TrafficResult, TrafficRun, TrafficTool
from runners.traffic.command import CommandTool
from runners.traffic.iperf3 import Iperf3Tool

TOOLS: dict[str, type[TrafficTool]] = {
    "iperf3": Iperf3Tool,
    "command": CommandTool,
}

__all__ = ["BASE_PORT", "TOOLS", "TrafficReport", "TrafficResult", "TrafficRun", "TrafficTool"]
