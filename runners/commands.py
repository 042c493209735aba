"""Pure builders of the argument lists the runner executes inside namespaces.

Every value that comes from a scenario reaches these functions already
validated by the model; the builders return lists (never shell strings).
"""
from __future__ import annotations

from dataclasses import dataclass

from scenarios.model import Scenario
from topologies.plan import PathPlan, TopologyPlan

Argv = list[str]


@dataclass(frozen=True)
class HostCommands:
    client: list[Argv]
    server: list[Argv]


def sysctls(scenario: Scenario, scheduler_available: bool) -> list[tuple[str, str]]:
    """Per-namespace sysctls. They live in the hosts' netns, never the root one."""
    out = [
        ("net.mptcp.enabled", "1"),
        ("net.ipv4.tcp_congestion_control", scenario.mptcp.congestion),
        # Subflows in `subflow` mode arrive on an interface that is not the
        # route back to their destination address; strict rp_filter drops them.
        ("net.ipv4.conf.all.rp_filter", "0"),
        ("net.ipv4.conf.default.rp_filter", "0"),
        # Start every run from the same state: no metrics cached from the previous run.
        ("net.ipv4.tcp_no_metrics_save", "1"),
    ]
    if scenario.mptcp.scheduler != "default" or scheduler_available:
        out.append(("net.mptcp.scheduler", scenario.mptcp.scheduler))
    return out


def sysctl_argv(key: str, value: str) -> Argv:
    return ["sysctl", "-q", "-w", f"{key}={value}"]


def address_argvs(plan: TopologyPlan) -> HostCommands:
    """Addresses for both hosts, and per-interface source routing on the client.

    A client subflow leaves by the interface of its source address (rule
    `from <addr> table N`, default route on-link on that interface). The
    server needs no rules: its connected routes already send each reply back
    over the link the client's address belongs to.
    """
    client: list[Argv] = []
    server: list[Argv] = []
    for p in plan.paths:
        for cmds, ifname, ip in ((client, p.client_if, p.client_ip), (server, p.server_if, p.server_ip)):
            cmds.append(["ip", "addr", "flush", "dev", ifname])
            cmds.append(["ip", "addr", "add", f"{ip}/{p.prefix_len}", "dev", ifname])
            cmds.append(["ip", "link", "set", "dev", ifname, "up"])
        client.append(["ip", "rule", "add", "from", p.client_ip, "table", str(p.table), "priority", str(p.table)])
        client.append(["ip", "route", "add", "default", "dev", p.client_if, "table", str(p.table)])
    return HostCommands(client, server)


def offload_argv(ifname: str) -> Argv:
    """Segmentation offloads off, so netem's loss and limit act on real packets, not 64 KB bursts."""
    return ["ethtool", "-K", ifname, "tso", "off", "gso", "off", "gro", "off"]


def netem_argv(ifname: str, path: PathPlan) -> Argv:
    return ["tc", "qdisc", "replace", "dev", ifname, "root"] + path.shaping.netem_args()


def mptcp_limits(scenario: Scenario, n_paths: int) -> tuple[int, int]:
    extra = max(n_paths - 1, 0)
    subflows = scenario.mptcp.limits.subflows if scenario.mptcp.limits.subflows is not None else extra
    accepted = (scenario.mptcp.limits.add_addr_accepted
                if scenario.mptcp.limits.add_addr_accepted is not None else extra)
    return subflows, accepted


def mptcp_argvs(scenario: Scenario, plan: TopologyPlan, primary: str) -> HostCommands:
    """Endpoints and limits for one MPTCP run with the initial subflow on `primary`.

    `signal`: the server announces the address of every other path; the
    client's in-kernel path manager answers each ADD_ADDR with one subflow,
    sourced (by routing) from its interface on that path's link.
    `subflow`: the client opens one subflow from each other interface to the
    server's primary address; source routing sends it over that link.
    Backup paths get the backup flag on the endpoints of both ends.
    """
    subflows, accepted = mptcp_limits(scenario, len(plan.paths))
    backup = set(scenario.mptcp.backup)
    client: list[Argv] = [["ip", "mptcp", "endpoint", "flush"],
                          ["ip", "mptcp", "limits", "set", "subflows", str(subflows),
                           "add_addr_accepted", str(accepted)]]
    server: list[Argv] = [["ip", "mptcp", "endpoint", "flush"],
                          ["ip", "mptcp", "limits", "set", "subflows", str(subflows),
                           "add_addr_accepted", str(accepted)]]
    for p in plan.paths:
        if p.name == primary:
            if p.name in backup:
                client.append(["ip", "mptcp", "endpoint", "add", p.client_ip, "dev", p.client_if, "backup"])
            continue
        flags_c: list[str] = []
        flags_s: list[str] = []
        if scenario.mptcp.endpoints == "subflow":
            flags_c.append("subflow")
        else:
            flags_s.append("signal")
        if p.name in backup:
            flags_c.append("backup")
            flags_s.append("backup")
        if flags_c:
            client.append(["ip", "mptcp", "endpoint", "add", p.client_ip, "dev", p.client_if] + flags_c)
        if flags_s:
            server.append(["ip", "mptcp", "endpoint", "add", p.server_ip, "dev", p.server_if] + flags_s)
    return HostCommands(client, server)


def mptcp_reset_argvs() -> list[Argv]:
    return [["ip", "mptcp", "endpoint", "flush"],
            ["ip", "mptcp", "limits", "set", "subflows", "0", "add_addr_accepted", "0"]]


@dataclass(frozen=True)
class Iperf:
    """How to run iperf3 under MPTCP on this machine."""

    binary: str = "iperf3"
    native_mptcp: bool = False      # iperf3 >= 3.19 has -m/--mptcp
    mptcpize: str = "mptcpize"

    def wrap(self, argv: Argv, mptcp: bool) -> Argv:
        if not mptcp:
            return argv
        if self.native_mptcp:
            return argv[:1] + ["--mptcp"] + argv[1:]
        return [self.mptcpize, "run"] + argv


def iperf_server_argv(iperf: Iperf, port: int, mptcp: bool) -> Argv:
    return iperf.wrap([iperf.binary, "-s", "-1", "-J", "-p", str(port)], mptcp)


def iperf_client_argv(iperf: Iperf, scenario: Scenario, server_ip: str, client_ip: str,
                      port: int, mptcp: bool) -> Argv:
    t = scenario.traffic
    argv = [iperf.binary, "-c", server_ip, "-B", client_ip, "-p", str(port), "-J",
            "-i", f"{t.interval:g}", "--connect-timeout", "10000"]
    if t.bytes is not None:
        argv += ["-n", str(t.bytes)]
    else:
        argv += ["-t", f"{t.duration:g}"]
    if t.omit:
        argv += ["-O", f"{t.omit:g}"]
    if t.direction == "download":
        argv.append("-R")
    return iperf.wrap(argv, mptcp)


def ping_argv(src: str, dst: str, count: int = 5) -> Argv:
    return ["ping", "-n", "-q", "-c", str(count), "-i", "0.2", "-W", "3", "-I", src, dst]


def nstat_argv() -> Argv:
    """Absolute counters, without touching nstat's history file (shared across namespaces)."""
    return ["nstat", "-a", "-z", "-s"]


def link_stats_argv() -> Argv:
    return ["ip", "-s", "-j", "link", "show"]


def ss_argv() -> Argv:
    return ["ss", "-t", "-i", "-n", "-M", "-O", "state", "established"]
