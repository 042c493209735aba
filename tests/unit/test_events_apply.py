"""Applying events (issue 30): the commands planned for each change, what puts the network back, the
capacity a recovery is measured against, the MPTCP monitor's summary and a run's event metrics, on
recorded samples of a real failover run (TCG micro-VM, kernel 6.1, 2026-11-25)."""
import json
from pathlib import Path

import pytest

from scenarios.spec.loader import parse_scenario
from topologies.events import plan_changes, restore_commands, up_argvs
from topologies.kinds import plan
from topologies.plan import shaping_argvs

from runners.collect import event_record, mptcp_monitor
from runners.pipeline.events import batch_tool, endpoint_line
from runners.pipeline.mptcp_config import mptcp_argvs, sysctls

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "events"
DUAL = """\
name: t
topology:
  kind: dual-homed
  paths:
    - {name: A, bw: 10, delay: 20ms}
    - {name: B, bw: 10, delay: 20ms}
traffic: {duration: 20}
events:
%s
"""
ROUTED = """\
name: r
topology:
  kind: routed
  family: dual
  routers: [r1, r2]
  links:
    - {name: access, between: [h1, r1], bw: 5, delay: 5ms}
    - {name: v4core, between: [r1, r2], bw: 100, delay: 20ms}
    - {name: v6core, between: [r1, r2], bw: 100, delay: 30ms}
    - {name: egress, between: [r2, h2], bw: 100, delay: 1ms}
  paths:
    - {name: v4, via: [access, v4core, egress], family: ipv4}
    - {name: v6, via: [access, v6core, egress], family: ipv6}
traffic: {duration: 20}
events:
%s
"""


def scenario(text, events):
    return parse_scenario(text % "\n".join(f"  - {e}" for e in events))


def changes(sc, primary="A"):
    return plan_changes(sc, plan(sc), primary)


def argvs(change, node):
    return [list(a) for nc in change.commands if nc.node == node for a in nc.argvs]


def test_down_and_up_act_at_both_ends_and_up_gives_back_the_routes():
    sc = scenario(DUAL, ["{name: a-down, at: 5s, path: A, do: down}", "{name: a-up, at: 9s, path: A, do: up}"])
    down, up = changes(sc)
    assert (down.at_ms, up.at_ms) == (5000, 9000)
    assert argvs(down, "h1") == [["ip", "link", "set", "dev", "h1-eth0", "down"]]
    assert argvs(down, "h2") == [["ip", "link", "set", "dev", "h2-eth0", "down"]]
    # the link's down flushed the client's per-path default route (table 100): up puts it back
    assert argvs(up, "h1") == [["ip", "addr", "replace", "10.0.1.1/24", "dev", "h1-eth0"],
                               ["ip", "link", "set", "dev", "h1-eth0", "up"],
                               ["ip", "route", "replace", "default", "dev", "h1-eth0", "table", "100"]]


def test_a_routed_link_up_gives_back_both_families_routes_through_it():
    sc = scenario(ROUTED, ["{name: core-down, at: 5s, link: v6core, do: down}",
                           "{name: core-up, at: 8s, link: v6core, do: up}"])
    _, up = changes(sc, "v4")
    r1 = argvs(up, "r1")
    assert r1[0][:3] == ["ip", "addr", "replace"] and any(a[-1] == "nodad" for a in r1)   # IPv6 needs its address back
    routes = [a for a in r1 if "route" in a]
    assert routes and all(a[a.index("dev") + 1] == "r1-eth2" and "add" not in a for a in routes), r1
    # one `ip -batch` line each: no family option (a batch line cannot carry one), so no process per command
    assert all(batch_tool(nc.argvs) == "ip" for nc in up.commands), up.commands
    sc = scenario(ROUTED, ["{name: d, at: 5s, link: v4core, do: down}",
                                                                   "{name: u, at: 8s, link: v4core, do: up}"])
    _, up = changes(sc, "v4")
    assert ["ip", "route", "replace", "10.1.4.0/24", "via", "10.1.2.2", "dev", "r1-eth1"] in argvs(up, "r1")


def tbf(dev: str, rate: str, burst: int = 3200) -> list[str]:
    return ["tc", "qdisc", "change", "dev", dev, "root", "handle", "1:", "tbf", "rate", rate, "burst", str(burst),
            "limit", "3000"]


def netem(dev: str, *args: str) -> list[str]:
    return ["tc", "qdisc", "change", "dev", dev, "parent", "1:1", "handle", "10:", "netem", *args]


def test_a_shape_change_keeps_what_it_does_not_name_and_recomputes_the_limit():
    sc = scenario(DUAL, ["{name: b-slow, at: 6s, path: B, shape: {bw: 2, delay: 80ms}}",
                         "{name: b-lossy, at: 8s, path: B, shape: {loss: 1}}"])
    slow, lossy = changes(sc)
    # B's rate changes during the run: it is a TBF's, changed at dequeue; delay, loss and limit netem's
    assert argvs(slow, "h1") == [tbf("h1-eth1", "2000kbit"),
                                 netem("h1-eth1", "delay", "80ms", "limit", "114")]   # 100 + the 2 Mbit/s x 80 ms BDP (14 packets)
    # a loss-only change keeps the earlier rate and delay (minitopo's netem change reset the delay to 0)
    assert argvs(lossy, "h2") == [tbf("h2-eth1", "2000kbit"), netem("h2-eth1", "delay", "80ms", "loss", "1%", "limit", "114")]
    back = restore_commands(sc, plan(sc), [slow, lossy])
    assert sorted(list(a) for nc in back for a in nc.argvs) == sorted(
        [tbf(f"{h}-eth1", "10000kbit", 6250) for h in ("h1", "h2")]
        + [netem(f"{h}-eth1", "delay", "20ms", "limit", "117") for h in ("h1", "h2")])


def test_only_a_path_whose_rate_changes_takes_it_at_dequeue():
    sc = scenario(DUAL, ["{name: b-slow, at: 6s, path: B, shape: {bw: 2}}",
                         "{name: a-late, at: 7s, path: A, shape: {delay: 50ms}}"])
    p = plan(sc)
    assert {i.link: i.shaping.rate_at_dequeue for i in p.interfaces} == {"A": False, "B": True}
    assert p.path("B").shaping.rate_at_dequeue and not p.path("A").shaping.rate_at_dequeue
    a_late = changes(sc)[1]
    assert argvs(a_late, "h1") == [["tc", "qdisc", "change", "dev", "h1-eth0", "root", "netem", "rate", "10000kbit",
                                    "delay", "50ms", "limit", "142"]]
    # as built: a TBF at the root with netem in its class, each replaced in one batch
    b = p.interface("h1-eth1").shaping
    assert shaping_argvs("h1-eth1", b) == [
        ["tc", "qdisc", "replace", "dev", "h1-eth1", "root", "handle", "1:", "tbf", "rate", "10000kbit", "burst",
         "6250", "limit", "3000"],
        ["tc", "qdisc", "replace", "dev", "h1-eth1", "parent", "1:1", "handle", "10:", "netem", "delay", "20ms",
         "limit", "117"]]
    assert plan(scenario(DUAL, ["{name: b-hole, at: 6s, path: B, do: blackhole}"])).interface(
        "h1-eth1").shaping.rate_at_dequeue is False


def test_a_blackhole_loses_everything_at_both_egresses_and_keeps_the_rest_of_the_netem():
    sc = scenario(DUAL, ["{name: b-slow, at: 4s, path: B, shape: {bw: 2}}",
                         "{name: b-hole, at: 5s, path: B, do: blackhole}",
                         "{name: b-faster, at: 6s, path: B, shape: {bw: 5}}",
                         "{name: b-back, at: 7s, path: B, do: restore}"])
    _, hole, faster, back = changes(sc)
    # netem drops silently; the receiver's interface never counts what was lost (an nft ingress drop did)
    assert argvs(hole, "h1") == [tbf("h1-eth1", "2000kbit"), netem("h1-eth1", "delay", "20ms", "loss", "100%", "limit", "104")]
    # a shape change while blackholed is kept for the restore, and the path stays lost meanwhile
    assert argvs(faster, "h2")[1][-4:] == ["loss", "100%", "limit", "109"] and faster.shaping["h2-eth1"].loss_pct == 100
    assert argvs(back, "h2") == [tbf("h2-eth1", "5000kbit"), netem("h2-eth1", "delay", "20ms", "limit", "109")]
    # a run that ends with the path still blackholed gets its configured netem back before the next one
    back = restore_commands(sc, plan(sc), [hole])
    assert {nc.node: [list(a) for a in nc.argvs] for nc in back} == {
        h: [tbf(f"{h}-eth1", "10000kbit", 6250), netem(f"{h}-eth1", "delay", "20ms", "limit", "117")] for h in ("h1", "h2")}


SWITCHED = """\
name: w
topology:
  kind: switched
  server: h1
  clients: [h2]
  switches:
    - {name: s1, type: bridge}
  links:
    - {name: h1a, between: [h1, s1]}
    - {name: h1b, between: [h1, s1]}
    - {name: h2a, between: [h2, s1], bw: 10, delay: 5ms}
    - {name: h2b, between: [h2, s1], bw: 10, delay: 5ms}
  paths:
    - {name: A, client_if: 0, server_if: 0}
    - {name: B, client_if: 1, server_if: 1}
traffic: {duration: 20}
events:
%s
"""


def test_a_blackhole_on_an_end_without_netem_adds_one_and_restore_removes_it():
    sw = scenario(SWITCHED, ["{name: a-hole, at: 5s, path: A, do: blackhole}",
                             "{name: a-back, at: 6s, path: A, do: restore}"])
    hole, back = plan_changes(sw, plan(sw), "A")
    server_if = plan(sw).path("A").server_if        # h1's link to the switch has no bw: no netem
    assert argvs(hole, "h1") == [["tc", "qdisc", "replace", "dev", server_if, "root", "netem", "loss", "100%"]]
    assert argvs(back, "h1") == [["tc", "qdisc", "del", "dev", server_if, "root"]]
    assert argvs(hole, "h2")[0][:3] == ["tc", "qdisc", "change"]    # the client's end is shaped


def test_restore_puts_back_only_what_is_still_changed():
    sc = scenario(DUAL, ["{name: a-down, at: 5s, path: A, do: down}", "{name: a-up, at: 9s, path: A, do: up}"])
    assert restore_commands(sc, plan(sc), changes(sc)) == []
    assert restore_commands(sc, plan(sc), changes(sc)[:1])[0].argvs[1] == ("ip", "link", "set", "dev", "h1-eth0", "up")


TWO_SWITCHES = """\
name: s
topology:
  kind: switched
  switches: [{name: s1, type: ovs}, {name: s2, type: ovs}]
  links:
    - {name: access, between: [h1, s1]}
    - {name: wan, between: [s1, s2], bw: 10, delay: 5ms}
    - {name: dc, between: [s2, h2]}
  paths: [{name: main}]
traffic: {duration: 20}
events:
%s
"""


def test_a_link_between_switches_is_shaped_and_blackholed_on_the_switches_ports():
    """Switch ports live in the root namespace (Mininet's switches are not in one of their own)."""
    sc = scenario(TWO_SWITCHES, ["{name: wan-slow, at: 4s, link: wan, shape: {bw: 4}}",
                             "{name: wan-hole, at: 6s, link: wan, do: blackhole}",
                             "{name: wan-back, at: 8s, link: wan, do: restore}"])
    slow, hole, back = changes(sc, "main")
    # 100 + 4 Mbit/s x 5 ms (2,500 bytes: 2 packets)
    assert argvs(slow, "s1") == [tbf("s1-eth2", "4000kbit"), netem("s1-eth2", "delay", "5ms", "limit", "102")]
    assert argvs(slow, "s2") == [tbf("s2-eth1", "4000kbit"), netem("s2-eth1", "delay", "5ms", "limit", "102")]
    assert all("loss" in a and "100%" in a for nc in hole.commands for a in nc.argvs if "netem" in a), hole.commands
    assert [a for nc in back.commands for a in nc.argvs if "100%" in a] == []
    # an unshaped link's blackhole gives both ends a netem of their own, and restore takes it away
    sc = scenario(TWO_SWITCHES, ["{name: dc-hole, at: 6s, link: dc, do: blackhole}"])
    (dc,) = changes(sc, "main")
    assert {nc.node for nc in dc.commands} == {"s2", "h2"}


def test_backup_marks_the_clients_address_and_the_client_gets_an_endpoint_for_it():
    sc = scenario(DUAL, ["{name: b-backup, at: 4s, path: B, do: backup}"])
    (bk,) = changes(sc)
    assert argvs(bk, "h1") == [["ip", "mptcp", "endpoint", "change", "10.0.2.1", "backup"]]
    client = mptcp_argvs(sc, plan(sc), "A").client
    assert ["ip", "mptcp", "endpoint", "add", "10.0.2.1", "dev", "h1-eth1"] in client


def test_endpoint_removal_names_the_endpoint_the_path_joins_by():
    sc = scenario(DUAL, ["{name: b-rm, at: 4s, path: B, do: endpoint-remove}",
                         "{name: a-rm, at: 6s, path: A, do: endpoint-remove}"])
    b_rm, a_rm = changes(sc)
    assert [(nc.node, nc.endpoint) for nc in b_rm.commands] == [("h2", ("endpoint-remove", "10.0.2.2"))]   # signal
    assert [(nc.node, nc.endpoint) for nc in a_rm.commands] == [("h1", ("endpoint-remove", "10.0.1.1"))]   # id 0
    shown = "10.0.2.2 id 1 signal dev h2-eth1 \n10.0.3.2 port 5202 id 2 signal dev h2-eth0 \n"
    assert endpoint_line(shown, "10.0.2.2") == ("1", ["10.0.2.2", "id", "1", "signal", "dev", "h2-eth1"])
    assert endpoint_line(shown, "10.0.1.1") is None


def test_mptcp_sysctls_are_written_in_the_hosts_namespaces():
    sc = parse_scenario(DUAL.replace("events:\n%s\n", "mptcp: {sysctls: {stale_loss_cnt: 2, close_timeout: 10s}}\n"))
    got = dict(sysctls(sc, True))
    assert got["net.mptcp.stale_loss_cnt"] == "2" and got["net.mptcp.close_timeout"] == "10"
    # a later point without them puts the kernel's defaults back
    plain = parse_scenario(DUAL.replace("events:\n%s\n", ""))
    again = dict(sysctls(plain, True, set_before={"net.mptcp.stale_loss_cnt"}))
    assert again["net.mptcp.stale_loss_cnt"] == "4"


def test_capacity_after_a_change_counts_live_paths_and_backups_only_when_alone():
    sc = scenario(DUAL, ["{name: a-down, at: 5s, path: A, do: down}", "{name: b-slow, at: 6s, path: B, shape: {bw: 2}}",
                         "{name: a-up, at: 9s, path: A, do: up}"]).model_copy()
    assert event_record.capacity_after(sc, ["A", "B"], True, 5000) == (10.0, ())
    assert event_record.capacity_after(sc, ["A", "B"], True, 6000) == (2.0, ())
    assert event_record.capacity_after(sc, ["A", "B"], True, 9000) == (12.0, ())
    assert event_record.capacity_after(sc, ["A"], False, 5000) == (0.0, ())
    bk = parse_scenario((DUAL % "  - {name: a-down, at: 5s, path: A, do: down}").replace(
        "traffic:", "mptcp: {backup: [B]}\ntraffic:"))
    assert event_record.capacity_after(bk, ["A", "B"], True, 0) == (10.0, ("B",))     # A alone: B waits
    assert event_record.capacity_after(bk, ["A", "B"], True, 5000) == (10.0, ("B",))  # B takes over
    routed = scenario(ROUTED, ["{name: core-down, at: 5s, link: v6core, do: down}"])
    assert event_record.capacity_after(routed, ["v4", "v6"], True, 5000)[0] == 5.0   # v4's slowest link


def test_the_mptcp_monitor_summary_names_paths_and_times_from_the_event():
    lines = {"h1": [], "h2": []}
    for line in (FIX / "failover-mptcp-A.mptcp-monitor.txt").read_text().splitlines():
        t, node, text = line.split(" ", 2)
        lines[node].append((float(t), text))
    addresses = {a: p for p, ips in (("A", ("10.0.1.1", "10.0.1.2")), ("B", ("10.0.2.1", "10.0.2.2")))
                 for ip in ips for a in (ip, f"::ffff:{ip}")}
    assert mptcp_monitor.after_event(lines, 0.0, 0.6, addresses) == {
        "h1": {"ANNOUNCED B": 0.5049, "SF_ESTABLISHED B": 0.5548}, "h2": {"SF_ESTABLISHED B": 0.5763}}
    assert mptcp_monitor.parse_line("[       CREATED] token=ff537111 remid=0 sport=1") == {
        "type": "CREATED", "token": "ff537111", "remid": "0", "sport": "1"}
    assert mptcp_monitor.parse_line("not a monitor line") is None


def _nstat():
    return {"client_nstat": {"MPTcpExtSubflowStale": 3}, "server_nstat": {}}


def test_a_recorded_failover_gives_its_stall_and_recovery_and_tcp_none():
    """MPTCP: A went down at 5.0 s; B carried on after a ~1 s hiccup. Packets in flight on A kept arriving
    for 0.5 s: that tail is no recovery. TCP on A: no live path, no recovery, reported as such."""
    sc = scenario(DUAL, ["{name: a-down, at: 5s, path: A, do: down}"])
    applied = [{"event": "a-down", "target": "path A", "action": "down", "detail": "down", "planned_s": 5.0,
                "applied_s": 5.0025, "drift_ms": 2.5, "took_ms": 440.0}]
    samples = json.loads((FIX / "failover-mptcp-A.path-samples.json").read_text())
    section, metrics = event_record.build(sc, applied, samples, ["A", "B"], True, None, {}, _nstat(), _nstat())
    change = section["changes"][0]
    assert change["capacity_mbps"] == 10.0
    assert 2.0 < change["recovery_s"] < 2.3 and 0.4 < change["stall_s"] < 1.1, change
    assert metrics["recovery_s"] == change["recovery_s"] and metrics["event_drift_max_ms"] == 2.5
    assert metrics["events_late"] == 0 and section["mib"]["client"]["MPTcpExtSubflowStale"] == 0
    tcp = json.loads((FIX / "failover-tcp-A.path-samples.json").read_text())
    section, metrics = event_record.build(sc, applied, tcp, ["A"], False, None, {}, _nstat(), _nstat())
    assert metrics["recovery_s"] is None and "no path is live after the event" in metrics["no_recovery"]
    assert section["changes"][0]["stall_open"] and section["changes"][0]["stall_s"] == pytest.approx(14.4, abs=0.3)   # A's tail arrived until 5.6 s


def test_late_changes_are_counted_and_unapplied_ones_have_no_metrics():
    sc = scenario(DUAL, ["{name: a-down, at: 5s, path: A, do: down}"])
    applied = [{"event": "a-down", "planned_s": 5.0, "applied_s": 5.25, "drift_ms": 250.0, "took_ms": 3.0,
                "target": "path A", "action": "down", "detail": "down"}]
    samples = json.loads((FIX / "failover-mptcp-A.path-samples.json").read_text())
    assert event_record.build(sc, applied, samples, ["A", "B"], True, None, {}, _nstat(), _nstat())[1]["events_late"] == 1
    skipped = [{"event": "a-down", "action": "down", "planned_s": 5.0, "applied_s": None,
                "not_applied": "the traffic had ended"}]
    section, metrics = event_record.build(sc, skipped, samples, ["A", "B"], True, None, {}, _nstat(), _nstat())
    assert metrics["recovery_s"] is None and metrics["event_drift_max_ms"] is None and "recovery_s" not in section["changes"][0]


def test_up_of_an_interface_the_plan_does_not_know_is_just_the_link():
    sc = scenario(DUAL, ["{name: a-down, at: 5s, path: A, do: down}"])
    assert up_argvs(plan(sc), "h9", "x0") == [["ip", "link", "set", "dev", "x0", "up"]]


def test_the_report_has_an_events_table_with_recovery_and_bytes_after():
    from pathlib import Path as P

    from runners.analysis.page import render_html, render_markdown
    run = {"id": "r001-mptcp-A", "mode": "mptcp", "primary": "A", "status": "ok", "point_label": "base",
           "metrics": {"throughput_mbps": 7.68, "seconds": 8.1, "subflows": 2},
           "events": {"changes": [
               {"event": "a-down", "target": "path A", "action": "down", "detail": "down", "planned_s": 2.0,
                "applied_s": 2.001, "drift_ms": 1.2, "took_ms": 22.0, "stall_s": 0.43, "recovery_s": 2.11,
                "bytes_after": {"A": 52990, "B": 1709890}, "backup_share": 0.97,
                "mptcp_events": {"h1": {"SF_CLOSED A": 1.5}}},
               {"event": "b-rm", "action": "endpoint-remove", "detail": "endpoint-remove", "planned_s": 6.0,
                "applied_s": None, "not_applied": "the traffic had ended (5.00 s)"}]}}
    doc = {"metadata": {"scenario": "t"}, "runs": [run]}
    md = render_markdown(P("/tmp/x"), doc, "name: t\n", [], [])
    assert ("| r001-mptcp-A | a-down | path A down | 2 | 2.001 | 1.2 | 22 | 0.43 | 2.11 | "
            "A 0.05 MB, B 1.71 MB; backup 97% | h1: SF_CLOSED A +1.50 |") in md
    assert "| r001-mptcp-A | b-rm | endpoint-remove | 6 | not applied |" in md and "the traffic had ended" in md
    page = render_html(P("/tmp/x"), doc, "name: t\n", [], [])
    assert "<h2>Events</h2>" in page and "A 0.05 MB, B 1.71 MB; backup 97%" in page
