"""`run-scenario export` writes a scenario's events and trace steps as timed calls (EVENTS and
play_events), as a run makes them; endpoint changes, which need the kernel's ids, are named as left out.
--check says nothing about events: a run, the shell's `traffic` and export all take them."""
import ast
from pathlib import Path

from runners.cli import main

REPO = Path(__file__).resolve().parents[2]
EVENTS = """\
name: t
topology:
  kind: dual-homed
  paths:
    - {name: A, bw: 10}
    - {name: B, bw: 10, trace: {to_server: %s, step: 2s}}
traffic: {duration: 10}
events:
  - {name: a-down, at: 5s, path: A, do: down}
  - {name: b-rm, at: 6s, path: B, do: endpoint-remove}
""" % (REPO / "scenarios/traces/step.trace")


def test_export_writes_events_and_trace_steps_as_timed_calls(tmp_path, capsys):
    (tmp_path / "s.yaml").write_text(EVENTS)
    assert main(["export", str(tmp_path / "s.yaml")]) == 0
    script = capsys.readouterr().out
    tree = ast.parse(script)
    events = next(ast.literal_eval(n.value) for n in tree.body
                  if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "EVENTS")
    assert (5.0, "a-down", "path A down", {"h1": [["ip", "link", "set", "dev", "h1-eth0", "down"]],
                                           "h2": [["ip", "link", "set", "dev", "h2-eth0", "down"]]}) in events
    steps = [e for e in events if e[1] == "trace-B"]
    # step.trace: 8 Mbit/s for 5 s, then 2; in steps of 2 s: 8, 8 (left out: no change), 5, 2, 2
    assert [(e[0], e[2]) for e in steps] == [(0.0, "path B to_server 8 Mbit/s"), (4.0, "path B to_server 5 Mbit/s"),
                                             (6.0, "path B to_server 2 Mbit/s")]
    assert [e[0] for e in events] == sorted(e[0] for e in events)
    assert "# Left out: b-rm (endpoint-remove/-add" in script and "def play_events(net):" in script


def test_check_says_nothing_about_events(tmp_path, capsys):
    (tmp_path / "s.yaml").write_text(EVENTS)
    assert main(["--check", str(tmp_path / "s.yaml")]) == 0
    out = capsys.readouterr().out
    assert ": ok (" in out and "cannot run" not in out, out
