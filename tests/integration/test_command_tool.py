"""traffic.tool: command on a real kernel: a user's tool, here iperf3 driven through the plug-in."""
import json

import pytest

from .helpers import leftovers, run_cli, write_scenario

pytestmark = pytest.mark.integration

PLUGIN = """\
name: plugin
topology:
  kind: dual-homed
  paths:
    - {name: A, bw: 5, delay: 5ms}
    - {name: B, bw: 5, delay: 5ms}
traffic:
  tool: command
  duration: 5
  command:
    server: [iperf3, -s, -1, -p, "{port}"]
    client: [iperf3, -c, "{server_ip}", -B, "{client_ip}", -p, "{port}", -t, "{duration}"]
    ready_port: 5201
    mptcpize: true
runs: {compare: [mptcp, tcp]}
"""


def test_plugged_in_tool_gets_the_same_metrics(tmp_path):
    f = write_scenario(tmp_path / "plugin.yaml", PLUGIN)
    r = run_cli(str(f), "--backend", "native", "--allow-commands", "--out", str(tmp_path / "o"))
    assert r.returncode == 0, r.stdout + r.stderr
    d = next((tmp_path / "o" / "plugin").iterdir())
    runs = {x["mode"]: x for x in json.loads((d / "results.json").read_text())["runs"]}
    mp, tcp = runs["mptcp"], runs["tcp"]
    # throughput from the receiver's counters (with headers) over the client's run time, which includes its
    # process start and end: 5.63-5.66 s for 5 s of traffic in the TCG guest (4.79-4.82 Mbit/s), once 6.03 s
    # (4.47 Mbit/s) in a full integration run (2026-11-25)
    assert 4.2 < tcp["metrics"]["throughput_mbps"] < 5.5, tcp["metrics"]
    assert mp["metrics"]["throughput_mbps"] >= 1.6 * tcp["metrics"]["throughput_mbps"]
    assert mp["metrics"]["subflows"] == 2
    assert all(p["bytes_received"] > 500_000 for p in mp["paths"].values())
    assert (d / "raw" / mp["id"] / "tool-client.txt").read_text().count("sender") >= 1
    assert leftovers() == []
