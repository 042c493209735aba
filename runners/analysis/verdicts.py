"""Statistical verdicts: an expectation passes only when its 95 % interval supports it.

For `L op k*R` we take Welch's interval of mean(L) - k*mean(R) (or of
mean(L) - c for a constant). For `>`/`>=` the claim holds when the whole
interval is above 0, fails when it is wholly below 0, and is otherwise
"inconclusive, needs more repetitions"; `<`/`<=` mirror that. `==` holds when
the interval is 0 itself (counts that never varied: `mptcp.missing_subflows == 0`)
and fails when it excludes 0. Fixed timing
bounds on single runs (the kind that flake) are never used.

Runs the emulator could not keep up with (their fidelity `unfaithful`, runners.results.fidelity) are left
out unless asked for (`keep_unfaithful`), and each verdict says how many it left out.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from scenarios.spec.expect import Check, LOWER_IS_BETTER, Side, parse_check
from scenarios.spec.kernel import KERNEL_KEY, release_matches

from runners.analysis.stats import const_ci, diff_ci
from runners.results.fidelity import unfaithful

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"
AT_A_POINT, ACROSS_KERNELS, AGAINST_BASELINE = "point", "kernels", "baseline"


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
    kind: str = AT_A_POINT     # at a point, across kernels (points joined by '+'), or against a baseline
    unfaithful_left_out: int = 0   # runs of its sides left out because the emulator did not keep up

    def to_dict(self) -> dict:
        return asdict(self)


def select(runs: list[dict], side: Side, keep_unfaithful: bool = False) -> list[float]:
    return [float(r["metrics"][side.metric]) for r in _matching(runs, side)
            if keep_unfaithful or not unfaithful(r)]


def _matching(runs: list[dict], side: Side) -> list[dict]:
    return [r for r in runs if r["mode"] == side.mode and (side.primary is None or r["primary"] == side.primary)
            and (side.kernel is None or on_kernel(r, side.kernel))
            and r["status"] == "ok" and r["metrics"].get(side.metric) is not None]


def unfaithful_count(runs: list[dict], *sides: Side | None) -> int:
    """Runs that one of the sides would have read, but for their fidelity."""
    return len({id(r) for side in sides if side is not None for r in _matching(runs, side) if unfaithful(r)})


def left_out_text(n: int) -> str:
    return f"; {n} unfaithful run(s) left out (the emulator did not keep up: docs/fidelity.md)" if n else ""


def on_kernel(run: dict, kernel: str) -> bool:
    """Did the run use this kernel: its point's `kernel` (a label such as 6.12) or the release it ran on
    (a kernel given by its image's path is named by its release in a check)?"""
    label = (run.get("params") or {}).get(KERNEL_KEY)
    return label == kernel or release_matches(kernel, label) or release_matches(kernel, run.get("kernel"))


def without_kernel(params: dict) -> tuple:
    """A point's parameters but its kernel: the points of one case on every kernel share it."""
    return tuple(sorted((k, str(v)) for k, v in params.items() if k != KERNEL_KEY))


def cases_across_kernels(points_runs: dict[str, tuple[str, list[dict]]]) -> list[tuple[str, str, list[dict]]]:
    """(ids joined by '+', label without the kernel, all runs) for points that differ only in their kernel."""
    groups: dict[tuple, list[tuple[str, str, list[dict]]]] = {}
    for pid, (label, runs) in points_runs.items():
        if runs:
            groups.setdefault(without_kernel(runs[0].get("params") or {}), []).append((pid, label, runs))
    out = []
    for key, members in groups.items():
        label = ", ".join(f"{k}={v}" for k, v in key) or "base"
        out.append(("+".join(m[0] for m in members), label, [r for m in members for r in m[2]]))
    return out


def decide(op: str, low: float | None, high: float | None) -> str:
    """The claim `difference op 0`, judged by its 95 % interval [low, high]."""
    if low is None or high is None:
        return INCONCLUSIVE
    holds, broken = {
        ">": (low > 0, high <= 0),
        ">=": (low >= 0, high < 0),
        "<": (high < 0, low >= 0),
        "<=": (high <= 0, low > 0),
        "==": (low == 0 and high == 0, low > 0 or high < 0),
    }[op]
    return PASS if holds else FAIL if broken else INCONCLUSIVE


def evaluate(check: Check, runs: list[dict], point: str = "", label: str = "", name: str = "",
             kind: str = AT_A_POINT, keep_unfaithful: bool = False) -> Verdict:
    left = select(runs, check.left, keep_unfaithful)
    right = select(runs, check.right, keep_unfaithful) if check.right else []
    dropped = 0 if keep_unfaithful else unfaithful_count(runs, check.left, check.right)
    if not left or (check.right and not right):
        return Verdict(point, label, name or str(check), str(check), INCONCLUSIVE, None, None, None,
                       len(left), len(right), "no successful runs for one side" + left_out_text(dropped), kind,
                       dropped)
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
    return Verdict(point, label, name or str(check), str(check), outcome, est, lo, hi, len(left), len(right),
                   detail + left_out_text(dropped), kind, dropped)


def evaluate_points(scenario, points_runs: dict[str, tuple[str, list[dict]]],
                    keep_unfaithful: bool = False) -> list[Verdict]:
    """Every expectation at every point it applies to: {point id: (label, runs)} -> verdicts."""
    out = []
    for e in scenario.expect:
        check = parse_check(e.check)
        if check.kernels:   # across kernels: the points that differ only in their kernel, together
            for pids, label, runs in cases_across_kernels(points_runs):
                if e.applies({**runs[0].get("params", {}), KERNEL_KEY: check.kernels[0]}):
                    out.append(evaluate(check, runs, pids, label, e.label, ACROSS_KERNELS, keep_unfaithful))
            continue
        for pid, (label, runs) in points_runs.items():
            if runs and e.applies(runs[0].get("params", {})):
                out.append(evaluate(check, runs, pid, label, e.label, keep_unfaithful=keep_unfaithful))
    return out


# What --baseline compares (the README promises these): goodput, completion time, OFO and retransmissions
BASELINE_METRICS = ("throughput_mbps", "seconds", "ofo_tcp", "ofo_mptcp", "retrans_segs")


def regressions(points_runs: dict[str, tuple[str, list[dict]]], baseline: dict[str, tuple[str, list[dict]]],
                metrics: tuple[str, ...] = BASELINE_METRICS, keep_unfaithful: bool = False) -> list[Verdict]:
    """Against a saved result set: a significant change in the bad direction fails.

    Points are matched by their label (the parameters), so a baseline from an
    earlier revision with the same sweep lines up point by point. A point
    without a match is matched on its parameters but the kernel: a set run on
    6.12 lines up with a baseline run on 6.1 (with --kernel, or a kernel sweep).
    """
    by_label = {label: runs for label, runs in baseline.values()}
    by_case: dict[tuple, list[dict]] = {}
    for _, runs in baseline.values():
        if runs:
            by_case.setdefault(without_kernel(runs[0].get("params") or {}), []).extend(runs)
    out = []
    for pid, (label, runs) in points_runs.items():
        base = by_label.get(label)
        if base is None and runs:
            base = by_case.get(without_kernel(runs[0].get("params") or {}))
        if base is None:
            continue
        kernels = _kernels_named(runs, base)
        cases = sorted({(r["mode"], r["primary"]) for r in runs})
        fixed_size = any("delivered_fraction" in r["metrics"] for r in runs)
        for metric in metrics:
            if metric == "seconds" and not fixed_size:
                continue   # a timed run's seconds is its configured duration, not a completion time
            for mode, primary in cases:
                side = Side(mode, primary, metric)
                now, then = select(runs, side, keep_unfaithful), select(base, side, keep_unfaithful)
                dropped = 0 if keep_unfaithful else unfaithful_count(runs, side) + unfaithful_count(base, side)
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
                                   est, lo, hi, len(now), len(then), detail + kernels + left_out_text(dropped),
                                   AGAINST_BASELINE, dropped))
    return out


def _kernels_named(now: list[dict], then: list[dict]) -> str:
    """'; kernel 6.12.95+deb12-amd64 against 6.1.0-56-amd64' when the two sides ran on different kernels."""
    a = sorted({r.get("kernel") for r in now if r.get("kernel")})
    b = sorted({r.get("kernel") for r in then if r.get("kernel")})
    return f"; kernel {', '.join(a)} against {', '.join(b)}" if a and b and a != b else ""
