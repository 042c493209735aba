"""The typed scenario model (format v1), one module per part; here, the names the rest of the testbed imports.

Every field that ends up in a command line is constrained here, because the
runner executes those commands as root. Unknown keys are errors so that a
typo never silently falls back to a default.

types: names, units and the shaped link; topology/: one module per kind (mirrored by topologies/);
settings: MPTCP (and its sysctls), sockets, kernel requirements; traffic; runs: runs, sweep, variants and claims;
events: changes of paths and links during a run, and their timeline;
scenario: the whole, and its JSON Schema.
"""
from __future__ import annotations

from .events import Event, EventShape
from .runs import Expectation, Grid, Runs, SetKey, SweepKey, ValueRange, Variant
from .scenario import FORMAT_VERSION, Scenario, json_schema
from .settings import BufferTriple, Limits, Mptcp, MptcpSysctls, Requires, Sockets
from .topology import TOPOLOGY_CLASSES, TOPOLOGY_KINDS, Topology
from .topology.dual_homed import DualHomed, PathSpec
from .topology.routed import HostSpec, LinkSpec, Routed, RoutedPath
from .topology.shared import Family, NodeName
from .topology.switched import (APP_FILE, ControllerSpec, SteerSpec, SwitchSpec, Switched, SwitchedLink,
                                SwitchedPath, SwitchType)
from .traffic import IPERF_PORTS, Argv, CommandTool, Traffic, Word
from .types import (DELAY_HELP, IDENT, KERNEL_IDENT, LOSS_HELP, MIN_RATE_MBIT, QUEUE_HELP, SCENARIO_NAME, Duration,
                    Ident, LinkDelay, LinkRate, LossPercent, QueuePackets, Rate, Shaped, Size, Strict)

__all__ = [
    "APP_FILE", "Argv", "BufferTriple", "CommandTool", "ControllerSpec", "DELAY_HELP", "DualHomed", "Duration",
    "Event", "EventShape", "Expectation", "Family", "FORMAT_VERSION", "Grid", "HostSpec", "IDENT", "Ident",
    "IPERF_PORTS", "json_schema", "KERNEL_IDENT", "Limits", "LinkDelay", "LinkRate", "LinkSpec", "LOSS_HELP",
    "LossPercent", "MIN_RATE_MBIT", "Mptcp", "MptcpSysctls", "NodeName", "PathSpec", "QUEUE_HELP",
    "QueuePackets", "Rate", "Requires", "Routed", "RoutedPath", "Runs", "Scenario", "SCENARIO_NAME", "SetKey",
    "Shaped", "Size", "Sockets", "SteerSpec", "Strict", "SweepKey", "Switched", "SwitchedLink", "SwitchedPath",
    "SwitchSpec", "SwitchType", "Topology", "TOPOLOGY_CLASSES", "TOPOLOGY_KINDS", "Traffic", "ValueRange",
    "Variant", "Word",
]
