"""bench.scale's arithmetic and the scenarios it runs (the runs themselves need root: bench, not tests)."""
from __future__ import annotations

import pytest

from bench.scale import SIZES, dual_homed, first_non_linear, slope, switched
from scenarios.spec.loader import parse_scenario


def test_slope_is_the_least_squares_one():
    assert slope([1, 2, 4, 8], [0.5, 1.0, 2.0, 4.0]) == pytest.approx(0.5)
    assert slope([3, 6, 18, 34], [1.0, 1.0, 1.0, 1.0]) == pytest.approx(0.0)


def test_the_first_step_that_costs_more_per_unit_is_named():
    # 0.1 s per node up to 18 nodes, then 0.4 per node from 18 to 34 nodes
    assert first_non_linear([3, 6, 18, 34], [0.3, 0.6, 1.8, 8.2]) == (3, pytest.approx(4.0))
    assert first_non_linear([1, 2, 4, 8], [0.1, 0.2, 0.4, 0.8]) is None
    # within 1.5x of the cost per unit before it is linear enough
    assert first_non_linear([1, 2, 4, 8], [0.1, 0.2, 0.42, 0.9]) is None
    # a bend smaller than TCG's noise is not one: bench.scale's shaping times of 2026-11-26 (1-8 paths)
    assert first_non_linear([1, 2, 4, 8], [1.08, 1.08, 1.50, 1.65]) is None
    # a first step lost in noise, then real growth
    assert first_non_linear([1, 4, 16, 32], [2.0, 2.0, 2.1, 6.0])[0] == 3


@pytest.mark.parametrize("n", SIZES["paths"])
def test_every_paths_size_is_a_valid_scenario(n):
    sc = parse_scenario(dual_homed(n), f"scale-paths-{n}.yaml")
    assert len(sc.topology.paths) == n and sc.traffic.duration == 5


@pytest.mark.parametrize("n", SIZES["clients"])
def test_every_clients_size_is_a_valid_scenario(n):
    sc = parse_scenario(switched(n), f"scale-clients-{n}.yaml")
    assert len(sc.topology.clients) == n and len(sc.topology.links) == n + 1


def test_a_bend_is_said_as_a_ratio_or_in_seconds_after_steps_that_cost_nothing():
    from bench.scale import bend_note
    sizes = SIZES["clients"]
    assert bend_note(None, [1, 2, 3, 4], sizes, "clients", "node").startswith("no step over 1.5x")
    ys = [0.3, 0.6, 1.8, 8.2]
    assert bend_note(first_non_linear([3, 6, 18, 34], ys), ys, sizes, "clients", "node") == \
        "first non-linear step: to 32 clients, 4.0x the cost per node of the steps before it"
    ys = [15.75, 13.42, 23.43, 36.1]     # a cold first build: the step before the bend cost less than nothing
    assert bend_note(first_non_linear([3, 6, 18, 34], ys), ys, sizes, "clients", "node") == \
        "first non-linear step: to 16 clients, 10.01 s more where the steps before it cost nothing"


def test_the_runs_group_stores_recorded_runs_and_writes_a_row_per_size(tmp_path, monkeypatch):
    import bench.scale as scale

    monkeypatch.setitem(scale.SIZES, "runs", (2, 4, 8))
    b = scale.ScaleBench(tmp_path, quick=True)
    b.runs()
    rows = [r for r in b.rows if r["group"] == "runs"]
    assert [r["configured"] for r in rows[:3]] == [2, 4, 8]
    assert all(r["measured"] > 0 and "results.json" in r["note"] for r in rows[:3])
    assert rows[3]["unit"] == "s/run"
