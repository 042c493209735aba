"""traffic.tool names a registered tool: the model takes any identifier, laying out refuses unknown ones."""
import pytest
from scenarios.spec.loader import ScenarioError, load_experiment

from runners.runset.checks import check_plans
from runners.traffic import TOOLS, TrafficTool

SCENARIO = "name: t\ntopology: {kind: dual-homed, paths: [{name: A, bw: 1}]}\ntraffic: {tool: dummy, duration: 1}\n"


class DummyTool(TrafficTool):
    name = "dummy"


def test_a_registered_tool_is_accepted_and_an_unknown_one_refused(tmp_path, monkeypatch):
    f = tmp_path / "t.yaml"
    f.write_text(SCENARIO)
    exp = load_experiment(f)
    with pytest.raises(ScenarioError, match="traffic.tool: no tool named 'dummy'"):
        check_plans(exp)
    monkeypatch.setitem(TOOLS, "dummy", DummyTool)
    check_plans(exp)


def test_the_builtin_tools_are_registered_under_their_names():
    assert {name: cls.name for name, cls in TOOLS.items()} == {"iperf3": "iperf3", "command": "command"}


def test_every_tool_keeps_what_the_shared_base_gives_it():
    """What a tool's run calls on TrafficTool: a class put between its methods once took watch_subflows
    with it, and every iperf3 run failed with an AttributeError that no unit test saw."""
    shared = ("sampler", "timeout", "wait_client", "wait_clients", "watch_subflows", "start_servers",
              "servers_ready")
    for cls in TOOLS.values():
        assert all(callable(getattr(cls, name, None)) for name in shared), cls
