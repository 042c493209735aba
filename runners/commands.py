"""Pure builders of the argument lists the runner executes inside namespaces.

Every value that comes from a scenario reaches these functions already
validated by the model; the builders return lists (never shell strings).
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from scenarios.spec import placeholders
from scenarios.spec.model import Scenario
from topologies.plan import PathPlan, Shaping, TopologyPlan

Argv = list[str]


@dataclass(frozen=True)
class HostCommands:
    client: list[Argv]
    server: list[Argv]
    # client commands once the connection is up: MP_PRIO for a backup primary path
    after_connect: list[Argv] = field(default_factory=list)


BUFFER_SYSCTLS = ("net.ipv4.tcp_wmem", "net.ipv4.tcp_rmem")


# a setting a point may leave out, put back to the kernel's default when an earlier point on the same
# network changed it
KERNEL_DEFAULTS = {"net.mptcp.add_addr_timeout": "120"}


def sysctls(scenario: Scenario, scheduler_available: bool,
            buffer_defaults: dict[str, str] | None = None, set_before: set[str] = frozenset()) -> list[tuple[str, str]]:
    """Per-namespace sysctls. They live in the hosts' netns, never the root one.

    `buffer_defaults`: the namespace's own tcp_wmem/tcp_rmem, read before
    anything was set, put back when a point has no `sockets` of its own.
    `set_before`: keys written for an earlier point, reset (KERNEL_DEFAULTS) when this one leaves them out.
    """
    defaults = buffer_defaults or {}
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
    for key, triple in zip(BUFFER_SYSCTLS, (scenario.sockets.send, scenario.sockets.receive)):
        if triple is not None:
            out.append((key, " ".join(str(v) for v in triple)))
        elif key in defaults:
            out.append((key, defaults[key]))
    timeout = scenario.mptcp.add_addr_timeout
    if timeout is not None:
        out.append(("net.mptcp.add_addr_timeout", str(int(timeout // 1000))))
    out += [(k, v) for k, v in KERNEL_DEFAULTS.items() if k in set_before and k not in dict(out)]
    return out


def sysctl_argv(key: str, value: str) -> Argv:
    return ["sysctl", "-q", "-w", f"{key}={value}"]


def segmentation_offloads_off_argv(ifname: str) -> Argv:
    """Segmentation offloads off, so netem's loss and limit act on real packets, not 64 KB bursts."""
    return ["ethtool", "-K", ifname, "tso", "off", "gso", "off", "gro", "off"]


def one_segment_per_packet_argv(ifname: str) -> Argv:
    """TCP hands the qdisc one segment per packet. `gso off` is not enough: Linux TCP always builds
    software-GSO packets (sk_setup_caps), by default of 2 or more segments (tcp_min_tso_segs), and
    netem drops and queues whole packets while counting sent segments. A 5 % loss then cost
    bursts of segments and read as 3.4-3.8 % on netem's counter (UDP, one datagram per packet, read
    5.10 % over 5,000 datagrams, as its receiver counted)."""
    return ["ip", "link", "set", "dev", ifname, "gso_max_segs", "1"]


def netem_argv(ifname: str, shaping: Shaping) -> Argv:
    return ["tc", "qdisc", "replace", "dev", ifname, "root"] + shaping.netem_args()


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
        """Is this `ss` subflow of the client (parsers.parse_ss_subflows) the one this join asks for?"""
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


def join_how(scenario: Scenario, first: PathPlan, path: PathPlan) -> str:
    """How a path other than the primary gets its subflow: `signal` when its server address differs from
    the primary's (in `subflow` mode only when its client address does not), else `subflow`."""
    new_client = path.client_ip != first.client_ip
    new_server = path.server_ip != first.server_ip
    return "signal" if new_server and (scenario.mptcp.endpoints == "signal" or not new_client) else "subflow"


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


def mptcp_argvs(scenario: Scenario, plan: TopologyPlan, primary: str) -> HostCommands:
    """Endpoints and limits for one MPTCP run with the initial subflow on `primary`.

    For each other path, a subflow must appear between that path's client
    and server addresses. `signal` (default): when the path's server address
    differs from the primary's, the server announces it (ADD_ADDR) and the
    client's in-kernel path manager opens one subflow to it, sourced (by
    routing) from the client's address on that path; this is also how the
    other address family joins on a dual-stack interface. When only the
    client address differs, the client opens the subflow from a `subflow`
    endpoint. `subflow` prefers client endpoints where the client address
    differs. Backup paths get the backup flag on the endpoints of both ends.
    """
    first = plan.path(primary)
    backup = set(scenario.mptcp.backup)
    after: list[Argv] = []
    client: list[Argv] = [["ip", "mptcp", "endpoint", "flush"]]
    server: list[Argv] = [["ip", "mptcp", "endpoint", "flush"]]
    signals = 0
    for port in scenario.mptcp.signal_ports:
        # same address, another port: the client opens one more subflow over the same address pair
        server.append(["ip", "mptcp", "endpoint", "add", first.server_ip, "dev", first.server_if, "signal",
                       "port", str(port)])
        signals += 1
    for p in plan.paths:
        if scenario.mptcp.endpoints == "none":
            break
        if p.name == primary:
            if p.name in backup:
                # A backup flag on an endpoint does not reach the initial subflow (it exists before any
                # endpoint is consulted). Changing the flag once the connection is up makes the kernel send
                # MP_PRIO on every subflow from this address, the initial one included.
                client.append(["ip", "mptcp", "endpoint", "add", p.client_ip, "dev", p.client_if])
                after.append(["ip", "mptcp", "endpoint", "change", p.client_ip, "backup"])
            continue
        bk = ["backup"] if p.name in backup else []
        new_client = p.client_ip != first.client_ip
        if join_how(scenario, first, p) == "signal":
            server.append(["ip", "mptcp", "endpoint", "add", p.server_ip, "dev", p.server_if, "signal"] + bk)
            if bk and new_client:
                client.append(["ip", "mptcp", "endpoint", "add", p.client_ip, "dev", p.client_if] + bk)
            signals += 1
        else:
            client.append(["ip", "mptcp", "endpoint", "add", p.client_ip, "dev", p.client_if, "subflow"] + bk)
            if bk:
                server.append(["ip", "mptcp", "endpoint", "add", p.server_ip, "dev", p.server_if] + bk)
    subflows, accepted = endpoint_limits(scenario, len(plan.paths), signals)
    limits = ["ip", "mptcp", "limits", "set", "subflows", str(subflows), "add_addr_accepted", str(accepted)]
    return HostCommands(client[:1] + [limits] + client[1:], server[:1] + [limits] + server[1:], after)


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


# Fixed-size transfers: the receiver reports this often, so that the time its count reached
# `traffic.bytes` (the completion time) is known to a tenth of a second.
COMPLETION_INTERVAL = 0.1
# ... and the sender writes this much more than `bytes` (at least), because iperf3 ends the test
# once its last byte is *written*: what still sits in the send buffer then never arrives
# (esnet/iperf#382). The extra must cover that backlog, i.e. the sender's send buffer.
MIN_EXTRA_BYTES = 1 << 20


def fixed_size_extra(scenario: Scenario) -> int:
    """Bytes sent beyond `traffic.bytes` so that the receiver's count reaches `bytes`.

    The backlog left at the last write is at most the send buffer: its initial
    size (`sockets.send`), which cwnd-limited senders rarely grow, with a margin.
    """
    send = scenario.sockets.send
    initial = int(send[1]) if send else 0
    return max(MIN_EXTRA_BYTES, initial * 3 // 2)


def server_receives(scenario: Scenario) -> bool:
    return scenario.traffic.direction == "upload"


def iperf_server_argv(iperf: Iperf, port: int, mptcp: bool, scenario: Scenario | None = None) -> Argv:
    argv = [iperf.binary, "-s", "-1", "-J", "-p", str(port)]
    if scenario is not None and scenario.traffic.bytes is not None and server_receives(scenario):
        argv += ["-i", f"{COMPLETION_INTERVAL:g}"]   # the server receives: its intervals time the completion
    return iperf.wrap(argv, mptcp)


def v4_mapped(ip: str) -> str:
    return f"::ffff:{ip}"


def needs_v6_socket(plan: TopologyPlan, primary: str, mptcp: bool) -> bool:
    """An AF_INET MPTCP socket can never add IPv6 subflows; an AF_INET6 one (v4-mapped) can add both."""
    return mptcp and plan.path(primary).family == "ipv4" and any(p.family == "ipv6" for p in plan.paths)


def iperf_client_argv(iperf: Iperf, scenario: Scenario, server_ip: str, client_ip: str,
                      port: int, mptcp: bool) -> Argv:
    t = scenario.traffic
    interval = t.interval
    if t.bytes is not None and not server_receives(scenario):
        interval = min(interval, COMPLETION_INTERVAL)   # the client receives: its intervals time the completion
    argv = [iperf.binary, "-c", server_ip, "-B", client_ip, "-p", str(port), "-J",
            "-i", f"{interval:g}", "--connect-timeout", "10000"]
    if t.bytes is not None:
        argv += ["-n", str(t.bytes + fixed_size_extra(scenario))]
    else:
        argv += ["-t", f"{t.duration:g}"]
    if t.omit:
        argv += ["-O", f"{t.omit:g}"]
    if t.direction == "download":
        argv.append("-R")
    return iperf.wrap(argv, mptcp)


def command_values(scenario: Scenario, plan: TopologyPlan, primary: str, port: int) -> dict[str, str]:
    """What the placeholders of a `traffic.command` tool stand for, in this run."""
    t = scenario.traffic
    first = plan.path(primary)
    values = {"server_ip": first.server_ip, "client_ip": first.client_ip, "port": str(port),
              "duration": f"{t.duration:g}" if t.duration is not None else "",
              "bytes": str(t.bytes) if t.bytes is not None else "", "interval": f"{t.interval:g}"}
    for p in plan.paths:
        values[f"server_ip:{p.name}"] = p.server_ip
        values[f"client_ip:{p.name}"] = p.client_ip
    return values


def fill(argv: list[str], values: dict[str, str]) -> Argv:
    """Substitute placeholders word by word; the result is still an argument list, never a shell line."""
    return [placeholders.fill(w, values) for w in argv]


# Echoes 50 ms apart (root may go below 0.2 s): each echo is timed alone, several may be in flight on a long
# path, and five of them cost 0.25 s, not 1 s, before every run.
def ping_argv(src: str, dst: str, count: int = 5) -> Argv:
    """`count` measured echoes with per-reply lines. A path is warmed up first (warm_up_ping_argv)."""
    return ["ping", "-n", "-c", str(count), "-i", "0.05", "-W", "3", "-I", src, dst]


# Neighbour resolution holds every echo sent before it ends: on a 250 ms path (ARP itself takes 500 ms)
# the echoes of one `ping -i 0.2` sent meanwhile measured 580 ms for 500. So before the first measured
# echo a path gets unmeasured ones, 0.2 s apart until one is answered (up to 10 s: a lossy path may
# lose a few). Once the neighbour is known it stays usable between runs (a stale entry is used at once
# and confirmed meanwhile), so this is done once per build or reshaping. Switched topologies also get
# one echo before every run's measured ones (ping_after_one_echo_argv).
def warm_up_ping_argv(src: str, dst: str) -> Argv:
    return ["ping", "-n", "-q", "-c", "1", "-w", "10", "-i", "0.2", "-I", src, dst]


# Switched topologies: one unmeasured echo that must come back, then the measured ones, in one process
# per path, as every run did before 2026-11-25. A controller's flows are cleared before every run, and
# each unanswered echo is one more packet-in for it; lab 5's joins (their flows installed by the
# controller during the transfer) were timed with this. The addresses are positional parameters of
# the shell, never part of its script.
PING_AFTER_ONE_ECHO = ('ping -n -c 1 -W 10 -I "$1" "$2" >/dev/null 2>&1; '
                       'exec ping -n -c "$3" -i 0.05 -W 3 -I "$1" "$2"')


def ping_after_one_echo_argv(src: str, dst: str, count: int = 5) -> Argv:
    return ["sh", "-c", PING_AFTER_ONE_ECHO, "ping-path", src, dst, str(count)]


NFT_TABLE = ["inet", "mptb"]


def nft_counter_argvs(plan: TopologyPlan, node: str) -> list[Argv]:
    """Per-path byte counters in a host's namespace, by address pair, both directions.

    Interface counters cannot tell IPv4 from IPv6 on one dual-stack
    interface, so routed topologies count each path's bytes here.
    """
    out = [["nft", "add", "table", *NFT_TABLE],
           ["nft", "add", "chain", *NFT_TABLE, "in", "{ type filter hook input priority 0 ; policy accept ; }"],
           ["nft", "add", "chain", *NFT_TABLE, "out", "{ type filter hook output priority 0 ; policy accept ; }"]]
    every_client = node == plan.server and len(plan.all_clients) > 1
    for p in plan.paths:
        ip = "ip" if p.family == "ipv4" else "ip6"
        mine, peer = (p.client_ip, p.server_ip) if node == plan.client else (p.server_ip, p.client_ip)
        if every_client:
            # several clients: each path's server address is its own, so it alone names the path
            out.append(["nft", "add", "rule", *NFT_TABLE, "in", ip, "daddr", mine, "counter", "comment", f'"{p.name}"'])
            out.append(["nft", "add", "rule", *NFT_TABLE, "out", ip, "saddr", mine, "counter", "comment",
                        f'"{p.name}"'])
            continue
        out.append(["nft", "add", "rule", *NFT_TABLE, "in", ip, "saddr", peer, ip, "daddr", mine,
                    "counter", "comment", f'"{p.name}"'])
        out.append(["nft", "add", "rule", *NFT_TABLE, "out", ip, "saddr", mine, ip, "daddr", peer,
                    "counter", "comment", f'"{p.name}"'])
    return out


def nft_list_argv() -> Argv:
    return ["nft", "-j", "list", "table", *NFT_TABLE]


def ss_argv(memory: bool = False) -> Argv:
    """`memory`: socket memory too (skmem: the send buffer), for a person in the shell; the runs' samples
    stay without it (every extra ss field costs time under TCG)."""
    return ["ss", "-t", "-i", "-n", "-M", "-O", *(["-m"] if memory else []), "state", "established"]


def tx_offloads_off_argv(ifname: str) -> Argv:
    """For ports of an OVS userspace datapath: it neither fills in TX checksums nor segments TSO/GSO."""
    return ["ethtool", "-K", ifname, "tx", "off", "tso", "off", "gso", "off"]
