"""What a result set keeps of how it ran: commands.log (every command: node, exit code, seconds) and
run.log (the console), and what -v and -q print."""
import re

import pytest

from .helpers import leftovers, run_cli, write_scenario

pytestmark = pytest.mark.integration

SHORT = """\
name: logs
topology:
  kind: dual-homed
  paths:
    - {name: A, bw: 10, delay: 2ms}
    - {name: B, bw: 10, delay: 2ms}
traffic: {duration: 2}
runs: {compare: [mptcp, tcp], pause: 100ms}
"""
LINE = re.compile(r"^\S+Z\t(\S+)\t(-?\d+|background)\t(\d+\.\d{3})\t(.+)$")


def test_verbose_prints_every_command_and_the_set_keeps_them(tmp_path):
    scen = write_scenario(tmp_path / "l.yaml", SHORT)
    r = run_cli(str(scen), "--backend", "native", "-v", "--out", str(tmp_path / "o"))
    assert r.returncode == 0, r.stdout + r.stderr
    # two-paths: the server announces its second address (signal)
    assert re.search(r"^\[h2\] ip mptcp endpoint add 10\.0\.2\.2 dev h2-eth1 signal$", r.stdout, re.M), r.stdout
    assert re.search(r"^\[h2\] (mptcpize run )?iperf3 -s", r.stdout, re.M)
    d = next((tmp_path / "o" / "logs").glob("2*"))
    lines = (d / "commands.log").read_text().splitlines()
    assert lines[0].startswith("# utc")
    parsed = [LINE.match(x) for x in lines[1:]]
    assert all(parsed), [x for x, m in zip(lines[1:], parsed) if not m][:3]
    nodes = {m.group(1) for m in parsed}
    assert {"h1", "h2"} <= nodes
    assert any(m.group(4).startswith("tc qdisc") for m in parsed)
    assert any(m.group(2) == "background" and "iperf3" in m.group(4) for m in parsed)
    run_log = (d / "run.log").read_text()
    assert f"results: {d}" in run_log and "[h2] ip mptcp endpoint add" in run_log and "MPTCP" in run_log
    assert "\x1b[" not in run_log
    assert leftovers() == []


def test_quiet_prints_only_the_summary(tmp_path):
    scen = write_scenario(tmp_path / "l.yaml", SHORT)
    r = run_cli(str(scen), "--backend", "native", "-q", "--out", str(tmp_path / "o"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "run r001" not in r.stdout and "building topology" not in r.stdout and "results:" not in r.stdout
    assert "MPTCP" in r.stdout and r.stderr == ""
    d = next((tmp_path / "o" / "logs").glob("2*"))
    assert "run r001-mptcp-A:" in (d / "run.log").read_text()      # the log keeps what -q left out
