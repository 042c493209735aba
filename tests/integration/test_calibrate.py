"""`run-scenario calibrate`'s probes, for real: a probe of two paths is a TCP flow on each at once, run as a
job in a fork (as the warm VM runs jobs), and its outcome reads both flows' run records. The search and
the file are unit-tested on stand-in probes (tests/unit/test_calibration*.py); this is the part a stand-in
cannot show (a stand-in with the job runner's old signature hid that calibrate failed on every machine
from 2026-11-25 to 2026-11-27)."""
import json

import pytest

from runners.cli import calibrate
from runners.runset import calibration_search as search

from .helpers import leftovers

pytestmark = pytest.mark.integration


def test_a_probe_of_two_paths_runs_a_flow_on_each_and_reads_both(tmp_path, monkeypatch):
    from runners.backends.vm import warm_guest

    # calibrate's own guest clears the whole VM after each probe and drops its cached root; this VM runs the
    # other tests too, so the probe here must clean up after itself (checked below) and touch nothing else
    monkeypatch.setattr(warm_guest, "_forget_cached_root", lambda: False)
    prober = calibrate._Prober(tmp_path, search.PROBE_SECONDS)
    prober.paths(2, 5)
    [o] = prober.outcomes
    folder = tmp_path / o.folder
    doc = json.loads((folder / "results.json").read_text())
    assert sorted(r["primary"] for r in doc["runs"]) == ["A", "B"], doc["runs"]
    assert all(r["status"] == "ok" and r["mode"] == "tcp" for r in doc["runs"])
    # the probe is its two flows: their sum carried, each one's fidelity counted (2 x 5 Mbit/s is far
    # below what even the TCG micro-VM carries: 77-84 Mbit/s per path on two paths, docs/fidelity.md)
    rates = [r["metrics"]["throughput_mbps"] for r in doc["runs"]]
    assert o.carried_mbps == pytest.approx(sum(rates), abs=0.01) and o.carried_mbps > 0.5 * 10
    assert o.status in ("ok", "warn", "unfaithful") and len(o.delay_excess_ms) == 2   # one per path
    assert (folder / "probe.log").exists() and leftovers() == []
