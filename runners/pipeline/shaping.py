"""netem on both directions of every path, read back and compared; a refusal stops the run.

Only interfaces whose shaping changed are touched (a sweep over delay keeps
the network and reshapes it).
"""
from __future__ import annotations

from runners import commands
from runners import parsers
from runners.errors import RunFailure
from runners.linux.nsexec import at_once, run, run_batch


class Shaper:
    """Shapes the runner's network (`host`: plan, net, store); `applied` is what each interface has now."""

    def __init__(self, host):
        self.host = host
        self.applied: dict[str, object] = {}

    def shape(self) -> bool:
        """netem on both directions of every path, read back and compared; a refusal stops the run.
        True when an interface's shaping changed.

        One batched command per namespace installs its qdiscs, a second reads them back.
        """
        todo: dict[str, list] = {}
        for iface in self.host.plan.interfaces:
            if iface.shaping is not None and self.applied.get(iface.name) != iface.shaping:
                todo.setdefault(iface.node, []).append(iface)
        report = {}
        for part in at_once(lambda item: self._shape_node(*item), todo.items()):
            report.update(part)
        if report and "shaping" not in self.host.store.metadata:
            self.host.store.set_metadata(shaping=report)
        return bool(todo)

    def _shape_node(self, node_name: str, ifaces: list) -> dict:
        report = {}
        node = self.host.network.get(node_name)
        installed = run_batch(node, [commands.netem_argv(i.name, i.shaping) for i in ifaces], check=False)
        for iface, res in zip(ifaces, installed):
            if res.rc != 0:
                raise RunFailure(f"link {iface.link}: tc refused the netem qdisc on {iface.name}: "
                                 f"{(res.err or res.out).strip()} - refusing to run unshaped")
        shown = run(node, ["tc", "-j", "qdisc", "show"]).out     # every device at once: one process
        for iface in ifaces:
            report[iface.name] = self._verify(iface, parsers.qdiscs_of_dev(shown, iface.name))
        return report

    def _verify(self, iface, shown: str) -> dict:
        shaping = iface.shaping
        got = parsers.parse_netem(shown)
        want = {"limit": shaping.limit_pkts, "rate_mbit": shaping.rate_mbit,
                "delay_ms": shaping.delay_ms, "loss_pct": shaping.loss_pct}
        bad = parsers.shaping_mismatches(want, got)
        if bad:
            raise RunFailure(f"link {iface.link}: shaping on {iface.name} did not take: {'; '.join(bad)}")
        self.applied[iface.name] = shaping
        self.host.store.save_raw("setup", f"tc-{iface.name}.json", shown)
        return got

    # ------------------------------------------------------------ one run
