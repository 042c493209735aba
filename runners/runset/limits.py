"""A plan against the machine's calibration (runners.runset.calibration), before anything starts: what each
point asks of the machine at once (its paths' rates, their sum, its clients) against what the calibration
found this machine reproduces faithfully. Pure: the CLI hands in the points and the calibration.

What a point asks at once: MPTCP runs over all its paths together (one path with `mptcp.endpoints:
none`); TCP baselines one path at a time, or the `tcp_on` paths together with `tcp_together`. A path's
rate is its bottleneck (routed: its slowest link). In a switched topology every client sends at once: a
client's flow on a path is bounded by its link and the server's link of that path, the path's sum by
the server's link; an unshaped link bounds nothing (a path of unshaped links is not counted).

The checks:
  - path: one flow above the highest rate of ONE path the calibration reproduced;
  - sum: the flows at once above what as many paths at once carried in all (n x the rate per path at
    n = 2, 4 or 8; between two counts, the straight line between their sums; above 8, the sum at 8);
  - hosts: more clients than the calibration carried at its client rate, when each client asks at
    least that rate (fewer, slower clients are held to the sum only);
  - delay (a note, never beyond): a configured RTT below the one the RTT floor's median error is 10 % of.
A dimension the calibration did not measure is not checked, and said so."""
from __future__ import annotations

from dataclasses import dataclass

from runners.runset.calibration import PATH_COUNTS, path_limit, rtt_within_10pct


@dataclass(frozen=True)
class Finding:
    point: str
    check: str          # path | sum | hosts | delay | missing
    text: str
    beyond: bool        # the plan exceeds the calibration (--strict-fidelity refuses it); else a note


@dataclass(frozen=True)
class Demand:
    """What one point asks of the machine at once."""
    flows: list[tuple[str, float]]          # (path, or client/path, its rate in Mbit/s) of the busiest mode
    total: float                            # their sum, bounded by shared server links
    clients: int                            # clients sending at once (1 but for switched topologies)
    client_rate: float | None               # the least any client asks (switched), Mbit/s
    rtts: dict[str, float]                  # path -> configured RTT, ms (where the plan fixes it)


def paths_at_once(scenario) -> list[list[str]]:
    """The groups of paths the point's runs use at once, one group per kind of run."""
    topo, runs = scenario.topology, scenario.runs
    groups = []
    if "mptcp" in runs.compare:
        primary = scenario.mptcp.primary or topo.path_names[0]
        groups.append([primary] if scenario.mptcp.endpoints == "none" else list(topo.path_names))
    if "tcp" in runs.compare:
        on = (list(topo.path_names) if runs.tcp_on == "every-path"
              else list(runs.primaries or [scenario.mptcp.primary or topo.path_names[0]]) if runs.tcp_on == "primary"
              else list(runs.tcp_on))
        groups += [on] if runs.tcp_together else [[p] for p in on]
    return groups


def demand(scenario) -> Demand:
    """The busiest of the point's runs: the group of paths at once with the largest sum."""
    topo = scenario.topology
    best: Demand | None = None
    for group in paths_at_once(scenario):
        d = _switched_demand(topo, group) if topo.kind == "switched" else Demand(
            [(p, float(topo.path_rate(p))) for p in group], sum(float(topo.path_rate(p)) for p in group), 1, None,
            {p: _rtt_ms(topo, p) for p in group})
        if best is None or d.total > best.total:
            best = d
    return best


def _rtt_ms(topo, path: str) -> float:
    if topo.kind == "dual-homed":
        return 2 * topo.path(path).delay
    return sum(2 * topo.link(x).delay for x in topo.path(path).via)


def _switched_demand(topo, group: list[str]) -> Demand:
    """Each client's flow on each path: at most its link's rate and the server's link's; a client's flows
    on one of its links together at most that link; each path's flows together at most the server's."""
    flows, per_path, per_client = [], {}, {}
    on_link: dict[tuple[str, int], list[float]] = {}
    for name in group:
        p = topo.path(name)
        server_bw = topo.host_links(topo.server)[p.server_if].bw
        on_path = []
        for c in topo.clients:
            rates = [r for r in (topo.host_links(c)[p.client_if].bw, server_bw) if r is not None]
            if rates:
                on_path.append((f"{c}/{name}", float(min(rates))))
                on_link.setdefault((c, p.client_if), []).append(float(min(rates)))
        flows += on_path
        per_path[name] = min([sum(r for _, r in on_path)] + ([float(server_bw)] if server_bw is not None else []))
    for (c, i), rates in on_link.items():
        bw = topo.host_links(c)[i].bw
        per_client[c] = per_client.get(c, 0.0) + min([sum(rates)] + ([float(bw)] if bw is not None else []))
    total = min(sum(per_path.values()), sum(per_client.values()))
    asked = [r for r in per_client.values() if r > 0]
    return Demand(flows, total, len(topo.clients), min(asked) if asked else None, {})


def just_below(x: float) -> float:
    """A limit from a rate that failed with none passing: that rate, and any above it, is beyond."""
    return x * (1 - 1e-9)


def aggregate_limit(cal: dict, n: int) -> tuple[float, str] | None:
    """What `n` flows at once may carry in all, and how it was found ('4 x 60'; '8 x 6 not reproduced'
    where none passed, which makes that sum and above beyond); None when no count was measured."""
    known = []
    for k in PATH_COUNTS:
        lim = path_limit(cal, k) or {}
        if lim.get("value") is not None:
            known.append((k, k * lim["value"], f"{k} x {lim['value']:g}"))
        elif lim.get("failed_at") is not None:
            known.append((k, k * just_below(lim["failed_at"]), f"{k} x {lim['failed_at']:g} not reproduced"))
    if not known:
        return None
    if n <= known[0][0]:
        return known[0][1], known[0][2]
    if n >= known[-1][0]:
        return known[-1][1], known[-1][2] + (", the most paths measured" if n > known[-1][0] else "")
    for (k1, s1, t1), (k2, s2, t2) in zip(known, known[1:]):
        if k1 <= n <= k2:
            if n in (k1, k2):
                return (s1, t1) if n == k1 else (s2, t2)
            return s1 + (s2 - s1) * (n - k1) / (k2 - k1), f"between {t1} and {t2}"
    return None   # not reached: the counts are in order


def compare(point_id: str, scenario, cal: dict) -> list[Finding]:
    """The point's plan against the calibration: what is beyond it, and notes."""
    d = demand(scenario)
    out: list[Finding] = []
    one = path_limit(cal, 1) or {}
    if one.get("value") is not None or one.get("failed_at") is not None:
        top = one["value"] if one.get("value") is not None else just_below(one["failed_at"])
        fast = [(f, r) for f, r in d.flows if r > top]
        if fast:
            names = ", ".join(f"{f} ({r:g} Mbit/s)" for f, r in fast)
            limit = (f"the {top:g} Mbit/s one path carries faithfully here" if one.get("value") is not None else
                     f"one path here: not reproduced at {one['failed_at']:g} Mbit/s, and no lower rate was")
            out.append(Finding(point_id, "path", f"{'path' if len(fast) == 1 else 'paths'} {names}: beyond {limit}",
                               True))
    n = len(d.flows)
    agg = aggregate_limit(cal, n) if n > 1 else None
    if agg is not None and d.total > agg[0]:
        out.append(Finding(point_id, "sum", f"{n} flows at once ({', '.join(f for f, _ in d.flows)}) ask "
                           f"{d.total:g} Mbit/s in all: beyond the {agg[0]:.4g} Mbit/s that {n} paths at once "
                           f"carry faithfully here ({agg[1]})", True))
    out += _hosts(point_id, d, cal)
    out += _delays(point_id, d, cal)
    return out


def _hosts(point_id: str, d: Demand, cal: dict) -> list[Finding]:
    h = (cal.get("limits") or {}).get("hosts") or {}
    if d.clients < 2 or h.get("rate_mbit") is None or (h.get("value") is None and h.get("failed_at") is None):
        return []
    most = h["value"] if h.get("value") is not None else h["failed_at"] - 1
    if d.clients > most and d.client_rate is not None and d.client_rate >= h["rate_mbit"]:
        limit = (f"the {most} clients at {h['rate_mbit']:g} Mbit/s each this machine carries faithfully"
                 if h.get("value") is not None else
                 f"this machine: {h['failed_at']} clients at {h['rate_mbit']:g} Mbit/s each were not reproduced, "
                 "and no fewer were tried")
        return [Finding(point_id, "hosts", f"{d.clients} clients at {d.client_rate:g} Mbit/s each: beyond {limit}",
                        True)]
    return []


def _delays(point_id: str, d: Demand, cal: dict) -> list[Finding]:
    dl = (cal.get("limits") or {}).get("delay") or {}
    floor = rtt_within_10pct(dl)
    if floor is None:
        return []
    short = sorted((p, rtt) for p, rtt in d.rtts.items() if rtt < floor)
    if not short:
        return []
    names = ", ".join(f"{p} ({rtt:g} ms)" for p, rtt in short)
    return [Finding(point_id, "delay", f"the RTT of {names}: this machine adds +{dl['median_ms']:g} ms to an "
                    f"RTT (median; +{dl['min_ms']:g} to +{dl['max_ms']:g}), more than 10 % below {floor:g} ms", False)]


def unmeasured(cal: dict) -> list[str]:
    """The dimensions the calibration has no figure for (not compared)."""
    lim = cal.get("limits") or {}
    missing = [f"{k} path{'s' if k > 1 else ''}" for k in PATH_COUNTS
               if (path_limit(cal, k) or {}).get("value") is None and (path_limit(cal, k) or {}).get("failed_at") is None]
    h = lim.get("hosts") or {}
    if h.get("value") is None and h.get("failed_at") is None:
        missing.append("clients")
    return missing
