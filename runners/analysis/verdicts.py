"""Statistical verdicts: an expectation passes only when its 95 % interval supports it.

For `L op k*R` we take Welch's interval of mean(L) - k*mean(R) (or of
mean(L) - c for a constant). For `>`/`>=` the claim holds when the whole
interval is above 0, fails when it is wholly below 0, and is otherwise
"inconclusive, needs more repetitions"; `<`/`<=` mirror that. Fixed timing
bounds on single runs (the kind that flake) are never used.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from scenarios.spec.expect import LOWER_IS_BETTER, Check, Side, parse_check

from .stats import const_ci, diff_ci

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"


@dataclass(frozen=True)
class Verdict:
    point: str
    label: str
    name: str
    check: str
    outcome: str
    estimate: float | None
    ci_low: float | None
    ci_high: float | None
    n_left: int
    n_right: int
    detail: str

    def to_dict(self) -> dict:
        return asdict(self)


def select(runs: list[dict], side: Side) -> list[float]:
    return [float(r["metrics"][side.metric]) for r in runs
            if r["mode"] == side.mode and (side.primary is None or r["primary"] == side.primary)
            and r["status"] == "ok" and r["metrics"].get(side.metric) is not None]


def decide(op: str, low: float | None, high: float | None) -> str:
    """The claim `difference op 0`, judged by its 95 % interval [low, high]."""
    if low is None or high is None:
        return INCONCLUSIVE
    holds, broken = {
        ">": (low > 0, high <= 0),
        ">=": (low >= 0, high < 0),
        "<": (high < 0, low >= 0),
        "<=": (high <= 0, low > 0),
    }[op]
    return PASS if holds else FAIL if broken else INCONCLUSIVE


def evaluate(check: Check, runs: list[dict], point: str = "", label: str = "", name: str = "") -> Verdict:
    left = select(runs, check.left)
    right = select(runs, check.right) if check.right else []
    if not left or (check.right and not right):
        return Verdict(point, label, name or str(check), str(check), INCONCLUSIVE, None, None, None,
                       len(left), len(right), "no successful runs for one side")
    if check.right is None:
        est, lo, hi = const_ci(left, check.const)
    else:
        est, lo, hi = diff_ci(left, right, check.factor)
    outcome = decide(check.op, lo, hi)
    if lo is None:
        detail = "needs at least 2 runs per side for an interval: inconclusive, needs more repetitions"
    else:
        detail = (f"difference {est:+.4g}, 95% CI [{lo:+.4g}, {hi:+.4g}]"
                  + ("; inconclusive, needs more repetitions" if outcome == INCONCLUSIVE else ""))
    return Verdict(point, label, name or str(check), str(check), outcome, est, lo, hi, len(left), len(right), detail)


def evaluate_points(scenario, points_runs: dict[str, tuple[str, list[dict]]]) -> list[Verdict]:
    """Every expectation at every point it applies to: {point id: (label, runs)} -> verdicts."""
    out = []
    for e in scenario.expect:
        check = parse_check(e.check)
        for pid, (label, runs) in points_runs.items():
            if runs and e.applies(runs[0].get("params", {})):
                out.append(evaluate(check, runs, pid, label, e.label))
    return out


# What --baseline compares (the README promises these): goodput, completion time, OFO and retransmissions
BASELINE_METRICS = ("throughput_mbps", "seconds", "ofo_tcp", "ofo_mptcp", "retrans_segs")


def regressions(points_runs: dict[str, tuple[str, list[dict]]], baseline: dict[str, tuple[str, list[dict]]],
                metrics: tuple[str, ...] = BASELINE_METRICS) -> list[Verdict]:
    """Against a saved result set: a significant change in the bad direction fails.

    Points are matched by their label (the parameters), so a baseline from an
    earlier revision with the same sweep lines up point by point.
    """
    by_label = {label: runs for label, runs in baseline.values()}
    out = []
    for pid, (label, runs) in points_runs.items():
        base = by_label.get(label)
        if base is None:
            continue
        cases = sorted({(r["mode"], r["primary"]) for r in runs})
        fixed_size = any("delivered_fraction" in r["metrics"] for r in runs)
        for metric in metrics:
            if metric == "seconds" and not fixed_size:
                continue   # a timed run's seconds is its configured duration, not a completion time
            for mode, primary in cases:
                side = Side(mode, primary, metric)
                now, then = select(runs, side), select(base, side)
                if not now or not then:
                    continue
                est, lo, hi = diff_ci(now, then)
                worse_if = ">" if metric in LOWER_IS_BETTER else "<"
                # a regression is proven when the whole interval lies on the bad side
                bad = decide(worse_if, lo, hi) == PASS
                outcome = FAIL if bad else INCONCLUSIVE if lo is None else PASS
                detail = (f"now - baseline {est:+.4g} (runs: now {len(now)}, baseline {len(then)}): no verdict, "
                          "a 95 % interval needs at least 2 runs on each side" if lo is None else
                          f"now - baseline {est:+.4g}, 95% CI [{lo:+.4g}, {hi:+.4g}]"
                          + (" : significant regression" if bad else " : no significant regression"))
                out.append(Verdict(pid, label, f"baseline {side}", f"{side} not worse than baseline", outcome,
                                   est, lo, hi, len(now), len(then), detail))
    return out
