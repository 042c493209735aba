"""Scenario model and loader: valid files, defaults, and every kind of bad input."""
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from scenarios.spec.loader import ScenarioError, load_scenario, parse_scenario
from scenarios.spec.model import json_schema

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((REPO / "scenarios").glob("*.yaml"))

GOOD = """\
name: t
topology:
  kind: dual-homed
  paths:
    - {name: A, bw: 10, delay: 15ms, loss: 0, queue: 100}
    - {name: B, bw: 700kbit, delay: 0.25s, loss: 0.5}
"""


def problems(text: str) -> str:
    with pytest.raises(ScenarioError) as e:
        parse_scenario(text, "bad.yaml")
    return e.value.render()


def test_good_scenario_and_defaults():
    s = parse_scenario(GOOD)
    a, b = s.topology.paths
    assert (a.bw, a.delay, a.loss, a.queue) == (10.0, 15.0, 0.0, 100)
    assert (b.bw, b.delay, b.loss, b.queue) == (0.7, 250.0, 0.5, 100)
    assert s.primary == "A" and s.primaries == ["A"]
    assert s.traffic.duration == 10.0 and s.traffic.bytes is None
    assert s.runs.compare == ["mptcp", "tcp"] and s.runs.repeat == 1
    assert s.mptcp.endpoints == "signal" and s.mptcp.congestion == "cubic"


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_shipped_scenarios_load_and_match_schema(path):
    load_scenario(path)
    jsonschema.validate(yaml.safe_load(path.read_text()), json_schema())


def test_shipped_schema_is_current():
    shipped = json.loads((REPO / "scenarios" / "schema.json").read_text())
    assert shipped == json_schema(), "regenerate with: run-scenario --schema > scenarios/schema.json"


def test_schema_rejects_what_the_model_rejects():
    doc = yaml.safe_load(GOOD)
    doc["topology"]["paths"][0]["delay"] = 15
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, json_schema())


@pytest.mark.parametrize("text,expected", [
    ("name: t\ntopology: [1,\n", "YAML syntax error at line 3, column 1"),
    ("name: t\ntopology:\n  kind: dual-homed\n paths: []\n", "YAML syntax error at line 4"),
    ("name: t\ntopology:\n  kind: dual-homed\n", "topology.paths (in the block at line 2): required field is missing"),
    ("name: t\ntopology:\n  kind: dual-homed\n  paths:\n    - {name: A, bw: fast}\n",
     "topology.paths[0].bw (line 5): must be a number in Mbit/s"),
    ("name: t\ntopology:\n  kind: dual-homed\n  paths: {name: A}\n", "topology.paths (line 4)"),
    (GOOD.replace("bw: 10,", "bw: -5,"), "topology.paths[0].bw (line 5): must be greater than 0 (got -5)"),
    (GOOD.replace("bw: 10,", "bw: 0,"), "topology.paths[0].bw (line 5): must be greater than 0"),
    (GOOD.replace("loss: 0,", "loss: 101,"), "topology.paths[0].loss (line 5): must be at most 100 (got 101)"),
    (GOOD.replace("delay: 15ms", "delay: 15"), "topology.paths[0].delay (line 5): needs a unit"),
    (GOOD.replace("delay: 15ms", "delay: 15 parsecs"), "topology.paths[0].delay (line 5): is not a duration"),
    (GOOD + "mptcp: {primary: C}\n", "mptcp.primary (line 7): no path named 'C'"),
    (GOOD + "mptcp: {backup: [Z]}\n", "mptcp.backup (line 7): no path named 'Z'"),
    (GOOD.replace("name: B", "name: A"), "topology.paths[1].name (line 6): path name 'A' is used twice"),
    (GOOD.replace("name: B", "name: 'B; reboot'"), "topology.paths[1].name (line 6): 'B; reboot' is not allowed"),
    (GOOD + "colour: blue\n", "colour (line 7): unknown key"),
    (GOOD.replace("queue: 100", "queue: 100, jitter: 2ms"), "topology.paths[0].jitter (line 5): unknown key"),
    (GOOD.replace("queue: 100", "queue: '100'"), "topology.paths[0].queue (line 5): must be a whole number (got '100')"),
    (GOOD + "mptcp: {congestion: 'cubic; reboot'}\n", "mptcp.congestion (line 7): 'cubic; reboot' is not allowed"),
    (GOOD + "traffic: {duration: 5, bytes: 10MB}\n", "traffic.bytes (line 7): give either duration or bytes"),
    (GOOD + "runs: {repeat: 0}\n", "runs.repeat (line 7): must be at least 1 (got 0)"),
    (GOOD + "runs: {compare: [mptcp, udp]}\n", "runs.compare[1] (line 7): must be 'mptcp' or 'tcp' (got 'udp')"),
    (GOOD.replace("loss: 0,", "loss: 2%,"),
     "topology.paths[0].loss (line 5): must be a number, in percent without the % sign (got '2%')"),
    (GOOD + "runs: {tcp_on: [A, 7]}\n", "runs.tcp_on[1] (line 7): must be text (put it in quotes) (got 7)"),
    (GOOD + "runs: {tcp_on: sometimes}\n",
     "runs.tcp_on (line 7): must be 'primary' or 'every-path'; or must be a list, e.g. [a, b] (got 'sometimes')"),
    (GOOD + "runs: {compare: [mptcp], tcp_on: every-path}\n", "runs.tcp_on (line 7): needs tcp in runs.compare"),
    (GOOD.replace("bw: 10,", "bw: .nan,"), "topology.paths[0].bw (line 5): must be a finite number in Mbit/s (got nan)"),
    (GOOD.replace("loss: 0,", "loss: .nan,"), "topology.paths[0].loss (line 5): must be at most 100 (got nan)"),
    (GOOD + "runs: {primaries: [A, Q]}\n", "runs.primaries[1] (line 7): no path named 'Q'"),
    (GOOD + "name: again\n", "name (line 7): key given twice (first on line 1)"),
    ("", "the file is empty"),
    ("# only a comment\n", "the file is empty"),
    ("- 1\n- 2\n", "the top level must be a mapping"),
    ("name: 'bad name'\ntopology: {kind: dual-homed, paths: [{name: A, bw: 1}]}\n", "name (line 1): 'bad name' is not allowed"),
    ("name: t\n", "topology: required field is missing"),
])
def test_bad_input_names_file_and_field(text, expected):
    msg = problems(text)
    assert msg.startswith("bad.yaml:"), msg
    assert expected in msg, msg


def test_transfer_sizes_up_to_1_tb_in_any_unit():
    """The docs' limit, "at most 1 TB", as a scenario writes it: 1TB is the largest, 1TiB is over it."""
    assert parse_scenario(GOOD + "traffic: {bytes: 1TB}\n").traffic.bytes == 10**12
    assert parse_scenario(GOOD + "traffic: {bytes: 0.5tib}\n").traffic.bytes == 2**39
    assert "traffic.bytes (line 7): must be at most 1TB, 1000000000000 bytes (got '1TiB', 1099511627776 bytes)" \
        in problems(GOOD + "traffic: {bytes: 1TiB}\n")


def test_all_field_errors_reported_at_once():
    msg = problems(GOOD.replace("bw: 10,", "bw: -5,").replace("delay: 0.25s", "delay: 3"))
    assert "2 problems" in msg and "paths[0].bw" in msg and "paths[1].delay" in msg


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(ScenarioError, match="no such file"):
        load_scenario(tmp_path / "nope.yaml")
    with pytest.raises(ScenarioError, match="is a directory"):
        load_scenario(tmp_path)
