"""The topology kinds, by the `kind` their model class declares: one module each, one line here."""
from __future__ import annotations

from scenarios.spec.model import Scenario

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
    return planner(scenario)
