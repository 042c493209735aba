"""Events, rate traces and mptcp.sysctls run; the shell and export refuse events and traces before anything
starts (exit 2), naming what the scenario has: only a run applies them (issue 30)."""
from pathlib import Path

import pytest

from runners.cli import main

REPO = Path(__file__).resolve().parents[2]
PLAIN = """\
name: t
topology:
  kind: dual-homed
  paths:
    - {name: A, bw: 10}
    - {name: B, bw: 10%s}
traffic: {duration: 10}
"""
EVENTS = PLAIN % "" + "events:\n  - {name: a-down, at: 5s, path: A, do: down}\n"
TRACE = PLAIN % f", trace: {{to_client: {REPO / 'scenarios/traces/step.trace'}}}"
SYSCTLS = PLAIN % "" + "mptcp: {sysctls: {stale_loss_cnt: 2}}\n"


@pytest.mark.parametrize("text", [EVENTS, TRACE, SYSCTLS], ids=["events", "trace", "sysctls"])
def test_check_says_nothing_cannot_run(tmp_path, capsys, text):
    (tmp_path / "s.yaml").write_text(text)
    assert main(["--check", str(tmp_path / "s.yaml")]) == 0
    out = capsys.readouterr().out
    assert ": ok (" in out and "cannot run yet" not in out, out


@pytest.mark.parametrize("command", ["shell", "export"])
@pytest.mark.parametrize("text,what", [(EVENTS, "events (a-down)"), (TRACE, "topology.paths[1].trace")],
                         ids=["events", "trace"])
def test_shell_and_export_refuse_events_and_traces(tmp_path, capsys, command, text, what):
    (tmp_path / "s.yaml").write_text(text)
    assert main([command, str(tmp_path / "s.yaml")]) == 2
    assert (f"this scenario has {what}, which `run-scenario` applies during its runs but the shell and export "
            "do not yet" in capsys.readouterr().err)
