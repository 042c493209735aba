"""Rate traces (issue 30): Mahimahi's format read strictly, rate steps, the shipped traces and their
generator, and a scenario's `trace:` checked with the file, the field and the lines."""
import os
from pathlib import Path

import pytest

from scenarios.spec.loader import ScenarioError, load_experiment, parse_experiment
from scenarios.spec.traces import MAX_TRACE_BYTES, TraceError, load_trace, parse_trace, rate_steps
from scenarios.traces import gen

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "scenarios" / "traces"


@pytest.mark.parametrize("text,line,words", [
    ("", None, "is empty"),
    ("\n", 1, "is empty; each line is one timestamp"),
    ("1\n\n2\n", 2, "is empty; each line is one timestamp"),
    ("1\n3\n2\n", 3, "2 is before the line above (3)"),
    ("1\nten\n", 2, "'ten' is not a whole number of milliseconds"),
    ("1\n-2\n", 2, "'-2' is not a whole number"),
    ("1.5\n", 1, "'1.5' is not a whole number"),
    ("# a comment\n1\n", 1, "is not a whole number"),
    ("0\n0\n", 2, "lasts 0 ms"),
])
def test_bad_trace_text_names_the_line(text, line, words):
    with pytest.raises(TraceError) as e:
        parse_trace(text)
    assert e.value.line == line and words in str(e.value), (e.value.line, str(e.value))


def test_good_trace_and_its_rate_steps():
    t = parse_trace("0\n0\n1\n2\r\n4")          # no final newline, a CRLF line: both fine
    assert t.opportunities_ms == (0, 0, 1, 2, 4) and t.length_ms == 4
    # looped, each cycle is shifted by the length (as mm-link does): 3, 1, 3+1, 1, 3+1 per 2 ms
    assert rate_steps(t, 2, 10) == [18.0, 6.0, 24.0, 6.0, 24.0]
    assert rate_steps(t, 2, 10, once=True) == [18.0, 6.0, 6.0, 0.0, 0.0]
    # a last step shorter than the others is a rate over its own length
    assert rate_steps(t, 3, 4) == [pytest.approx(4 * 12 / 3), 0.0]


def test_a_constant_trace_gives_its_rate():
    twelve_mbit = "".join(f"{ms}\n" for ms in range(1, 1001))   # one packet per ms: 12 Mbit/s
    steps = rate_steps(parse_trace(twelve_mbit), 100, 2500)
    # the first cycle has no opportunity at 0 ms; each later one's is the previous cycle's last line
    assert steps[0] == pytest.approx(99 * 12 / 100) and steps[1:] == [pytest.approx(12.0)] * 24


def test_trace_files_follow_the_scenario_files_rules(tmp_path):
    os.mkfifo(tmp_path / "fifo.trace")
    (tmp_path / "big.trace").write_text("1\n" * (MAX_TRACE_BYTES // 2 + 1))
    (tmp_path / "bin.trace").write_bytes(b"1\n\xff\n")
    cases = {"fifo.trace": "is not a regular file", "big.trace": f"a trace file may be at most {MAX_TRACE_BYTES}",
             "bin.trace": "is not text", "nope.trace": "no such file", ".": "is a directory"}
    for name, words in cases.items():
        with pytest.raises(TraceError, match=words):
            load_trace(tmp_path / name)
    with pytest.raises(TraceError, match="is not a regular file"):
        load_trace(Path("/dev/zero"))


SCENARIO = """\
name: t
topology:
  kind: dual-homed
  paths:
    - {name: A, bw: 8, trace: {to_server: TRACE, step: 100ms}}
    - {name: B, bw: 10}
"""


def test_a_scenario_with_a_shipped_trace_loads_it(tmp_path):
    (tmp_path / "s.yaml").write_text(SCENARIO.replace("TRACE", str(SHIPPED / "fade.trace")))
    exp = load_experiment(tmp_path / "s.yaml")
    spec = exp.scenario.topology.paths[0].trace
    assert (spec.to_server, spec.to_client, spec.once, spec.step) == (str(SHIPPED / "fade.trace"), None, False, 100.0)
    assert exp.traces[str(SHIPPED / "fade.trace")].length_ms == 10_000


def test_trace_paths_are_relative_to_the_scenario_file(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "mine.trace").write_text("5\n10\n")
    (tmp_path / "s.yaml").write_text(SCENARIO.replace("TRACE", "t/mine.trace"))
    assert load_experiment(tmp_path / "s.yaml").traces["t/mine.trace"].opportunities_ms == (5, 10)


@pytest.mark.parametrize("content,expected", [
    (None, "topology.paths[0].trace.to_server (line 5): bad.trace: no such file"),
    ("1\n5\n3\n", "topology.paths[0].trace.to_server (line 5): bad.trace line 3: 3 is before the line above (5)"),
    ("", "topology.paths[0].trace.to_server (line 5): bad.trace: is empty"),
    ("1\nx\n", "topology.paths[0].trace.to_server (line 5): bad.trace line 2: 'x' is not a whole number"),
])
def test_a_bad_trace_names_the_scenario_the_field_the_file_and_the_line(tmp_path, content, expected):
    if content is not None:
        (tmp_path / "bad.trace").write_text(content)
    (tmp_path / "s.yaml").write_text(SCENARIO.replace("TRACE", "bad.trace"))
    with pytest.raises(ScenarioError) as e:
        load_experiment(tmp_path / "s.yaml")
    assert e.value.render().startswith(f"{tmp_path / 's.yaml'}: {expected}"), e.value.render()


def test_a_swept_trace_is_checked_at_every_point(tmp_path):
    (tmp_path / "ok.trace").write_text("1\n2\n")
    text = SCENARIO.replace("TRACE", "ok.trace") + "sweep: {paths.A.trace: [{to_client: ok.trace}, {to_client: no.trace}]}\n"
    with pytest.raises(ScenarioError, match=r"topology.paths\[0\].trace.to_client \(line 5\): no.trace: no such file"):
        parse_experiment(text, tmp_path / "s.yaml")


@pytest.mark.parametrize("fragment,expected", [
    ("trace: {once: true}", "topology.paths[0].trace.to_server (line 5): give a trace file for to_server"),
    ("trace: {to_server: x.trace, step: 5ms}", "topology.paths[0].trace.step (line 5): must be between 10ms and 10s"),
    ("trace: {to_server: 'a b.trace'}", "topology.paths[0].trace.to_server (line 5): 'a b.trace' is not allowed"),
    ("trace: {to_server: x.trace, every: 1s}", "topology.paths[0].trace.every (line 5): unknown key"),
])
def test_bad_trace_fields(fragment, expected):
    with pytest.raises(ScenarioError) as e:
        parse_experiment(SCENARIO.replace("trace: {to_server: TRACE, step: 100ms}", fragment), "s.yaml")
    assert expected in e.value.render(), e.value.render()


def test_a_switched_link_needs_bw_for_a_trace():
    text = """\
name: t
topology:
  kind: switched
  switches: [{name: s1}]
  clients: [h2]
  links:
    - {name: a, between: [h2, s1], trace: {to_server: x.trace}}
    - {name: b, between: [s1, h1]}
  paths: [{name: P}]
"""
    with pytest.raises(ScenarioError, match=r"topology.links\[0\].bw \(line 7\): delay, loss and queue are shaped "
                                            r"by netem at a rate, and so is a trace"):
        parse_experiment(text, "s.yaml")


def test_the_shipped_traces_are_what_the_generator_writes():
    for name in gen.TRACES:
        assert (SHIPPED / name).read_text() == gen.render(name), f"regenerate: python -m scenarios.traces.gen ({name})"


def test_the_shipped_traces_have_their_shapes():
    def per_second(name):
        return [round(r, 1) for r in rate_steps(load_trace(SHIPPED / name), 1000, 10_000)]
    assert per_second("step.trace") == [8.0] * 5 + [2.0] * 5
    assert per_second("on-off.trace") == [8.0, 0.0] * 5
    fade = per_second("fade.trace")
    assert fade[0] > 6 and fade[4] == fade[5] == 0.0 and fade[9] > 6
    walk = per_second("random-walk.trace")
    assert all(1.0 <= r <= 8.0 for r in walk) and len(set(walk)) > 3
    assert all(len((SHIPPED / n).read_bytes()) < 32_000 for n in gen.TRACES)


def test_the_random_walk_depends_on_its_seed():
    walk = [gen.random_walk(gen.SEED)(ms) for ms in range(0, 10_000, 500)]
    assert walk == [gen.random_walk(gen.SEED)(ms) for ms in range(0, 10_000, 500)]
    assert walk != [gen.random_walk(gen.SEED + 1)(ms) for ms in range(0, 10_000, 500)]


def test_the_trace_benchmark_judges_only_the_seconds_a_queue_stayed_backlogged():
    """bench.events' trace figure: netem's sent rate against the trace, in the seconds its queue was full."""
    from bench.events import backlogged_errors

    wanted = [8.0, 4.0, 2.0]
    rows, sent = [], 0
    for k in range(30):                                   # 100 ms samples over 3 s
        t = round(0.05 + 0.1 * k, 3)
        sec = int(t)
        rate = {0: 8.0, 1: 4.4, 2: 2.0}[sec]              # second 1 sent 10 % over its step
        backlog = 0 if sec == 2 else 60_000               # second 2's queue is empty: TCP had not filled it
        rows.append([t, sent, 0, 0, backlog, backlog // 1500])
        sent += int(rate * 1e6 / 8 * 0.1)
    errors = backlogged_errors(rows, wanted, delay_ms=10.0, seconds=range(0, 3))
    assert list(errors) == [0, 1]
    assert errors[0] < 0.01 and abs(errors[1] - 0.10) < 0.01
    assert backlogged_errors(rows, wanted, delay_ms=10.0, seconds=range(1, 3)) == {1: errors[1]}


TWO_CLIENTS = """\
name: t
topology:
  kind: switched
  switches: [{name: s1}]
  server: h1
  clients: [h2, h3]
  links:
    - {name: a, between: [h2, s1], bw: 8}
    - {name: c, between: [h3, s1], bw: 8, trace: {to_server: STEP, step: 1s}}
    - {name: b, between: [s1, h1], bw: 20}
  paths: [{name: P}]
traffic: {duration: 8}
"""


def test_a_trace_on_the_second_clients_switched_link_steps_that_clients_egress(tmp_path):
    """A switched link's shaping (a property there) and every client's own egress: the trace on h3's link
    is h3's to change, at 8 then 2 Mbit/s, in a TBF."""
    from topologies.events import plan_changes
    from topologies.kinds import plan

    (tmp_path / "s.yaml").write_text(TWO_CLIENTS.replace("STEP", str(SHIPPED / "step.trace")))
    exp = load_experiment(tmp_path / "s.yaml")
    p = plan(exp.scenario)
    assert {i.name: i.shaping.rate_at_dequeue for i in p.interfaces if i.shaping} == {
        "h2-eth0": False, "s1-eth1": False, "h3-eth0": True, "s1-eth2": True, "s1-eth3": False, "h1-eth0": False}
    steps = plan_changes(exp.scenario, p, "P", exp.traces)
    got = {ch.at_ms: ch.detail for ch in steps}
    assert got[0] in ("to_server 8 Mbit/s", "to_server 7.99 Mbit/s") and got[5000] == "to_server 2 Mbit/s", got
    for ch in steps:
        assert [nc.node for nc in ch.commands] == ["h3"]
        assert [a[8] if a[5] == "root" else a[9] for a in ch.commands[0].argvs] == ["tbf", "netem"]
