"""Why a recovery did not come: the window the receiver offered on the live path, read from the client's
`ss` samples. Recorded in the TCG micro-VM (kernel 6.1, 2026-11-27), lab 6 as it was then: A (10 Mbit/s,
10 ms) down from 2 s to 8 s of a 13 s upload, B (10 Mbit/s, 30 ms) a backup path. In one run B's subflow
was offered 620 kB and carried B's rate; in another it was offered its first 42 kB all along, which at
B's 67 ms RTT carries 5.1 Mbit/s, and goodput never reached 80 % of B's rate."""
import json
from pathlib import Path

import pytest

from runners.collect import event_record
from runners.linux import ss
from scenarios.spec.loader import parse_scenario

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "events"
LAB6_THEN = """\
name: lab6
topology:
  kind: dual-homed
  paths:
    - {name: A, bw: 10, delay: 10ms, queue: 100}
    - {name: B, bw: 10, delay: 30ms, queue: 100}
mptcp: {primary: A, backup: [B]}
traffic: {duration: 13, direction: upload}
events:
  - {name: a-down, at: 2s, path: A, do: down}
  - {name: a-up, at: 8s, path: A, do: up}
"""
ADDRESSES = {a: p for p, ips in (("A", ("10.0.1.1", "10.0.1.2")), ("B", ("10.0.2.1", "10.0.2.2")))
             for ip in ips for a in (ip, f"::ffff:{ip}")}
# the sampler's schedule for a 13 s run when these were recorded (runners.traffic.base.subflow_schedule): at
# 2 s, then every 2.6 s; a run with events has been sampled every 0.5 s since
SS_TIMES = (2.0, 4.6, 7.2)


def subflow_samples(name: str) -> list[dict]:
    """The samples as a run holds them (runners.traffic.base.watch_subflows), from `ss` as it was read."""
    text = (FIX / f"{name}.ss-subflows.txt").read_text()
    return [{"raw": "Netid" + part, "t": t, "subflows": ss.parse_ss_subflows("Netid" + part),
             "windows": ss.send_windows("Netid" + part)}
            for part, t in zip(text.split("Netid")[1:], SS_TIMES, strict=True)]


def applied(done_down: float, done_up: float) -> list[dict]:
    return [{"event": "a-down", "target": "path A", "action": "down", "detail": "down", "planned_s": 2.0,
             "applied_s": 2.001, "drift_ms": 1.0, "done_s": done_down},
            {"event": "a-up", "target": "path A", "action": "up", "detail": "up", "planned_s": 8.0,
             "applied_s": 8.001, "drift_ms": 1.0, "done_s": done_up}]


def build(name: str, with_ss: bool = True):
    sc = parse_scenario(LAB6_THEN)
    samples = json.loads((FIX / f"{name}.path-samples.json").read_text())
    nstat = {"client_nstat": {}, "server_nstat": {}}
    return event_record.build(sc, applied(2.0341, 8.033), samples, ["A", "B"], True, None, ADDRESSES, nstat,
                              nstat, subflow_samples(name) if with_ss else None)


def test_ss_gives_each_subflows_offered_window_and_rtt():
    first = ss.send_windows(subflow_samples("backup-window-held")[1]["raw"])
    on_b = [w for w in first if w["local"] == "10.0.2.1"]
    assert {w["snd_wnd"] for w in on_b} == {42496} and max(w["bytes_acked"] for w in on_b) == 1250529
    assert all(w["rtt_ms"] > 60 for w in on_b)


def test_a_recovery_that_the_receivers_window_held_back_says_so():
    section, metrics = build("backup-window-held")
    down = section["changes"][0]
    assert down["recovery_s"] is None and down["backup_share"] > 0.9
    limit = down["window_limited"]
    assert limit["paths"] == {"B": {"snd_wnd": 42496, "rtt_ms": pytest.approx(67.2, abs=0.6)}}
    assert limit["max_mbps"] == pytest.approx(5.1, abs=0.1) and limit["at_s"] == [4.6, 7.2]
    assert "the receiver's window held the sender below it: B's 42,496 B per 67 ms RTT" in down["no_recovery"]
    assert "window held" in metrics["no_recovery"]   # the run's own reason carries it too


def test_a_recovery_is_not_explained_without_samples_or_when_the_window_had_grown():
    section, _ = build("backup-window-held", with_ss=False)
    assert "window_limited" not in section["changes"][0] and section["changes"][0]["recovery_s"] is None
    section, _ = build("backup-window-grew")
    down = section["changes"][0]
    assert down["recovery_s"] is not None and "window_limited" not in down


def test_a_window_that_carries_the_mark_at_the_end_explains_nothing():
    held, grew = subflow_samples("backup-window-held"), subflow_samples("backup-window-grew")
    assert event_record.window_limit(held, 2.03, 8.0, ["B"], ADDRESSES, 8.0)["max_mbps"] < 8.0
    assert event_record.window_limit(grew, 2.03, 8.0, ["B"], ADDRESSES, 8.0) is None
    assert event_record.window_limit([held[1], grew[2]], 2.03, 8.0, ["B"], ADDRESSES, 8.0) is None
    assert event_record.window_limit(held, 7.5, 8.0, ["B"], ADDRESSES, 8.0) is None   # no sample after it
    assert event_record.window_limit(held, 2.03, 8.0, ["A"], ADDRESSES, 1.0) is None   # A's window was wide


def test_an_idle_subflow_with_a_small_window_explains_nothing():
    """Before the change B's data subflow had sent nothing (app_limited, Send-Q 0) with the 54 kB window
    of its join: a small window that held nothing back is no reason, whatever its size."""
    before_the_change = dict(subflow_samples("backup-window-held")[0], t=3.5)   # as if taken 1.5 s after it
    assert event_record.window_limit([before_the_change, dict(subflow_samples("backup-window-held")[2])], 2.03, 8.0,
                                     ["B"], ADDRESSES, 8.0) is None
    first = ss.send_windows(before_the_change["raw"])
    data_b = next(w for w in first if w["local"] == "10.0.2.1" and w["token"] == "79fd77d7")
    assert data_b["app_limited"] and data_b["send_q"] == 0 and data_b["snd_wnd"] == 54272


def test_only_samples_a_second_after_the_change_count_and_there_must_be_one():
    """A sample taken just after the change may find the path that takes over still idle: it is left out."""
    held = subflow_samples("backup-window-held")
    idle_just_after = dict(held[0], t=2.1)
    assert event_record.window_limit([idle_just_after, held[1], held[2]], 2.03, 8.0, ["B"], ADDRESSES,
                                     8.0)["at_s"] == [4.6, 7.2]
    assert event_record.window_limit([held[1]], 4.0, 8.0, ["B"], ADDRESSES, 8.0) is None   # 0.6 s after
    assert event_record.window_limit([held[1]], 3.5, 8.0, ["B"], ADDRESSES, 8.0)["at_s"] == [4.6]


def test_a_window_that_set_in_late_and_held_to_the_end_explains_it_from_when_it_held():
    """Lab 6 (2026-11-28, r005): B carried its full rate for 0.3 s after A went down, then was held to 42 kB
    per 66 ms to the end of the outage. A run with events is sampled every 0.5 s: the samples from the last
    one that was not held on tell it, when they last WINDOW_HELD_MIN_S (1 s) or more."""
    held, grew = subflow_samples("backup-window-held"), subflow_samples("backup-window-grew")
    not_held = dict(grew[2], t=3.5)
    late = [not_held] + [dict(held[2], t=t) for t in (4.0, 4.5, 5.0)]
    limit = event_record.window_limit(late, 2.03, 8.0, ["B"], ADDRESSES, 8.0)
    assert limit["held_from_s"] == 4.0 and limit["at_s"] == [4.0, 4.5, 5.0]
    assert limit["max_mbps"] == pytest.approx(5.1, abs=0.1)
    assert event_record.window_limit(late[:3], 2.03, 8.0, ["B"], ADDRESSES, 8.0) is None   # held 0.5 s only
    assert event_record.window_limit(late + [dict(not_held, t=5.5)], 2.03, 8.0, ["B"], ADDRESSES, 8.0) is None
    assert "held_from_s" not in event_record.window_limit(late[1:], 2.03, 8.0, ["B"], ADDRESSES, 8.0)
    # held, then not, then held to the end: the last stretch is what tells
    again = [dict(held[2], t=3.2), dict(not_held, t=3.7)] + late[1:]
    assert event_record.window_limit(again, 2.03, 8.0, ["B"], ADDRESSES, 8.0)["held_from_s"] == 4.0
    # the record's words say from when, and over how many samples
    sc = parse_scenario(LAB6_THEN)
    samples = json.loads((FIX / "backup-window-held.path-samples.json").read_text())
    nstat = {"client_nstat": {}, "server_nstat": {}}
    dense = [not_held] + [dict(held[2], t=round(4.0 + k / 2, 1)) for k in range(8)]
    section, _ = event_record.build(sc, applied(2.0341, 8.033), samples, ["A", "B"], True, None, ADDRESSES, nstat,
                                    nstat, dense)
    assert ("carry at most 5.1 Mbit/s (from 4 s on, after samples that were not held: in 8 samples from 4 to "
            "7.5 s)") in section["changes"][0]["no_recovery"]
