"""Issue 30's `events:` and `mptcp.sysctls` in the model: the timeline, every refusal with its field and
line, sweeps and variants by the event's name."""
import pytest

from scenarios.spec.loader import ScenarioError, parse_experiment, parse_scenario
from scenarios.spec.model.events import not_applied, state_at, timeline

BASE = """\
name: t
topology:
  kind: dual-homed
  paths:
    - {name: A, bw: 10, delay: 15ms}
    - {name: B, bw: 10, delay: 15ms}
traffic: {duration: 20}
events:
"""
ROUTED = """\
name: r
topology:
  kind: routed
  routers: [r1]
  links:
    - {name: L1, between: [h1, r1], bw: 10}
    - {name: L2, between: [r1, h2], bw: 10}
  paths:
    - {name: P, via: [L1, L2]}
traffic: {duration: 10}
events:
"""


def events(*lines: str, base: str = BASE) -> str:
    return base + "".join(f"  - {line}\n" for line in lines)


def problem(text: str) -> str:
    with pytest.raises(ScenarioError) as e:
        parse_scenario(text, "ev.yaml")
    return e.value.render()


def test_the_issues_example_gives_its_timeline():
    s = parse_scenario(events(
        "{name: b-backup, at: 4s, path: B, do: backup}",
        "{name: a-down, at: 5s, path: A, do: down}",
        "{name: b-slow, at: 6s, path: B, shape: {bw: 2, delay: 80ms, loss: 1}}",
        "{name: a-up, at: 9s, path: A, do: up}",
        "{name: a-hole, at: 11s, path: A, do: blackhole}",
        "{name: a-back, at: 13s, path: A, do: restore}",
        "{name: b-flap, at: 2.5s, every: 4s, until: 18s, path: B, do: [blackhole, restore], duty: 25}"))
    got = [(o.event, o.at_ms, o.action) for _, o in timeline(s.events)]
    assert got[:5] == [("b-flap", 2500, "blackhole"), ("b-flap", 3500, "restore"), ("b-backup", 4000, "backup"),
                       ("a-down", 5000, "down"), ("b-slow", 6000, None)]
    flap = [o.at_ms for o in s.events[6].occurrences()]
    # cycles start every 4 s, the restore 25 % into each; the cycle at 18.5 s would end after `until`
    assert flap == [2500, 3500, 6500, 7500, 10500, 11500, 14500, 15500]
    assert s.events[2].shape.changes() == {"bw": 2.0, "delay": 80.0, "loss": 1.0}


def test_the_state_of_each_target_at_a_time():
    s = parse_scenario(events("{name: a-down, at: 5s, path: A, do: down}", "{name: a-up, at: 9s, path: A, do: up}",
                              "{name: b-flap, at: 2s, every: 4s, until: 18s, path: B, do: [blackhole, restore]}"))
    assert state_at(s.events, [], 1000) == {}
    at_5 = state_at(s.events, [], 5000)
    assert at_5[("path", "A")]["down"] and not at_5[("path", "B")]["blackholed"]   # B: blackholed 2-4 s
    at_6 = state_at(s.events, [], 6000)
    assert at_6[("path", "A")]["down"] and at_6[("path", "B")]["blackholed"]
    assert not state_at(s.events, [], 9000)[("path", "A")]["down"]


def test_link_events_in_a_routed_topology():
    s = parse_scenario(events("{name: l-down, at: 1s, link: L2, do: down}", "{name: l-up, at: 2s, link: L2, do: up}",
                              "{name: l-slow, at: 3s, link: L1, shape: {bw: 1}}", base=ROUTED))
    assert [e.target for e in s.events] == [("link", "L2"), ("link", "L2"), ("link", "L1")]


@pytest.mark.parametrize("lines,expected", [
    (["{name: a, at: 5s, path: Z, do: down}"], "events[0].path (line 9): no path named 'Z' (paths: A, B)"),
    (["{name: a, at: 5s, link: L1, do: down}"], "events[0].link (line 9): a dual-homed topology has no named links"),
    (["{name: a, at: 20s, path: A, do: down}"], "events[0].at (line 9): the event at 20s is not within the run's "
                                                "traffic (traffic.duration: 20s)"),
    (["{name: a, at: 2s, every: 4s, until: 21s, path: A, do: [down, up]}"], "events[0].until (line 9): the flap's"),
    (["{name: a, at: 5s, path: A, do: up}"], "events[0].do (line 9): up at 5s, but path A is not down then"),
    (["{name: a, at: 5s, path: A, do: down}", "{name: b, at: 6s, path: A, do: down}"],
     "events[1].do (line 10): down at 6s, but path A is already down then"),
    (["{name: a, at: 5s, path: A, do: restore}"], "events[0].do (line 9): restore at 5s, but path A is not blackholed"),
    (["{name: a, at: 5s, path: A, do: blackhole}", "{name: b, at: 6s, path: A, do: restore}",
      "{name: c, at: 7s, path: A, do: restore}"], "events[2].do (line 11): restore at 7s, but path A is not blackholed"),
    (["{name: a, at: 5s, path: A, do: nobackup}"], "events[0].do (line 9): nobackup at 5s, but path A is not a backup"),
    (["{name: a, at: 5s, path: A, do: down}", "{name: b, at: 5s, path: A, shape: {bw: 1}}"],
     "events[1].at (line 10): path A has two events at 5s (a, b); their order would be undefined"),
    (["{name: a, at: 5s, path: A, do: down}", "{name: a, at: 6s, path: B, do: down}"],
     "events[1].name (line 10): event name 'a' is used twice (first: events[0])"),
    (["{name: a, at: 5s, path: A}"], "events[0].do (line 9): give one action"),
    (["{name: a, at: 5s, do: down}"], "events[0].path (line 9): give one target"),
    (["{name: a, at: 5s, path: A, link: X, do: down}"], "events[0].path (line 9): give one target"),
    (["{name: a, at: 5s, path: A, do: [down, up]}"], "events[0].do (line 9): two actions only with `every`"),
    (["{name: a, at: 5s, path: A, do: reboot}"], "events[0].do (line 9): must be 'down', 'up'"),
    (["{name: a, at: 5, path: A, do: down}"], "events[0].at (line 9): needs a unit"),
    (["{name: a, at: 5s, path: A, shape: {}}"], "events[0].shape (line 9): give at least one of bw"),
    (["{name: a, at: 5s, path: A, shape: {bw: 0}}"], "events[0].shape.bw (line 9): must be greater than 0"),
    (["{name: a, at: 5s, path: A, shape: {delay: 5}}"], "events[0].shape.delay (line 9): needs a unit"),
    (["{name: a, at: 5s, every: 4s, path: A, do: [down, up]}"], "events[0].every (line 9): a flap needs `until`"),
    (["{name: a, at: 5s, every: 4s, until: 6s, path: A, do: [down, up]}"], "not one cycle fits"),
    (["{name: a, at: 5s, every: 4s, until: 19s, path: A, do: [down, up], duty: 100}"],
     "events[0].duty (line 9): must be less than 100"),
])
def test_bad_events_name_the_file_the_field_and_the_line(lines, expected):
    msg = problem(events(*lines))
    assert msg.startswith("ev.yaml:") and expected in msg, msg


def test_bad_link_events():
    assert "events[0].link (line 12): no link named 'L9' (links: L1, L2)" in problem(
        events("{name: a, at: 1s, link: L9, do: down}", base=ROUTED))
    assert "events[0].shape (line 12): in a routed topology the links are shaped" in problem(
        events("{name: a, at: 1s, path: P, shape: {bw: 1}}", base=ROUTED))
    assert "events[0].do (line 12): backup acts on a path's MPTCP endpoint" in problem(
        events("{name: a, at: 1s, link: L1, do: backup}", base=ROUTED))


def test_a_traced_path_takes_no_shape_or_blackhole_event():
    """A trace's next step would set the shaping anew: the event would be undone within a step."""
    from pathlib import Path
    step = Path(__file__).resolve().parents[2] / "scenarios" / "traces" / "step.trace"
    traced = BASE.replace("{name: A, bw: 10, delay: 15ms}", f"{{name: A, bw: 10, delay: 15ms, trace: {{to_server: {step}}}}}")
    assert "events[0].do (line 9): path 'A' follows a trace" in problem(events("{name: a, at: 5s, path: A, do: blackhole}", base=traced))
    assert "events[0].shape (line 9): path 'A' follows a trace" in problem(events("{name: a, at: 5s, path: A, shape: {delay: 5ms}}", base=traced))
    assert "follows a trace" in problem(events("{name: a, at: 5s, every: 4s, until: 19s, path: A, do: [blackhole, restore]}", base=traced))
    # in a routed topology a path's events act on its ends: the client's and the server's links
    routed = ROUTED.replace("{name: L1, between: [h1, r1], bw: 10}",
                            f"{{name: L1, between: [h1, r1], bw: 10, trace: {{to_server: {step}}}}}")
    assert "events[0].do (line 12): path 'P' follows a trace" in problem(
        events("{name: a, at: 5s, path: P, do: blackhole}", base=routed))
    assert "events[0].shape (line 12): link 'L1' follows a trace" in problem(
        events("{name: a, at: 5s, link: L1, shape: {bw: 2}}", base=routed))
    ok = parse_scenario(events("{name: a, at: 5s, path: A, do: down}", "{name: b, at: 6s, path: A, do: up}",
                               "{name: c, at: 7s, path: B, do: blackhole}", base=traced), "ev.yaml")
    assert [e.name for e in ok.events] == ["a", "b", "c"]


def test_a_backup_path_starts_as_one():
    text = events("{name: a, at: 5s, path: B, do: nobackup}", "{name: b, at: 6s, path: B, do: backup}")
    assert "nobackup at 5s, but path B is not a backup path" in problem(text)
    assert len(parse_scenario(text.replace("traffic:", "mptcp: {backup: [B]}\ntraffic:")).events) == 2


def test_a_fixed_size_transfer_takes_any_time_and_reports_what_it_would_miss():
    text = events("{name: a, at: 5s, path: A, do: down}", "{name: b, at: 50s, path: A, do: up}")
    s = parse_scenario(text.replace("traffic: {duration: 20}", "traffic: {bytes: 10MB}"))
    assert [o.event for o in not_applied(s.events, transfer_s=12.0)] == ["b"]
    assert not_applied(s.events, transfer_s=60.0) == []


def test_sweeps_and_variants_address_events_by_name():
    text = events("{name: a-down, at: 5s, path: A, do: down}", "{name: b-slow, at: 6s, path: B, shape: {bw: 2}}") + \
        "sweep: {events.a-down.at: [3s, 7s], events.b-slow.shape.bw: [1]}\n" \
        "variants:\n  - {name: plain}\n" \
        "  - {name: more, set: {events.a-up: {at: 9s, path: A, do: up}, events.b-slow: {at: 8s, path: B, shape: {delay: 50ms}}}}\n"
    points = parse_experiment(text, "ev.yaml").points
    assert [(p.params["variant"], [(e.name, e.at) for e in p.scenario.events]) for p in points] == [
        ("plain", [("a-down", 3000), ("b-slow", 6000)]), ("plain", [("a-down", 7000), ("b-slow", 6000)]),
        ("more", [("a-down", 3000), ("b-slow", 8000), ("a-up", 9000)]),
        ("more", [("a-down", 7000), ("b-slow", 8000), ("a-up", 9000)])]
    assert points[0].scenario.events[1].shape.bw == 1.0
    assert points[2].scenario.events[1].shape.changes() == {"bw": 1.0, "delay": 50.0}   # the sweep sets bw in it
    with pytest.raises(ScenarioError, match="'events.nope.at': no event named 'nope'"):
        parse_experiment(text.replace("events.a-down.at", "events.nope.at"), "ev.yaml")
    # a swept time that puts the down on the up is refused at that point, as any bad sweep value is
    msg = str(pytest.raises(ScenarioError, parse_experiment, text.replace("[3s, 7s]", "[9s]"), "ev.yaml").value)
    assert "sweep point variant=more, events.a-down.at=9s" in msg and "two events at 9s (a-down, a-up)" in msg


def test_mptcp_sysctls():
    s = parse_scenario(BASE.replace("events:\n", "mptcp: {sysctls: {stale_loss_cnt: 2, close_timeout: 10s, "
                                                 "blackhole_timeout: 0s, checksum_enabled: true}}\n"))
    assert s.mptcp.sysctls.values() == {"blackhole_timeout": "0", "checksum_enabled": "1", "close_timeout": "10",
                                        "stale_loss_cnt": "2"}
    assert parse_scenario(BASE.replace("events:\n", "")).mptcp.sysctls.values() == {}


@pytest.mark.parametrize("sysctls,expected", [
    ("{add_addr_timeout: 2s}", "mptcp.sysctls.add_addr_timeout (line 9): net.mptcp.add_addr_timeout has its own "
                               "field: use mptcp.add_addr_timeout"),
    ("{scheduler: burst}", "mptcp.sysctls.scheduler (line 9): net.mptcp.scheduler has its own field: use mptcp.scheduler"),
    ("{pm_type: 1}", "mptcp.sysctls.pm_type (line 9): net.mptcp.pm_type is set by the testbed"),
    ("{stale_los_cnt: 2}", "mptcp.sysctls.stale_los_cnt (line 9): unknown key"),
    ("{close_timeout: 10}", "mptcp.sysctls.close_timeout (line 9): needs a unit"),
    ("{close_timeout: 1500ms}", "mptcp.sysctls.close_timeout (line 9): must be whole seconds"),
    ("{stale_loss_cnt: 0}", "mptcp.sysctls.stale_loss_cnt (line 9): must be at least 1"),
])
def test_bad_mptcp_sysctls(sysctls, expected):
    msg = problem(BASE.replace("events:\n", f"mptcp:\n  sysctls: {sysctls}\n"))
    assert expected in msg, msg


def test_the_docs_failover_example_loads_and_its_error_is_the_one_shown():
    """docs/scenario-format.md's failover scenario is valid, and with a-down moved after a-up it gives the
    error the page shows."""
    import re
    from pathlib import Path
    doc = (Path(__file__).resolve().parents[2] / "docs" / "scenario-format.md").read_text()
    block = re.search(r"```yaml\n(name: failover\n.*?)```", doc, re.S).group(1)
    s = parse_scenario(block, "failover.yaml")
    assert [(e.name, e.at) for e in s.events] == [("a-down", 5000), ("a-up", 12000)]
    assert s.mptcp.sysctls.values() == {"stale_loss_cnt": "2"}
    shown = re.search(r"\$ run-scenario --check failover.yaml\n(.*)\n", doc).group(1)
    moved = block.replace("name: a-down, at: 5s", "name: a-down, at: 13s")
    assert problem(moved).replace("ev.yaml", "failover.yaml") == shown
