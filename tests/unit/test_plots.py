"""Every plot type, drawn from recorded runs (TCG VM, kernel 6.1, 2026-11-22) and checked through
matplotlib's own objects: what is on the axes, where, and how it is labelled."""
import copy
import json
from pathlib import Path

import pytest

from runners.analysis import plots
from runners.analysis.report import point_stats

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "record"


def recorded(mode: str) -> dict:
    return json.loads((FIX / mode / "expected.json").read_text())


def with_point(run: dict, rid: str, point: str, label: str, params: dict, repeat: int = 1, scale: float = 1.0):
    r = copy.deepcopy(run)
    r.update(id=rid, point=point, point_label=label, params=params, repeat=repeat)
    r["metrics"]["throughput_mbps"] *= scale
    return r


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plots.plt.close("all")


def test_time_series_draws_each_interval_from_its_start_and_names_who_counted():
    run = recorded("mptcp")
    fig = plots.timeseries_figure(run)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(lbl.startswith("path A (") for lbl in labels) and any(lbl.startswith("path B (") for lbl in labels)
    goodput = next(line for line in ax.get_lines() if line.get_label().startswith("goodput"))
    xs, ys = goodput.get_data()
    first = run["intervals"][0]
    assert xs[0] == pytest.approx(first["start"]) == 0.0        # the 0-1 s value starts at 0, not at 1
    assert ys[0] == pytest.approx(first["mbps"])
    assert "iperf3 intervals" in goodput.get_label()
    assert ax.get_ylim()[0] == 0 and ax.get_xlim()[0] == 0
    assert ax.get_xlabel() == "time since the transfer started (s)" and ax.get_ylabel() == "throughput (Mbit/s)"
    assert "base" in ax.get_title()


def test_few_runs_are_drawn_as_points_saying_there_is_no_interval():
    doc = {"runs": [with_point(recorded("mptcp"), "r001-mptcp-A", "p001", "paths.A.delay=5ms", {}),
                    with_point(recorded("tcp"), "r001-tcp-A", "p001", "paths.A.delay=5ms", {})]}
    ax = plots.boxplot_figure(doc, "throughput_mbps").axes[0]
    notes = [t.get_text() for t in ax.texts]
    assert notes.count("n=1,\nno interval") == 2
    assert [t.get_text() for t in ax.get_xticklabels()] == ["paths.A.delay=5ms"]   # labels, not p001
    assert sorted(t.get_text() for t in ax.get_legend().get_texts()) == ["mptcp@A (n=1 per point)",
                                                                         "tcp@A (n=1 per point)"]
    assert ax.get_ylim()[0] == 0


def test_a_case_whose_metric_was_not_counted_is_named_so_not_drawn():
    """TCP baselines run together leave nstat counts (OFO) null: every run of the case, so no box at all."""
    tcp = with_point(recorded("tcp"), "r001-tcp-A", "p001", "base", {})
    tcp["metrics"]["ofo_mptcp"] = None
    doc = {"runs": [with_point(recorded("mptcp"), "r001-mptcp-A", "p001", "base", {}), tcp]}
    ax = plots.boxplot_figure(doc, "ofo_mptcp").axes[0]
    assert sorted(t.get_text() for t in ax.get_legend().get_texts()) == ["mptcp@A (n=1 per point)",
                                                                         "tcp@A (not counted)"]
    assert [t.get_text() for t in ax.texts] == ["n=1,\nno interval"]        # the MPTCP run's point only


def test_many_points_keep_a_readable_width_and_say_no_interval_once_in_the_legend():
    """E3: ten cases, five kinds of run each, two runs a point."""
    runs = [with_point(recorded(mode), f"p{k:03}-r00{rep}-{mode}-A", f"p{k:03}", f"variant=case{k}", {}, repeat=rep)
            for k in range(1, 11) for mode in ("mptcp", "tcp") for rep in (1, 2)]
    fig = plots.boxplot_figure({"runs": runs}, "throughput_mbps")
    ax = fig.axes[0]
    assert fig.get_size_inches()[0] <= 18 and not ax.texts
    assert sorted(t.get_text() for t in ax.get_legend().get_texts()) == [
        "mptcp@A (n=2 per point, no interval)", "tcp@A (n=2 per point, no interval)"]
    assert [t.get_text() for t in ax.get_xticklabels()][:2] == ["variant=case1", "variant=case2"]


def test_boxes_have_medians_that_stand_out():
    runs = [with_point(recorded("mptcp"), f"r00{i}-mptcp-A", "p001", "base", {}, repeat=i, scale=1 + i / 100)
            for i in (1, 2, 3)]
    ax = plots.boxplot_figure({"runs": runs}, "throughput_mbps").axes[0]
    medians = [line for line in ax.get_lines() if line.get_color() == "black" and line.get_linewidth() == 2]
    assert len(medians) == 1                    # one box, one bold black median over its coloured fill
    assert ax.patches and ax.patches[0].get_alpha() == 0.6
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["mptcp@A (n=3 per point)"]


def test_a_sweep_axis_names_the_parameter_and_its_unit_and_orders_the_points():
    runs = []
    for k, (delay, scale) in enumerate((("50ms", 0.9), ("5ms", 1.0), ("250ms", 0.5))):
        runs.append(with_point(recorded("mptcp"), f"r00{k}-mptcp-A", f"p00{k}", f"paths.A.delay={delay}",
                               {"paths.A.delay": delay}, scale=scale))
    fig = plots.against_parameter_figure(point_stats({"runs": runs}), "paths.A.delay", "throughput_mbps")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "path A one-way delay (ms)"
    assert ax.get_ylabel() == "throughput (Mbit/s)" and ax.get_ylim()[0] == 0
    line = ax.get_lines()[0]
    assert list(line.get_xdata()) == [5.0, 50.0, 250.0]
    ys = list(line.get_ydata())
    assert ys[0] > ys[1] > ys[2]
    assert "(n=1)" in ax.get_legend().get_texts()[0].get_text()


def test_parameter_labels():
    assert plots.param_label("links.l2.bw") == "link l2 rate (Mbit/s)"
    assert plots.param_label("traffic.bytes") == "transfer size (MiB)"
    assert plots.numeric("256KiB", "traffic.bytes") == 0.25 and plots.numeric(2**21, "sockets.send") == 2.0
    assert plots.param_label("mptcp.scheduler") == "scheduler"
