"""What a run's events did, for its record: each change as planned and applied, with the stall, the
recovery and the bytes per path around it (runners.results.recovery), the MPTCP events that followed it,
the path manager's counters over the run, and the run's event metrics. Pure: the runner passes
everything in.

The capacity a recovery is measured against, after a change: the sum of the configured rates (shaped
by earlier `shape` changes) of the run's paths that are still live (not down, not blackholed, and for
MPTCP not with their endpoint removed); of those, the non-backup paths only when there is one, since
MPTCP's default scheduler sends on a backup path only when no other is available. A TCP run has one
path: its primary."""
from __future__ import annotations

from typing import Optional

from scenarios.spec.model import Scenario
from scenarios.spec.model.events import state_at, timeline

from runners.collect.mptcp_monitor import after_event
from runners.linux import procfs
from runners.results.recovery import DEFAULT_FRACTION, recovery

# the path manager's counters around path changes (nstat names); their deltas over the run are kept
MIB_COUNTERS = ["MPTcpExtSubflowStale", "MPTcpExtSubflowRecover", "MPTcpExtMPPrioTx", "MPTcpExtMPPrioRx",
                "MPTcpExtMPJoinSynRx", "MPTcpExtMPJoinAckRx", "MPTcpExtRmAddr", "MPTcpExtRmSubflow",
                "MPTcpExtAddAddr", "MPTcpExtEchoAdd"]
# What an applied change may lag its planned time before the run is flagged: the TCG micro-VM's bound
# (a process start there is 50-100 ms); designed for 20 ms on a native kernel (docs/scenario-format.md).
DRIFT_BOUND_MS = 100.0


def current_rates(scenario: Scenario, at_ms: float) -> dict[str, float]:
    """Each path's rate (its slowest link's, for a routed path) once the shape changes up to `at_ms` are
    made; None where a switched topology cannot say which links a path crosses."""
    topo = scenario.topology
    bw: dict[tuple[str, str], float] = {}
    for _, occ in timeline(scenario.events):
        if occ.at_ms <= at_ms and occ.shape is not None and "bw" in occ.shape.changes():
            bw[occ.target] = occ.shape.bw
    out = {}
    for name in topo.path_names:
        links = topo.links_of(name)
        if links is None:
            out[name] = None
        elif topo.kind == "dual-homed":
            out[name] = bw.get(("path", name), topo.path(name).bw)
        else:
            out[name] = min(bw.get(("link", x), topo.link(x).bw) for x in links)
    return out


def capacity_after(scenario: Scenario, paths: list[str], mptcp: bool, at_ms: float) -> tuple[Optional[float], tuple]:
    """(Mbit/s the run's live paths can carry after the changes up to `at_ms`, the backup paths among
    them); None when a rate is unknown (switched)."""
    state = state_at(scenario.events, list(scenario.mptcp.backup), at_ms)
    rates = current_rates(scenario, at_ms)
    topo = scenario.topology
    live = live_paths(scenario, paths, mptcp, at_ms)
    backup = [p for p in live if mptcp and state.get(("path", p), {}).get("backup", p in scenario.mptcp.backup)]
    if any(rates[p] is None or _traced(topo, p) for p in live):
        return None, tuple(backup)
    chosen = [p for p in live if p not in backup] or live
    return float(sum(rates[p] for p in chosen)), tuple(backup)


def live_paths(scenario: Scenario, paths: list[str], mptcp: bool, at_ms: float) -> list[str]:
    """The run's paths still live once the changes up to `at_ms` are made: not down, not blackholed (on
    the path or a link it crosses), and for MPTCP not with their endpoint removed."""
    state = state_at(scenario.events, list(scenario.mptcp.backup), at_ms)
    live = []
    for p in paths:
        targets = [("path", p)] + [("link", x) for x in scenario.topology.links_of(p) or set()]
        if any(state.get(t, {}).get("down") or state.get(t, {}).get("blackholed") for t in targets):
            continue
        if not (mptcp and state.get(("path", p), {}).get("removed")):
            live.append(p)
    return live


def _traced(topo, path: str) -> bool:
    """The path, or a link it crosses, follows a rate trace: its capacity is the trace's, not a number."""
    if topo.kind == "dual-homed":
        return topo.path(path).trace is not None
    return any(getattr(topo.link(x), "trace", None) is not None for x in topo.links_of(path) or ())


def build(scenario: Scenario, applied: list[dict], samples: list[dict], paths: list[str], mptcp: bool,
          monitor: Optional[dict], addresses: dict[str, str], before: dict, after: dict,
          subflow_samples: Optional[list[dict]] = None) -> tuple[dict, dict]:
    """(the record's `events` section, the run's event metrics). `subflow_samples`: the client's subflow
    samples (runners.traffic.base.watch_subflows) stamped on the run's clock (`t`), which can tell why a
    recovery did not come (window_limit)."""
    steps = [a for a in applied if a["action"] == "trace"]
    applied = [a for a in applied if a["action"] != "trace"]
    made = [a for a in applied if a.get("applied_s") is not None]
    t = scenario.traffic
    if t.duration is not None:   # a client stopped after its duration: the samples past it are not the run's
        samples = [s for s in samples if s["t"] <= t.duration + t.omit]
    changes = []
    for k, a in enumerate(applied):
        item = dict(a)
        if a.get("applied_s") is not None:
            # up to the next change, or the traffic's end (the connections closing after it are not its doing)
            nxt = next((b["applied_s"] for b in made if b["applied_s"] > a["applied_s"]),
                       t.duration + t.omit if t.duration is not None else None)
            item.update(_around(scenario, a, samples, paths, mptcp, nxt))
            if mptcp and subflow_samples and (item.get("no_recovery") or "").startswith("goodput stayed below"):
                _explain(item, scenario, a, subflow_samples, paths, addresses, nxt)
            if monitor is not None:
                item["mptcp_events"] = after_event(monitor, a["applied_s"], nxt, addresses)
        changes.append(item)
    mib = {side: procfs.counter_delta(before[f"{side}_nstat"], after[f"{side}_nstat"], MIB_COUNTERS)
           for side in ("client", "server")}
    metrics = _metrics(changes + steps)
    return {"changes": changes, "trace_steps": steps, "mib": mib, "drift_bound_ms": DRIFT_BOUND_MS,
            "recovery_fraction": DEFAULT_FRACTION}, metrics


def _around(scenario: Scenario, a: dict, samples: list[dict], paths: list[str], mptcp: bool,
            next_s: Optional[float]) -> dict:
    capacity, backup = capacity_after(scenario, paths, mptcp, a["planned_s"] * 1000)
    window = [s for s in samples if next_s is None or s["t"] <= next_s]
    out = {"capacity_mbps": capacity}
    if capacity is None:
        return {**out, "recovery_s": None, "stall_s": None,
                "no_recovery": "the capacity after the change is unknown: a live path follows a rate trace, "
                               "or the switches choose which links a path crosses"}
    # from when the change was complete at every end: a link taken down by a process started under TCG
    # went down up to 0.9 s after its start, and measuring from the start read that delay as a recovery
    r = recovery(window, paths, a.get("done_s", a["applied_s"]), capacity, backup=backup)
    return {**out, "stall_s": r.stall_s, "stall_open": r.stall_open, "recovery_s": r.recovery_s,
            "no_recovery": r.no_recovery, "bytes_before": r.bytes_before, "bytes_after": r.bytes_after,
            "backup_share": r.backup_share}


def _explain(item: dict, scenario: Scenario, a: dict, subflow_samples: list[dict], paths: list[str],
             addresses: dict[str, str], next_s: Optional[float]) -> None:
    """A recovery that did not come, when the windows the receiver offered could not carry its mark:
    `window_limited` and the reason's words."""
    if scenario.traffic.direction != "upload":   # only the client's subflows are sampled: it sends on an upload
        return
    live = live_paths(scenario, paths, True, a["planned_s"] * 1000)
    need = DEFAULT_FRACTION * item["capacity_mbps"]
    limit = window_limit(subflow_samples, a.get("done_s", a["applied_s"]), next_s, live, addresses, need)
    if limit is None:
        return
    item["window_limited"] = limit
    said = ", ".join(f"{p}'s {w['snd_wnd']:,} B per {w['rtt_ms']:.0f} ms RTT" for p, w in limit["paths"].items())
    at = limit["at_s"]
    when = (f"sampled at {', '.join(f'{t:g}' for t in at)} s" if len(at) <= 3 else
            f"in {len(at)} samples from {at[0]:g} to {at[-1]:g} s")
    if "held_from_s" in limit:
        when = f"from {limit['held_from_s']:g} s on, after samples that were not held: {when}"
    item["no_recovery"] += (f"; the receiver's window held the sender below it: {said} carry at most "
                            f"{limit['max_mbps']:g} Mbit/s ({when})")


# Only the samples begun this long after the change can show a path held to its window: one taken just
# after it can find the path that takes over still idle (its subflow had nothing to send yet).
WINDOW_SETTLE_S = 1.0
# A window can set in late, after a burst at the path's full rate (lab 6, 2026-11-28: B at 8.5-10 Mbit/s
# for 0.3 s, then held to 42 kB per 66 ms to the end of A's outage). Samples that did not show it are then
# followed by a stretch that did, to the outage's end; the stretch explains the missed recovery only when
# it lasted this long (at a run with events' 0.5 s sampling, three samples or more).
WINDOW_HELD_MIN_S = 1.0


def window_limit(subflow_samples: list[dict], start_s: float, end_s: Optional[float], live: list[str],
                 addresses: dict[str, str], need_mbps: float) -> Optional[dict]:
    """When the client's subflow samples (their `windows`: runners.linux.sockdiag.send_window) begun
    WINDOW_SETTLE_S or more after `start_s` (and up to `end_s`) show the data connection held to the
    windows its receiver offered on the live paths, and those windows carry less than `need_mbps` in all
    (a subflow sends at most snd_wnd per RTT): the windows, the most they carry, and the samples' times;
    else None. Held means every such sample, or the last ones, to the last, over WINDOW_HELD_MIN_S or
    more (`held_from_s` then says from when).

    The data connection is the one with the most bytes acknowledged (iperf3's, not its control one). A
    subflow is held to its window when it holds a window's worth unacknowledged (Send-Q within one MSS
    of snd_wnd) and the kernel did not find it waiting for data (app_limited): an idle subflow with a
    small window explains nothing."""
    considered = [s for s in subflow_samples if s.get("t") is not None and s["t"] >= start_s + WINDOW_SETTLE_S
                  and (end_s is None or s["t"] <= end_s)]
    stretch: list[tuple[float, float, dict]] = []   # the held samples after the last one that was not
    for s in considered:
        held = _held_windows(s["windows"], live, addresses, need_mbps)
        if held is None:
            stretch = []
        else:
            stretch.append((s["t"], *held))
    if not stretch:
        return None
    late = len(stretch) < len(considered)
    if late and stretch[-1][0] - stretch[0][0] < WINDOW_HELD_MIN_S:
        return None
    _, most, on_live = max(stretch, key=lambda x: x[1])
    out = {"max_mbps": round(most, 2), "at_s": [t for t, _, _ in stretch],
           "paths": {p: {"snd_wnd": w["snd_wnd"], "rtt_ms": w["rtt_ms"]} for p, w in sorted(on_live.items())}}
    if late:
        out["held_from_s"] = stretch[0][0]
    return out


def _held_windows(windows: list[dict], live: list[str], addresses: dict[str, str],
                  need_mbps: float) -> Optional[tuple[float, dict]]:
    """(the most the live paths' windows carry, those windows) when one sample shows the data connection
    held to windows that carry less than `need_mbps`; else None."""
    acked: dict[str, int] = {}
    for w in windows:
        acked[w["token"]] = acked.get(w["token"], 0) + w["bytes_acked"]
    data = max(acked, key=acked.__getitem__, default=None)
    on_live = {addresses.get(w["local"]): w for w in windows
               if w["token"] == data and addresses.get(w["local"]) in live}
    held = all(w["send_q"] >= w["snd_wnd"] - w["mss"] and not w["app_limited"] for w in on_live.values())
    most = sum(w["snd_wnd"] * 8 / w["rtt_ms"] / 1000 for w in on_live.values())
    return (most, on_live) if on_live and held and most < need_mbps else None


def _metrics(changes: list[dict]) -> dict:
    """recovery_s and stall_s: the worst over the applied changes (no recovery after any change: None,
    and `no_recovery` says after which); the largest drift, and how many changes passed its bound."""
    made = [c for c in changes if c.get("applied_s") is not None]
    timed = made
    made = [c for c in made if c["action"] != "trace"]
    failed = [c for c in made if c.get("recovery_s") is None]
    stalls = [c["stall_s"] for c in made if c.get("stall_s") is not None]
    drifts = [c["drift_ms"] for c in timed]
    out = {"recovery_s": None if failed or not made else max(c["recovery_s"] for c in made),
           "stall_s": max(stalls) if stalls else None,
           "event_drift_max_ms": max(drifts) if drifts else None,
           "events_late": sum(1 for d in drifts if d > DRIFT_BOUND_MS),
           "events_failed": sum(1 for c in timed if c.get("error"))}
    if failed:
        out["no_recovery"] = "; ".join(f"{c['event']} at {c['applied_s']:.2f} s: {c['no_recovery']}" for c in failed)
    return out
