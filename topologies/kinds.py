"""The topology kinds, by the `kind` their model class declares: one module each, one line here."""
from __future__ import annotations

from dataclasses import replace

from scenarios.spec.model import Scenario
from scenarios.spec.model.events import timeline
from scenarios.spec.traces import trace_files

from .dual_homed import plan_dual_homed
from .plan import PlanError, TopologyPlan
from .routed import plan_routed
from .switched import plan_switched

PLANNERS = {
    "dual-homed": plan_dual_homed,
    "routed": plan_routed,
    "switched": plan_switched,
}


def plan(scenario: Scenario) -> TopologyPlan:
    try:
        planner = PLANNERS[scenario.topology.kind]
    except KeyError:
        raise PlanError(f"unsupported topology kind {scenario.topology.kind!r}") from None
    return with_rate_at_dequeue(planner(scenario), rate_changing_links(scenario))


def rate_changing_links(scenario: Scenario) -> set[str]:
    """The links (a dual-homed path is its own link) whose rate changes during a run: a trace, or a `shape`
    event that sets bw."""
    names = {getattr(scenario.topology, where[1])[where[2]].name for where, _ in trace_files(scenario)}
    return names | {occ.target[1] for _, occ in timeline(scenario.events)
                    if occ.shape is not None and "bw" in occ.shape.changes()}


def with_rate_at_dequeue(plan: TopologyPlan, links: set[str]) -> TopologyPlan:
    """The plan with the shaping of these links' interfaces and paths taking its rate at dequeue
    (topologies.plan.Shaping)."""
    if not links:
        return plan

    def at_dequeue(item, name: str):
        changes = item.shaping is not None and name in links
        return replace(item, shaping=replace(item.shaping, rate_at_dequeue=True)) if changes else item

    return replace(plan, interfaces=tuple(at_dequeue(i, i.link) for i in plan.interfaces),
                   paths=tuple(at_dequeue(p, p.name) for p in plan.paths),
                   client_paths=tuple((c, tuple(at_dequeue(p, p.name) for p in ps)) for c, ps in plan.client_paths))
