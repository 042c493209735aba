"""A traffic tool is one class and one line in runners.traffic.TOOLS: this one is registered by the test
alone, and runs through the same network, counters, record and store as iperf3 does."""
import json
import time

import pytest

from runners.traffic import TOOLS, TrafficReport, TrafficResult, TrafficTool

from .helpers import leftovers, run_cli, write_scenario

pytestmark = pytest.mark.integration


class SleepTool(TrafficTool):
    """The smallest tool: the client sleeps for traffic.duration and sends nothing."""

    name = "sleep"

    def run(self, req):
        h = self.host
        sampler = self.sampler(req)
        t0 = time.monotonic()
        proc = h.procs.start(h.client, ["sleep", f"{h.scenario.traffic.duration:g}"])
        try:
            self.wait_client(proc, t0 + self.timeout(), req.run_id, "sleep")
        finally:
            samples = sampler.stop(h.log)
            h.procs.stop_all()
        return TrafficResult(TrafficReport(seconds=time.monotonic() - t0, version="sleep 1"), samples, [])


SCENARIO = """\
name: sleepy
topology:
  kind: dual-homed
  paths:
    - {name: A, bw: 5, delay: 5ms}
traffic: {tool: sleep, duration: 2, interval: 0.5}
runs: {compare: [tcp]}
"""


def test_a_tool_registered_in_one_line_runs_like_the_others(tmp_path, monkeypatch):
    monkeypatch.setitem(TOOLS, "sleep", SleepTool)
    f = write_scenario(tmp_path / "sleepy.yaml", SCENARIO)
    r = run_cli(str(f), "--backend", "native", "--out", str(tmp_path / "o"))
    assert r.returncode == 0, r.stdout + r.stderr
    d = next((tmp_path / "o" / "sleepy").iterdir())
    run = json.loads((d / "results.json").read_text())["runs"][0]
    assert run["status"] == "ok" and run["iperf_version"] == "sleep 1"
    assert 1.9 < run["metrics"]["seconds"] < 4.0
    assert run["metrics"]["throughput_mbps"] == 0.0
    assert run["paths"]["A"]["bytes_received"] < 10_000     # pings and neighbour discovery only
    assert len(run["path_series_mbps"]) >= 2                 # the shared sampler ran
    assert leftovers() == []
