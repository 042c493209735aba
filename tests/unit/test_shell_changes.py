"""`run-scenario shell`'s path, link and shape commands: parsed into an event's fields, checked against the
session's earlier changes as a scenario's timeline is, and made with the commands a run's event uses."""
import pytest

from scenarios.spec.loader import parse_scenario
from topologies.kinds import plan

from runners.pipeline import shell

SC = parse_scenario("""\
name: t
topology:
  kind: dual-homed
  paths:
    - {name: A, bw: 10, delay: 20ms}
    - {name: B, bw: 10, delay: 20ms}
traffic: {duration: 10}
""")


class FakeRunner:
    scenario, plan = SC, plan(SC)

    class network:
        @staticmethod
        def get(name):
            return name


@pytest.fixture
def ran(monkeypatch):
    done = []
    monkeypatch.setattr(shell, "run_batch", lambda node, argvs: done.append((node, argvs)))
    monkeypatch.setattr("runners.pipeline.events.check_netem", lambda node, dev, shaping, what: done.append(
        (node, f"read back {dev} {shaping.rate_mbit:g}")))
    return done


def test_commands_parse_into_event_fields():
    assert shell.parse_change("path", "A down", "dual-homed") == {"path": "A", "do": "down"}
    assert shell.parse_change("shape", "B bw=2 delay=80ms", "dual-homed") == {"path": "B", "shape": {"bw": 2.0, "delay": "80ms"}}
    assert shell.parse_change("shape", "core bw=2", "routed") == {"link": "core", "shape": {"bw": 2.0}}
    for command, line, why in (("path", "A sideways", "usage: path NAME down|up"), ("path", "A", "usage"),
                               ("shape", "A", "usage: shape"), ("shape", "A speed=3", "unknown speed")):
        with pytest.raises(ValueError, match=why):
            shell.parse_change(command, line, "dual-homed")


def test_changes_are_made_and_checked_as_a_timeline(ran):
    made = []
    assert shell.apply_change(FakeRunner, "A", made, {"path": "A", "do": "down"}) == "path A: down"
    assert ran[0] == ("h1", [["ip", "link", "set", "dev", "h1-eth0", "down"]])
    with pytest.raises(ValueError, match="^path A is already down$"):
        shell.apply_change(FakeRunner, "A", made, {"path": "A", "do": "down"})
    assert shell.apply_change(FakeRunner, "A", made, {"path": "A", "do": "up"}) == "path A: up"
    with pytest.raises(ValueError, match="^path A is not down$"):
        shell.apply_change(FakeRunner, "A", made, {"path": "A", "do": "up"})
    ran.clear()
    assert shell.apply_change(FakeRunner, "A", made, {"path": "B", "shape": {"bw": 2}}) == "path B: bw 2 Mbit/s"
    assert ("h1", [["tc", "qdisc", "change", "dev", "h1-eth1", "root", "netem", "rate", "2000kbit", "delay", "20ms",
                    "limit", "104"]]) in ran and ("h2", "read back h2-eth1 2") in ran
    with pytest.raises(ValueError, match="bw"):
        shell.apply_change(FakeRunner, "A", made, {"path": "B", "shape": {"bw": -1}})
    with pytest.raises(ValueError, match="no path named 'C'"):
        shell.apply_change(FakeRunner, "A", made, {"path": "C", "do": "down"})
