"""MPTCP and socket settings in the hosts' namespaces: per-namespace sysctls (MPTCP on, scheduler,
buffers) and the path manager's endpoints and limits, each applied only when it changed."""
from __future__ import annotations

from scenarios.spec.model import Scenario

from runners import commands
from runners.errors import RunFailure
from runners.linux.nsexec import at_once, run, run_batch


class MptcpConfig:
    """Configures the runner's hosts (`host`: clients, server, probe)."""

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
        at_once(lambda node: self._node_sysctls(node, sc), (*self.host.clients, self.host.server))

    def _node_sysctls(self, node, sc: Scenario) -> None:
        if node.name not in self.buffer_defaults:
            # the namespace's own values (copied from the root one), restored for points without `sockets`
            # one sysctl for all of them (a process start each is 0.05-0.1 s in a TCG guest): a line per key
            values = run(node, ["sysctl", "-n", *commands.BUFFER_SYSCTLS]).out.splitlines()
            if len(values) != len(commands.BUFFER_SYSCTLS):
                raise RunFailure(f"{node.name}: sysctl -n {' '.join(commands.BUFFER_SYSCTLS)} printed "
                                 f"{len(values)} lines: {values!r}")
            self.buffer_defaults[node.name] = {
                key: " ".join(v.split()) for key, v in zip(commands.BUFFER_SYSCTLS, values)}
        set_before = {key for key, _ in self.sysctl_state.get(node.name, [])}
        wanted = commands.sysctls(sc, bool(self.host.probe.facts.get("mptcp_scheduler_sysctl")),
                                  self.buffer_defaults[node.name], set_before)
        if self.sysctl_state.get(node.name) != wanted:
            run_batch(node, [commands.sysctl_argv(key, value) for key, value in wanted])
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
            cmds = commands.mptcp_argvs(scenario, plan.for_client(node.name), primary)
            after_connect[node.name] = cmds.after_connect
            todo.append((node, cmds.client, bool(cmds.after_connect)))
            if i == 0:
                todo.append((self.host.server, cmds.server, False))
        at_once(lambda t: self.set_endpoints(*t), todo)
        return after_connect
