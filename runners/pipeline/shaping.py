"""netem on both directions of every path (with a TBF for the rate where it changes during a run), read
back and compared; a refusal stops the run.

Only interfaces whose shaping changed are touched (a sweep over delay keeps
the network and reshapes it).
"""
from __future__ import annotations

import json
from typing import Any

from topologies.plan import NETEM_PARENT, Shaping, shaping_argvs

from runners.errors import ParseError, RunFailure
from runners.linux.nsexec import at_once, run, run_batch


class Shaper:
    """Shapes the runner's network (`host`, the RunContext: plan, network, store); `applied` is what each
    interface has now."""

    def __init__(self, host):
        self.host = host
        self.applied: dict[str, object] = {}

    def shape(self) -> bool:
        """netem on both directions of every path, read back and compared; a refusal stops the run.
        True when an interface's shaping changed.

        One batched command per namespace installs its qdiscs, a second reads them back.
        """
        todo: dict[str, list] = {}
        for iface in self.host.plan.shaped_interfaces():
            if self.applied.get(iface.name) != iface.shaping:
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
        argvs = [(iface, argv) for iface in ifaces for argv in shaping_argvs(iface.name, iface.shaping)]
        installed = run_batch(node, [argv for _, argv in argvs], check=False)
        for (iface, argv), res in zip(argvs, installed):
            if res.rc != 0:
                kind = "tbf" if "tbf" in argv else "netem"
                raise RunFailure(f"link {iface.link}: tc refused the {kind} qdisc on {iface.name}: "
                                 f"{(res.err or res.out).strip()} - refusing to run unshaped")
        shown = run(node, ["tc", "-j", "qdisc", "show"]).out     # every device at once: one process
        for iface in ifaces:
            report[iface.name] = self._verify(iface, qdiscs_of_dev(shown, iface.name))
        return report

    def _verify(self, iface, shown: str) -> dict:
        shaping = iface.shaping
        got = parse_netem(shown)
        bad = shaping_mismatches(wanted(shaping), got)
        if bad:
            raise RunFailure(f"link {iface.link}: shaping on {iface.name} did not take: {'; '.join(bad)}")
        self.applied[iface.name] = shaping
        self.host.store.save_raw("setup", f"tc-{iface.name}.json", shown)
        return got

    # ------------------------------------------------------------ one run


def qdiscs_of_dev(text: str, dev: str) -> str:
    """From `tc -j qdisc show` (every device), the JSON list of one device's qdiscs, as
    `tc -j qdisc show dev DEV` would print it."""
    try:
        doc = json.loads(text) if text.strip() else []
    except json.JSONDecodeError as e:
        raise ParseError(f"tc -j output is not JSON: {e}") from None
    return json.dumps([q for q in doc if q.get("dev") == dev])


def parse_netem(text: str) -> dict[str, Any] | None:
    """The shaping in `tc -j qdisc show dev X`, as rate/delay/loss/limit: a root netem, or a netem under a
    root TBF with the TBF's rate (`rate_by: tbf`); None without either."""
    try:
        doc = json.loads(text) if text.strip() else []
    except json.JSONDecodeError as e:
        raise ParseError(f"tc -j output is not JSON: {e}") from None
    root = next((q for q in doc if q.get("root", False)), None)
    if root is None:
        return None
    tbf = root if root.get("kind") == "tbf" else None
    netem = root if root.get("kind") == "netem" else next(
        (q for q in doc if tbf and q.get("kind") == "netem" and q.get("parent") == NETEM_PARENT), None)
    if netem is None:
        return None
    opts = netem.get("options") or {}
    delay = opts.get("delay") or {}
    loss = opts.get("loss-random") or {}
    # both print a rate in bytes/s: netem's as {"rate": N}, TBF's as N
    rate = float((tbf["options"].get("rate", 0)) if tbf else (opts.get("rate") or {}).get("rate", 0))
    got = {
        "limit": opts.get("limit"),
        "delay_ms": float(delay.get("delay", 0.0)) * 1000.0,
        "loss_pct": float(loss.get("loss", 0.0)) * 100.0,
        "rate_mbit": rate * 8 / 1e6,
    }
    return {**got, "rate_by": "tbf"} if tbf else got


DELAY_GRANULARITY_MS = 0.002   # 2 us: what tc's read-back of a netem delay may differ by (clock rounding)


def wanted(shaping: Shaping) -> dict[str, float]:
    """A Shaping as parse_netem reads a netem back: what shaping_mismatches compares."""
    return {"limit": shaping.limit_pkts, "rate_mbit": shaping.rate_mbit,
            "delay_ms": shaping.delay_ms, "loss_pct": shaping.loss_pct,
            "rate_by": "tbf" if shaping.rate_at_dequeue else "netem"}


def shaping_mismatches(want: dict[str, float], got: dict[str, Any] | None) -> list[str]:
    """What differs between the netem we asked for and the one the kernel holds."""
    if got is None:
        return ["no netem qdisc is installed"]
    problems = []
    if got.get("rate_by", "netem") != want.get("rate_by", "netem"):
        problems.append(f"the rate is {got.get('rate_by', 'netem')}'s, not {want['rate_by']}'s")
    if got.get("limit") != want["limit"]:
        problems.append(f"limit {got.get('limit')} != {want['limit']}")
    # relative tolerances, with a floor only where the kernel's own granularity needs one: tc rounds
    # delays to the scheduler's clock (25 us reads back as 24 us); a rate has no absolute floor, so a
    # rate that did not take (1 bit/s shown as 0) is a mismatch however small it is
    for key, rel, floor in (("rate_mbit", 0.01, 0.0), ("delay_ms", 0.01, DELAY_GRANULARITY_MS),
                            ("loss_pct", 0.01, 1e-6)):
        w, g = want[key], got.get(key) or 0.0
        if abs(w - g) > max(rel * abs(w), floor):
            problems.append(f"{key} {g:g} != {w:g}")
    return problems
