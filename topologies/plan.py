"""Pure topology planning: hosts, links, addresses and shaping, from the model.

Nothing here touches the kernel; the Mininet builder (topologies.net) and the
runner consume these plans, and the unit tests check them directly.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from scenarios.model import PathSpec, Scenario
from scenarios.units import format_mbit, format_ms

CLIENT = "h1"
SERVER = "h2"
MTU_BYTES = 1500


@dataclass(frozen=True)
class Shaping:
    """One netem qdisc on one direction of a bottleneck link."""

    rate_mbit: float
    delay_ms: float
    loss_pct: float
    limit_pkts: int

    def netem_args(self) -> list[str]:
        args = ["netem", "rate", format_mbit(self.rate_mbit)]
        if self.delay_ms > 0:
            args += ["delay", format_ms(self.delay_ms)]
        if self.loss_pct > 0:
            args += ["loss", f"{self.loss_pct:g}%"]
        args += ["limit", str(self.limit_pkts)]
        return args


@dataclass(frozen=True)
class PathPlan:
    """A path of the dual-homed topology: one direct link between client and server."""

    name: str
    index: int
    client_if: str
    server_if: str
    client_ip: str
    server_ip: str
    prefix_len: int
    table: int
    shaping: Shaping


@dataclass(frozen=True)
class TopologyPlan:
    client: str
    server: str
    paths: tuple[PathPlan, ...]
    notes: tuple[str, ...] = field(default=())

    def path(self, name: str) -> PathPlan:
        return next(p for p in self.paths if p.name == name)

    def to_dict(self) -> dict:
        return {
            "client": self.client,
            "server": self.server,
            "paths": [
                {"name": p.name, "client_if": p.client_if, "server_if": p.server_if,
                 "client_ip": f"{p.client_ip}/{p.prefix_len}", "server_ip": f"{p.server_ip}/{p.prefix_len}",
                 "routing_table": p.table, "netem": " ".join(p.shaping.netem_args())}
                for p in self.paths
            ],
        }


def netem_limit(path: PathSpec) -> int:
    """Packets netem must hold: the configured queue plus the delay line.

    netem counts packets waiting on its delay line against `limit`, so a bare
    `limit = queue` would cap the window at `queue` packets on long paths and
    throttle them below their rate. We add the path's bandwidth-delay product
    (one direction) so `queue` means the buffer in front of the bottleneck.
    """
    bdp_pkts = path.bw * 1e6 * (path.delay / 1000.0) / (8 * MTU_BYTES)
    return int(path.queue + math.ceil(bdp_pkts))


def shaping_for(path: PathSpec) -> Shaping:
    return Shaping(rate_mbit=path.bw, delay_ms=path.delay, loss_pct=path.loss, limit_pkts=netem_limit(path))


def plan_dual_homed(scenario: Scenario) -> TopologyPlan:
    """Client h1 and server h2; path i is the link h1-eth<i> <-> h2-eth<i> in 10.0.<i+1>.0/24."""
    paths = []
    for i, p in enumerate(scenario.topology.paths):
        paths.append(PathPlan(
            name=p.name, index=i,
            client_if=f"{CLIENT}-eth{i}", server_if=f"{SERVER}-eth{i}",
            client_ip=f"10.0.{i + 1}.1", server_ip=f"10.0.{i + 1}.2", prefix_len=24,
            table=100 + i, shaping=shaping_for(p)))
    return TopologyPlan(client=CLIENT, server=SERVER, paths=tuple(paths))


def plan(scenario: Scenario) -> TopologyPlan:
    if scenario.topology.kind == "dual-homed":
        return plan_dual_homed(scenario)
    raise ValueError(f"unsupported topology kind {scenario.topology.kind!r}")
