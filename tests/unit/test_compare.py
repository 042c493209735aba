"""run-scenario compare: E2's shape (completion time against file size for three cases, each its own
result set) from one command; built from a recorded run."""
import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from runners.analysis.compare import CompareError, compare_rows, load_sets, overlay_figure

REPO = Path(__file__).resolve().parents[2]
RUN = json.loads((REPO / "tests" / "fixtures" / "record" / "mptcp" / "expected.json").read_text())


def result_set(base: Path, scenario: str, mode: str, seconds_per_mb: float) -> Path:
    runs = []
    for k, size in enumerate(("1MiB", "2MiB", "4MiB")):
        mib = int(size[0])
        for rep in (1, 2):
            r = copy.deepcopy(RUN)
            r.update(id=f"r{rep:03d}-{mode}-A-p{k}", mode=mode, repeat=rep, point=f"p00{k + 1}",
                     point_label=f"traffic.bytes={size}", params={"traffic.bytes": size})
            r["metrics"]["seconds"] = mib * seconds_per_mb + rep * 0.01
            runs.append(r)
    d = base / scenario / "20261122T000000Z"
    d.mkdir(parents=True)
    (d / "results.json").write_text(json.dumps({"metadata": {"scenario": scenario}, "runs": runs}))
    return d


def test_three_result_sets_make_one_table_and_one_figure(tmp_path):
    dirs = [result_set(tmp_path, "e2-tcp", "tcp", 1.0), result_set(tmp_path, "e2-mptcp-one", "mptcp", 1.0),
            result_set(tmp_path, "e2-mptcp-paths", "mptcp", 0.5)]
    rows = compare_rows(load_sets(dirs), "seconds")
    assert len(rows) == 9 and {r.n for r in rows} == {2}
    ax = overlay_figure(rows, "seconds", "traffic.bytes").axes[0]
    assert ax.get_xlabel() == "transfer size (MiB)" and ax.get_ylabel() == "completion time (s)"
    lines = {c.get_label(): c.lines[0] for c in ax.containers}   # errorbar: label on the container
    assert set(lines) == {"e2-mptcp-one: mptcp@A (n=2)", "e2-mptcp-paths: mptcp@A (n=2)", "e2-tcp: tcp@A (n=2)"}
    assert list(lines["e2-tcp: tcp@A (n=2)"].get_xdata()) == [1.0, 2.0, 4.0]
    assert lines["e2-mptcp-paths: mptcp@A (n=2)"].get_ydata()[-1] < lines["e2-tcp: tcp@A (n=2)"].get_ydata()[-1]

    r = subprocess.run([sys.executable, "-m", "runners.cli", "compare", *map(str, dirs), "--metric", "seconds",
                        "--by", "traffic.bytes", "--out", str(tmp_path / "fig")], cwd=REPO, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "e2-mptcp-paths" in r.stdout and "traffic.bytes=4MiB" in r.stdout
    assert (tmp_path / "fig" / "compare-seconds-vs-traffic.bytes.png").stat().st_size > 10_000


def test_bad_folders_and_metrics_are_input_errors(tmp_path):
    with pytest.raises(CompareError, match="not a result set"):
        load_sets([tmp_path])
    d = result_set(tmp_path, "s", "tcp", 1.0)
    with pytest.raises(CompareError, match="no run in these result sets has the metric 'nope'"):
        compare_rows(load_sets([d]), "nope")
    r = subprocess.run([sys.executable, "-m", "runners.cli", "compare", str(tmp_path / "missing")], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "not a result set" in r.stderr and "Traceback" not in r.stderr
