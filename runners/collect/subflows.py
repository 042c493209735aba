"""The subflows an MPTCP run should get: the joins its endpoints ask for and the limits that bound them
(pure: from the scenario and the plan). The runner records the expectation; the record compares it
with the subflows the client's samples showed; the MPTCP settings build their endpoints and limits from the same rules."""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from scenarios.spec.model import Scenario
from topologies.plan import PathPlan, TopologyPlan, join_how


def mptcp_limits(scenario: Scenario, n_paths: int) -> tuple[int, int]:
    if scenario.mptcp.endpoints == "none":
        n_paths = 1
    extra = max(n_paths - 1, 0) + len(scenario.mptcp.signal_ports)
    subflows = scenario.mptcp.limits.subflows if scenario.mptcp.limits.subflows is not None else extra
    accepted = (scenario.mptcp.limits.add_addr_accepted
                if scenario.mptcp.limits.add_addr_accepted is not None else extra)
    return subflows, accepted


@dataclass(frozen=True)
class Join:
    """One subflow beyond the initial one that an MPTCP run's endpoints ask for.

    `how`: "signal" (the server announces `server_ip` with ADD_ADDR and the
    client joins it), "port" (the same, with `port`: another subflow over the
    primary path's address pair) or "subflow" (the client opens it from
    `client_ip`, to the primary path's server address).
    """
    path: str
    how: str
    client_ip: str
    server_ip: str
    family: str
    port: int | None = None

    def describe(self) -> str:
        """What should have been reached, as the run's warning names it."""
        if self.how == "port":
            return f"port {self.port} of path {self.path}'s server address {self.server_ip}"
        if self.how == "signal":
            return f"path {self.path}'s server address {self.server_ip}"
        return f"path {self.path}'s client address {self.client_ip}"

    def made(self, subflow: dict) -> bool:
        """Is this subflow of the client (a sample's, runners.linux.sockdiag) the one this join asks for?"""
        if self.how == "subflow":
            return same_ip(subflow.get("local", ""), self.client_ip)
        if self.how == "port":
            return same_ip(subflow.get("remote", ""), self.server_ip) and subflow.get("remote_port") == self.port
        return same_ip(subflow.get("remote", ""), self.server_ip)


def same_ip(a: str, b: str) -> bool:
    """One address however it is written (ss and the plan may spell an IPv6 address differently)."""
    try:
        return ipaddress.ip_address(a) == ipaddress.ip_address(b)
    except ValueError:
        return a == b


def planned_joins(scenario: Scenario, plan: TopologyPlan, primary: str) -> list[Join]:
    """The subflows beyond the initial one that mptcp_argvs's endpoints ask for, one per join: each
    signal port, then each other path unless `endpoints: none`. A path with the primary's address pair
    gets none (the kernel opens no second subflow from an address a subflow already uses), and an
    address announced or opened twice makes one subflow."""
    first = plan.path(primary)
    joins = [Join(primary, "port", first.client_ip, first.server_ip, first.family, port)
             for port in scenario.mptcp.signal_ports]
    seen = set()
    for p in plan.paths:
        if scenario.mptcp.endpoints == "none":
            break
        if p.name == primary or (p.client_ip, p.server_ip) == (first.client_ip, first.server_ip):
            continue
        how = join_how(scenario, first, p)
        key = (how, p.server_ip if how == "signal" else p.client_ip)
        if key not in seen:
            seen.add(key)
            joins.append(Join(p.name, how, p.client_ip, p.server_ip, p.family))
    return joins


def endpoint_limits(scenario: Scenario, n_paths: int, signals: int) -> tuple[int, int]:
    """(`subflows`, `add_addr_accepted`) as `ip mptcp limits` gets them: unless the scenario sets it,
    the client accepts as many ADD_ADDRs as the server has signal endpoints."""
    subflows, accepted = mptcp_limits(scenario, n_paths)
    if scenario.mptcp.limits.add_addr_accepted is None:
        accepted = signals
    return subflows, accepted


@dataclass(frozen=True)
class SubflowExpectation:
    """How many subflows an MPTCP run should get, and the joins that make them; `count` None, with
    `unknown` saying why, when the run cannot know."""
    count: int | None
    joins: tuple[Join, ...] = ()
    unknown: str | None = None


def expected_subflows(scenario: Scenario, plan: TopologyPlan, primary: str) -> SubflowExpectation:
    """The initial subflow plus the planned joins the limits allow. The kernel counts every join against
    `subflows` (on both ends: the server refuses joins beyond it) and the announced ones also against the
    client's `add_addr_accepted`.

    iperf3's socket can take subflows of both families (needs_v6_socket); a command's is the
    application's own: an IPv4 socket never adds an IPv6 subflow, and an IPv6 one may be IPv6-only, so
    with joins of the other family the count is unknown."""
    first = plan.path(primary)
    joins = planned_joins(scenario, plan, primary)
    other = sorted({j.path for j in joins if j.family != first.family})
    if other and scenario.traffic.tool != "iperf3":
        return SubflowExpectation(None, tuple(joins), (
            f"path{'s' * (len(other) > 1)} {', '.join(other)} {'are' if len(other) > 1 else 'is'} not "
            f"{first.family} like the primary path {primary}: whether {'they' if len(other) > 1 else 'it'} can "
            f"join depends on the address family of {scenario.traffic.tool}'s socket"))
    signalled = sum(j.how != "subflow" for j in joins)
    limit, accepted = endpoint_limits(scenario, len(plan.paths), signalled)
    opened = len(joins) - signalled
    return SubflowExpectation(1 + min(limit, opened + min(signalled, accepted)), tuple(joins))
