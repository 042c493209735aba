"""Paths that change during a run (issue 30), really applied: every action in one MPTCP run and its TCP
baseline, on a real kernel with netem, checked by what the kernel itself reports (MIB counters, the
path manager's monitor, the qdiscs read back) and by the network being back in shape for the next run."""
import json

import pytest

from .helpers import REPO, leftovers, run_cli, steered_apart, write_scenario
from .test_runs import results_of

pytestmark = pytest.mark.integration

EVERY_ACTION = """\
name: every-action
topology:
  kind: dual-homed
  paths:
    - {name: A, bw: 10, delay: 10ms}
    - {name: B, bw: 10, delay: 10ms}
mptcp: {primary: A, sysctls: {stale_loss_cnt: 2}}
traffic: {duration: 9, direction: upload}
events:
  - {name: b-backup, at: 1.2s, path: B, do: backup}
  - {name: b-nobackup, at: 1.6s, path: B, do: nobackup}
  - {name: a-down, at: 2s, path: A, do: down}
  - {name: a-up, at: 3.5s, path: A, do: up}
  - {name: b-slow, at: 4s, path: B, shape: {bw: 2, delay: 40ms}}
  - {name: a-hole, at: 5s, path: A, do: blackhole}
  - {name: a-back, at: 6s, path: A, do: restore}
  - {name: b-rm, at: 6.5s, path: B, do: endpoint-remove}
  - {name: b-add, at: 7.5s, path: B, do: endpoint-add}
runs: {compare: [mptcp, tcp]}
"""


def test_every_action_is_applied_on_time_and_the_network_is_put_back(tmp_path):
    f = write_scenario(tmp_path / "ev.yaml", EVERY_ACTION)
    r = run_cli(str(f), "--backend", "native", "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stdout + r.stderr
    mptcp, tcp = sorted(results_of(tmp_path / "out", "every-action")["runs"], key=lambda x: x["mode"])
    changes = {c["event"]: c for c in mptcp["events"]["changes"]}
    assert list(changes) == ["b-backup", "b-nobackup", "a-down", "a-up", "b-slow", "a-hole", "a-back", "b-rm", "b-add"]
    for c in changes.values():
        assert c["applied_s"] is not None and "error" not in c, c
        assert c["drift_ms"] < 1000, c    # the bound (100 ms) is the benchmark's; a loaded TCG guest may lag more
    mib = mptcp["events"]["mib"]
    assert mib["client"]["MPTcpExtMPPrioTx"] >= 2, mib          # backup, then nobackup: MP_PRIO each time
    assert mib["client"]["MPTcpExtRmAddr"] >= 1, mib            # the server's endpoint removal reached the client
    assert mib["client"]["MPTcpExtAddAddr"] >= 2, mib           # announced at the start and once more when re-added
    # an established subflow's priority change shows as SF_PRIO (its peer received MP_PRIO). Under a loaded
    # TCG guest B's join once came 1.08 s into the traffic, after a backup set at 1 s: B then joined as a
    # backup (its MP_JOIN carries the flag), and the first SF_PRIO was the nobackup's
    seen = {c: changes[c]["mptcp_events"] for c in ("b-backup", "b-nobackup")}
    prio = [c for c, ev in seen.items() if any(k.startswith("SF_PRIO") for node in ev.values() for k in node)]
    joined_late = any(k.startswith("SF_ESTABLISHED") for node in seen["b-backup"].values() for k in node)
    assert prio[:1] == ["b-backup"] or (joined_late and "b-nobackup" in prio), seen
    removed = changes["b-rm"]["mptcp_events"]
    assert "REMOVED" in removed.get("h1", {}) or "REMOVED B" in removed.get("h1", {}), removed
    # the MPTCP connection outlived every change, and carried on after A went down
    assert mptcp["metrics"]["throughput_mbps"] > 2 and changes["a-down"]["capacity_mbps"] == 10.0
    assert mptcp["metrics"]["stall_s"] is not None
    # blackholed, A delivered at most what its queue held (117 packets) while its interface stayed up
    assert changes["a-hole"]["bytes_after"]["A"] < 250_000, changes["a-hole"]
    # the TCP baseline on A: no recovery while A was down, said in words
    tcp_down = next(c for c in tcp["events"]["changes"] if c["event"] == "a-down")
    assert tcp_down["recovery_s"] is None and tcp_down["no_recovery"] == "no path is live after the event"
    assert tcp["metrics"]["recovery_s"] is None and "a-down" in tcp["no_recovery"]
    assert all(c.get("not_applied") == "a TCP run has no MPTCP endpoints" for c in tcp["events"]["changes"]
               if c["action"] in ("backup", "nobackup", "endpoint-remove", "endpoint-add"))
    # the TCP run started on the configured network: B's 10 ms each way again, not 40, and A up
    raw = tmp_path / "out" / "every-action" / "latest" / "raw" / tcp["id"]
    qdiscs = json.loads((raw / "qdiscs-before.json").read_text())
    assert tcp["metrics"]["bytes_received"] > 0 and qdiscs, qdiscs
    assert tcp["paths"]["A"]["bytes_received"] > 0
    assert (raw.parent / mptcp["id"] / "mptcp-monitor.txt").read_text().count("SF_ESTABLISHED") >= 1
    assert leftovers() == []


ROUTED_LINK = """\
name: routed-link
topology:
  kind: routed
  routers: [r1, r2]
  links:
    - {name: a1, between: [h1, r1], bw: 50, delay: 1ms}
    - {name: a2, between: [h1, r1], bw: 50, delay: 1ms}
    - {name: core-a, between: [r1, r2], bw: 8, delay: 5ms}
    - {name: core-b, between: [r1, r2], bw: 8, delay: 5ms}
    - {name: b1, between: [r2, h2], bw: 50, delay: 1ms}
    - {name: b2, between: [r2, h2], bw: 50, delay: 1ms}
  paths:
    - {name: A, via: [a1, core-a, b1]}
    - {name: B, via: [a2, core-b, b2]}
mptcp: {primary: A}
traffic: {duration: 10, direction: upload}
events:
  - {name: core-down, at: 2s, link: core-a, do: down}
  - {name: core-up, at: 4s, link: core-a, do: up}
  - {name: core-slow, at: 8.5s, link: core-b, shape: {bw: 3}}
runs: {compare: [mptcp]}
"""


DOWNSTREAM_DRAIN_S = 0.1   # the per-path sampler's interval around events (runners.traffic.base)


def test_a_link_between_routers_goes_down_and_comes_back(tmp_path):
    """A link in the middle of a routed path (no host sees its interface): the routers lose their routes
    through it, MPTCP goes on over B, and `up` gives the routers their routes back so A carries again."""
    f = write_scenario(tmp_path / "routed.yaml", ROUTED_LINK)
    r = run_cli(str(f), "--backend", "native", "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stdout + r.stderr
    (run,) = results_of(tmp_path / "out", "routed-link")["runs"]
    changes = {c["event"]: c for c in run["events"]["changes"]}
    assert list(changes) == ["core-down", "core-up", "core-slow"]
    for c in changes.values():
        assert c["applied_s"] is not None and "error" not in c, c
    down = changes["core-down"]
    # A's subflow lost its routes in the routers while B carried on: from the first per-path sample after
    # the change was made (`done_s`: both routers' interfaces down) until `up` began, A's counter stands
    # still (a few retransmitted segments at most) and B's grows. Not from `applied_s`, the change's start:
    # the two routers' batches take tens of ms under TCG, and A's 8 Mbit/s went on meanwhile (40 kB in one
    # CI run of 2026-11-28, once the counters were read over netlink in 3-15 ms, not 0.1-0.9 s by a process)
    # What had already crossed core-a still arrives after it: b1's 1 ms of netem, late under TCG (12 kB,
    # 12 ms of core-a's 8 Mbit/s, in the sample after `done_s` in the CI rehearsal of 2026-11-29 13:00): the
    # window starts one sampling interval later.
    samples = json.loads((tmp_path / "out" / "routed-link" / "latest" / "raw" / run["id"]
                          / "path-samples.json").read_text())
    settled = down["done_s"] + DOWNSTREAM_DRAIN_S
    while_down = [x for x in samples   # read wholly between the two changes (`t` is a read's middle)
                  if settled <= x["t"] - x["read_ms"] / 2000 < x["t"] + x["read_ms"] / 2000
                  <= changes["core-up"]["applied_s"]]
    assert len(while_down) >= 2, samples
    assert while_down[-1]["A"] - while_down[0]["A"] <= 10_000 < while_down[-1]["B"] - while_down[0]["B"], while_down
    assert down["took_ms"] < 1000 and changes["core-up"]["took_ms"] < 1000    # batch lines, not processes
    # B carried on. Whether it was back at 80 % of its 8 Mbit/s, held, within the 2 s A was down is
    # MPTCP's failover time (1.4-2.4 s in docs/experiments.md, once 4.4 s), not this test's subject: the
    # stall around the change is measured, and the run's goodput shows B carried it
    assert down["stall_s"] is not None and run["metrics"]["throughput_mbps"] > 3, (down, run["metrics"])
    # after `up`, A carried data again: the routers had their routes through core-a back. Its subflow
    # retries on its RTO, doubled at each try: with A down 3 s (2-5 s) the next try after `up` could come
    # 3 s later, and once (TCG VM, 2026-11-26) A carried 110 kB before core-slow at 8.5 s. Each wait
    # doubles the one before, so the wait after `up` is at most about as long as A was down: now 2 s
    assert changes["core-up"]["bytes_after"]["A"] > 200_000, changes["core-up"]
    assert changes["core-slow"]["capacity_mbps"] == 8.0 + 3.0, changes["core-slow"]
    assert leftovers() == []


SWITCHED_LINK = """\
name: switched-link
topology:
  kind: switched
  server: srv
  clients: [cli]
  switches:
    - {name: s1, type: ovs-user, controller: true}
    - {name: s2, type: ovs-user, controller: true}
  controller:
    app: steering
    steer: {uplinks: {s1: [wanA, wanB], s2: [wanA, wanB]}, by: server-port}
  links:
    - {name: access, between: [cli, s1]}
    - {name: wanA, between: [s1, s2], bw: 10, delay: 5ms}
    - {name: wanB, between: [s1, s2], bw: 10, delay: 5ms}
    - {name: dc, between: [s2, srv]}
  paths:
    - {name: main}
mptcp: {signal_ports: [5300]}
traffic: {duration: 8, direction: upload}
events:
  - {name: a-hole, at: 2s, link: wanA, do: blackhole}
  - {name: a-back, at: 4s, link: wanA, do: restore}
  - {name: b-slow, at: 5s, link: wanB, shape: {bw: 4, delay: 20ms}}
runs: {compare: [mptcp]}
"""


def test_links_between_switches_are_blackholed_and_reshaped(tmp_path):
    """Links between two switches of OVS's userspace datapath (their ports' offloads off), under the
    steering app: netem on the switches' ports is changed in place, the set's one connection survives the
    blackhole on one WAN link, each subflow keeps to the WAN link the app chose for it (the app's
    decisions, OVS's flow counters and the links' own bytes agree), and the network is put back."""
    f = write_scenario(tmp_path / "switched.yaml", SWITCHED_LINK)
    r = run_cli(str(f), "--backend", "native", "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stdout + r.stderr
    (run,) = results_of(tmp_path / "out", "switched-link")["runs"]
    changes = {c["event"]: c for c in run["events"]["changes"]}
    assert list(changes) == ["a-hole", "a-back", "b-slow"]
    for c in changes.values():
        assert c["applied_s"] is not None and "error" not in c, c
    assert run["metrics"]["subflows"] == 2 and run["metrics"]["throughput_mbps"] > 3, run["metrics"]
    # the switches choose the links a path crosses: no capacity to measure a recovery against, said so
    assert run["metrics"]["recovery_s"] is None and "switches choose" in changes["a-hole"]["no_recovery"]
    # no "error" above: each shape was read back from the switch ports' netem as it was asked for
    # The client's site sends the data up (an upload): s1 puts a subflow on each WAN link by server port
    steered_apart(run, "s1", "dport")
    decided = {(e["switch"], e["dport"] if e["switch"] == "s1" else e["sport"], e["uplink"])
               for e in run["steering"]["decisions"]}
    assert ("s1", 5201, "wanB") in decided and ("s1", 5300, "wanA") in decided, decided
    for name, link in run["links"].items():     # s1 -> s2 the data, s2 -> s1 only acknowledgements
        if name.startswith("wan"):
            assert link["from_peer_bytes"] < 0.1 * link["to_peer_bytes"], (name, link)
    assert (tmp_path / "out" / "switched-link" / "latest" / "raw" / run["id"] / "ofctl-flows-s1.txt").exists()
    assert leftovers() == []


TRACED = """\
name: traced
topology:
  kind: dual-homed
  paths:
    - {name: A, bw: 8, delay: 10ms, trace: {to_server: %s, step: 1s}}
traffic: {duration: 8, direction: upload}
runs: {compare: [tcp]}
"""


def test_a_traced_path_follows_its_steps_with_what_was_queued(tmp_path):
    """step.trace: 8 Mbit/s, 2 from 5 s. The rate is a TBF's above netem, so the step applies to the 100
    packets already queued: with netem's own rate they left at 8 Mbit/s after the step (1.2 Mbit/s more in
    the next second; bench.events, 2026-11-26)."""
    f = write_scenario(tmp_path / "t.yaml", TRACED % (REPO / "scenarios" / "traces" / "step.trace"))
    r = run_cli(str(f), "--backend", "native", "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stdout + r.stderr
    doc = results_of(tmp_path / "out", "traced")
    (run,) = doc["runs"]
    meta = json.loads((tmp_path / "out" / "traced" / "latest" / "metadata.json").read_text())
    assert meta["shaping"]["h1-eth0"]["rate_by"] == "tbf" and meta["shaping"]["h1-eth0"]["rate_mbit"] == 8.0
    steps = run["events"]["trace_steps"]
    assert [s.get("error") for s in steps] == [None] * len(steps) and all(s["applied_s"] is not None for s in steps)
    per_second: dict[int, list[float]] = {}
    for s in run["path_series_mbps"]:
        per_second.setdefault(int(s.get("t0", s["t"])), []).append(s["A"])
    got = {sec: sum(v) / len(v) for sec, v in per_second.items()}
    # the receiver's interface bytes, frames whole, against the trace's rate (the series counts the same)
    assert all(abs(got[sec] - 8) <= 0.1 * 8 for sec in (2, 3, 4)), got
    assert all(abs(got[sec] - 2) <= 0.15 * 2 for sec in (5, 6, 7)), got
    assert leftovers() == []
