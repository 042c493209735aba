"""MPTCP and socket settings in the hosts' namespaces: per-namespace sysctls (MPTCP on, scheduler,
buffers) and the path manager's endpoints and limits, each applied only when it changed."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from scenarios.spec.model import Scenario
from topologies.plan import TopologyPlan, join_how

from runners.collect.subflows import endpoint_limits
from runners.errors import RunFailure
from runners.linux.nsexec import Argv, at_once, read_sysctls, run_batch, write_sysctls


class MptcpConfig:
    """Configures the runner's hosts (`host`, the RunContext: clients, server, probe)."""

    def __init__(self, host):
        self.host = host
        self.sysctl_state: dict[str, list] = {}
        self.buffer_defaults: dict[str, dict[str, str]] = {}
        self.endpoint_state: dict[str, tuple | None] = {}

    def forget(self) -> None:
        """The network is gone: nothing is in place any more."""
        self.sysctl_state.clear()
        self.buffer_defaults.clear()
        self.endpoint_state.clear()

    def apply_sysctls(self, sc: Scenario) -> None:
        missing = missing_sysctls(sc)
        if missing:
            raise RunFailure(f"mptcp.sysctls: kernel {os.uname().release} has no "
                             f"{', '.join('net.mptcp.' + k for k in missing)}; leave them out for this kernel")
        at_once(lambda node: self._node_sysctls(node, sc), (*self.host.clients, self.host.server))

    def _node_sysctls(self, node, sc: Scenario) -> None:
        if node.name not in self.buffer_defaults:
            # the namespace's own values (copied from the root one), restored for points without `sockets`
            values = read_sysctls(node, list(BUFFER_SYSCTLS))
            if len(values) != len(BUFFER_SYSCTLS):
                raise RunFailure(f"{node.name}: sysctl -n {' '.join(BUFFER_SYSCTLS)} printed "
                                 f"{len(values)} lines: {values!r}")
            self.buffer_defaults[node.name] = {
                key: " ".join(v.split()) for key, v in zip(BUFFER_SYSCTLS, values)}
        set_before = {key for key, _ in self.sysctl_state.get(node.name, [])}
        wanted = sysctls(sc, bool(self.host.probe.facts.get("mptcp_scheduler_sysctl")),
                                  self.buffer_defaults[node.name], set_before)
        if self.sysctl_state.get(node.name) != wanted:
            write_sysctls(node, wanted)
            self.sysctl_state[node.name] = wanted

    def set_endpoints(self, node, argvs: list, dirty: bool = False) -> None:
        """Apply a host's MPTCP endpoints and limits, unless the same set is already in place.

        Re-creating a `signal ... port P` endpoint makes the kernel bind a new
        listener on P, which fails (EADDRINUSE) while the last run's
        connections to P are in TIME_WAIT; an unchanged set is kept instead.
        `dirty`: the run will change flags after connecting (MP_PRIO), so the
        set is re-applied next time.
        """
        key = tuple(tuple(a) for a in argvs)
        if self.endpoint_state.get(node.name) == key:
            return
        for argv, res in zip(argvs, run_batch(node, argvs, check=False)):
            if res.rc != 0:
                hint = (" (a listener for that port could not be bound: the previous run's connections to it "
                        "are still in TIME_WAIT; keep the same signal_ports for every run of a set)"
                        if "listen socket" in res.err else "")
                self.endpoint_state.pop(node.name, None)
                raise RunFailure(f"{node.name}: `{' '.join(argv)}` failed (exit {res.rc}): "
                                 f"{res.err.strip()[:200]}{hint}")
        self.endpoint_state[node.name] = None if dirty else key

    def apply_endpoints(self, scenario: Scenario, plan, primary: str) -> dict[str, list]:
        """Every client's endpoints and limits for an MPTCP run with this primary path, and the server's;
        returns, per client, the commands to send once the data connection is up (MP_PRIO)."""
        after_connect, todo = {}, []
        for i, node in enumerate(self.host.clients):
            cmds = mptcp_argvs(scenario, plan.for_client(node.name), primary)
            after_connect[node.name] = cmds.after_connect
            todo.append((node, cmds.client, bool(cmds.after_connect)))
            if i == 0:
                todo.append((self.host.server, cmds.server, False))
        at_once(lambda t: self.set_endpoints(*t), todo)
        return after_connect


@dataclass(frozen=True)
class HostCommands:
    client: list[Argv]
    server: list[Argv]
    # client commands once the connection is up: MP_PRIO for a backup primary path
    after_connect: list[Argv] = field(default_factory=list)


BUFFER_SYSCTLS = ("net.ipv4.tcp_wmem", "net.ipv4.tcp_rmem")


# a setting a point may leave out, put back to the kernel's default when an earlier point on the same
# network changed it
# (Documentation/networking/mptcp-sysctl.rst, the same in 6.1 and 6.12 where a key exists)
KERNEL_DEFAULTS = {"net.mptcp.add_addr_timeout": "120", "net.mptcp.stale_loss_cnt": "4",
                   "net.mptcp.close_timeout": "60", "net.mptcp.blackhole_timeout": "3600",
                   "net.mptcp.checksum_enabled": "0", "net.mptcp.allow_join_initial_addr_port": "1",
                   "net.mptcp.syn_retrans_before_tcp_fallback": "2"}


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
    out += [(f"net.mptcp.{k}", v) for k, v in scenario.mptcp.sysctls.values().items()]
    out += [(k, v) for k, v in KERNEL_DEFAULTS.items() if k in set_before and k not in dict(out)]
    return out


def missing_sysctls(scenario: Scenario, proc_sys: str = "/proc/sys") -> list[str]:
    """The scenario's mptcp.sysctls that this kernel lacks (blackhole_timeout before 6.12, say)."""
    return [k for k in scenario.mptcp.sysctls.values() if not os.path.exists(f"{proc_sys}/net/mptcp/{k}")]


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
    client += flag_changes_need(scenario, plan, client)
    subflows, accepted = endpoint_limits(scenario, len(plan.paths), signals)
    limits = ["ip", "mptcp", "limits", "set", "subflows", str(subflows), "add_addr_accepted", str(accepted)]
    return HostCommands(client[:1] + [limits] + client[1:], server[:1] + [limits] + server[1:], after)


def flag_changes_need(scenario: Scenario, plan: TopologyPlan, client: list[Argv]) -> list[Argv]:
    """A flag-less client endpoint for each path an event marks backup or nobackup and that has none:
    `ip mptcp endpoint change ADDR backup` needs an endpoint for ADDR. Without flags, the path manager
    neither announces it nor opens subflows from it."""
    have = {argv[4] for argv in client if argv[3:4] == ["add"]}
    out = []
    for e in scenario.events:
        actions = e.do if isinstance(e.do, list) else [e.do]
        if e.path is None or not {"backup", "nobackup"} & set(actions):
            continue
        p = plan.path(e.path)
        if p.client_ip not in have:
            have.add(p.client_ip)
            out.append(["ip", "mptcp", "endpoint", "add", p.client_ip, "dev", p.client_if])
    return out
