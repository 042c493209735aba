"""Results files, run order, and the CLI's handling of bad input (no root needed)."""
import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from scenarios.spec.loader import parse_experiment

from runners.analysis.summary import comparison_lines, summary
from runners.collect.record import series_from_samples
from runners.results.store import ResultStore, atomic_write, new_run_dir
from runners.results.table import render_csv
from runners.runset.jobs import plan_jobs

REPO = Path(__file__).resolve().parents[2]
RUN = {"id": "r001-mptcp-A", "mode": "mptcp", "repeat": 1, "primary": "A", "status": "ok",
       "metrics": {"throughput_mbps": 18.5, "subflows": 2, "ofo_tcp": 0, "ofo_mptcp": 10, "retrans_segs": 3},
       "paths": {"A": {"bytes_received": 100, "share": 0.5}, "B": {"bytes_received": 100, "share": 0.5}}}


def test_atomic_write_leaves_no_temp_files(tmp_path):
    atomic_write(tmp_path / "a.json", "1")
    atomic_write(tmp_path / "a.json", "2")
    assert (tmp_path / "a.json").read_text() == "2"
    assert os.listdir(tmp_path) == ["a.json"]


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_atomic_write_makes_results_readable_by_everyone_whatever_the_umask(tmp_path, monkeypatch, umask):
    from runners.results import store as store_module
    old = os.umask(umask)
    try:
        monkeypatch.setattr(store_module, "_CHMOD_NEEDED", (0o644 & ~umask) != 0o644)
        atomic_write(tmp_path / "a.json", "1")
    finally:
        os.umask(old)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o644


def test_a_write_that_fails_leaves_no_temp_file(tmp_path):
    with pytest.raises(TypeError):
        atomic_write(tmp_path / "a.json", 12)        # not text: the write itself fails
    assert os.listdir(tmp_path) == []


def test_store_rewrites_results_after_every_run(tmp_path):
    store = ResultStore(tmp_path)
    store.set_metadata(kernel="x")
    store.add_run(RUN)
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["runs"][0]["id"] == "r001-mptcp-A" and doc["metadata"]["kernel"] == "x"
    store.flush_raw()   # the run's own copy is a raw file, written in the background
    assert json.loads((tmp_path / "raw" / "r001-mptcp-A" / "run.json").read_text())["id"] == "r001-mptcp-A"
    rows = list(csv.DictReader(io.StringIO((tmp_path / "runs.csv").read_text())))
    assert {"run_id": "r001-mptcp-A", "metric": "throughput_mbps", "path": "", "value": "18.5"}.items() <= rows[0].items()
    assert any(r["metric"] == "share" and r["path"] == "B" for r in rows)


def test_tidy_csv_has_one_row_per_metric_and_path():
    rows = render_csv([RUN]).strip().splitlines()
    assert rows[0] == ("run_id,point,label,kernel,kernel_release,mode,repeat,primary,status,fidelity,fidelity_reasons,"
                       "metric,path,client,value,unit")
    assert len(rows) == 1 + 5 + 4


def test_tidy_csv_has_a_column_per_swept_key():
    import csv
    swept = {**RUN, "point": "p002", "point_label": "paths.A.delay=50ms", "params": {"paths.A.delay": "50ms"}}
    rows = list(csv.DictReader(render_csv([swept]).splitlines()))
    assert list(rows[0])[:4] == ["run_id", "point", "label", "paths.A.delay"]
    assert {(r["point"], r["label"], r["paths.A.delay"]) for r in rows} == {("p002", "paths.A.delay=50ms", "50ms")}


def test_new_run_dir_never_reuses(tmp_path):
    a = new_run_dir(tmp_path, "s")
    b = new_run_dir(tmp_path, "s")
    assert a != b and a.parent == b.parent == tmp_path / "s"


def test_rounds_run_every_case_once_in_a_seeded_order():
    exp = parse_experiment("name: t\ntopology: {kind: dual-homed, paths: [{name: A, bw: 1}, {name: B, bw: 1}]}\n"
                           "runs: {primaries: [A, B], compare: [mptcp, tcp], repeat: 3}\n")
    jobs = plan_jobs(exp.points, range(1, 4), seed=7)
    cases = {("A", "mptcp"), ("A", "tcp"), ("B", "mptcp"), ("B", "tcp")}
    for rep in (1, 2, 3):
        assert {(j.primary, j.mode) for j in jobs if j.rep == rep} == cases
        assert [j.rep for j in jobs[(rep - 1) * 4:rep * 4]] == [rep] * 4
    assert plan_jobs(exp.points, range(1, 4), seed=7) == jobs          # the seed fixes the order
    orders = {tuple((j.primary, j.mode) for j in plan_jobs(exp.points, range(1, 2), seed=s)) for s in range(20)}
    assert len(orders) > 1                                               # and it is really shuffled
    assert jobs[0].run_id.startswith("r001-") and not jobs[0].multi_point


def test_series_from_cumulative_samples():
    s = series_from_samples([{"t": 0, "A": 0, "B": 0}, {"t": 1.0, "A": 1_250_000, "B": 0}], ["A", "B"])
    assert s == [{"t0": 0, "t": 1.0, "A": 10.0, "B": 0.0}]


def test_summary_ratio():
    tcp = {**RUN, "id": "r001-tcp-A", "mode": "tcp", "metrics": {**RUN["metrics"], "throughput_mbps": 9.25}}
    text = summary([RUN, tcp])
    assert "r001-mptcp-A" in text and "best single path (TCP on A) 9.25 Mbit/s = 2.00x" in text


def test_summary_compares_with_the_best_path_and_the_sum_not_the_primary():
    """With TCP on every path, MPTCP on the slow primary A is compared with fast path B and with A+B."""
    def run(rid, mode, primary, mbps):
        return {**RUN, "id": rid, "mode": mode, "primary": primary, "metrics": {**RUN["metrics"], "throughput_mbps": mbps}}
    lines = comparison_lines([run("m", "mptcp", "A", 11.0), run("ta", "tcp", "A", 2.0), run("tb", "tcp", "B", 10.0)])
    assert lines == ["primary A: MPTCP 11.00 Mbit/s; best single path (TCP on B) 10.00 Mbit/s = 1.10x; "
                     "sum of single paths (TCP on A+B) 12.00 Mbit/s = 0.92"]


def test_hostile_files_are_refused_fast_and_cleanly(tmp_path):
    """A YAML alias bomb, a FIFO, a link to /dev/zero, a python tag, a huge file, deep nesting."""
    levels = ['a: &a ["x","x","x","x","x","x","x","x","x"]'] + [
        f"{c}: &{c} [{', '.join(['*' + p] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi")]
    cases = {
        "bomb.yaml": ("name: t\n" + "\n".join(levels) + "\n", "aliases expand to more than"),
        "tag.yaml": ('name: t\nx: !!python/object:os.system ["true"]\n', "no tags such as !!python/object"),
        "big.yaml": ("name: t\ndescription: '" + "x" * 1_100_000 + "'\n", "may be at most 1048576"),
        "deep.yaml": ("name: t\nx: " + "[" * 3000 + "]" * 3000 + "\n", "nested too deeply"),
        "grid.yaml": ("name: t\ntopology: {kind: dual-homed, paths: [{name: A, bw: 1}]}\nsweep: "
                      "{paths.A.delay: {from: 1, step: 1, count: 1000, unit: ms}, paths.A.bw: "
                      "{from: 1, step: 1, count: 1000}}\n", "make 1000000 points; at most 10000"),
        "long.yaml": ("name: t\ntopology: {kind: dual-homed, paths: [{name: A, bw: 1}]}\ntraffic: {duration: 10}\n"
                      "sweep: {paths.A.delay: {from: 1, step: 1, count: 1000, unit: ms}}\nruns: {repeat: 1000}\n",
                      "2000000 runs would take about"),
    }
    for name, (text, expected) in cases.items():
        (tmp_path / name).write_text(text)
    import os
    os.mkfifo(tmp_path / "fifo.yaml")
    (tmp_path / "zero.yaml").symlink_to("/dev/zero")
    cases["fifo.yaml"] = cases["zero.yaml"] = (None, "is not a regular file")
    for name, (_, expected) in cases.items():
        r = cli(str(tmp_path / name), "--backend", "native", "--out", str(tmp_path / "res"))
        assert r.returncode == 2 and expected in r.stderr, (name, r.stderr[-500:])
        assert "Traceback" not in r.stderr and not (tmp_path / "res").exists(), name


def test_late_failures_are_found_before_a_result_folder_exists(tmp_path):
    scen = tmp_path / "s.yaml"
    scen.write_text("name: s\ntopology: {kind: dual-homed, paths: [{name: A, bw: 1}]}\nrequires: {kernel: '>=99'}\n")
    r = cli(str(scen), "--backend", "vm", "--out", str(tmp_path / "o"))
    assert r.returncode == 1 and "no kernel in /boot meets it (installed:" in r.stderr, r.stderr
    assert not (tmp_path / "o").exists()
    good = str(REPO / "scenarios" / "two-paths.yaml")
    r = cli(good, "--backend", "vm", "--out", "/proc/no-results-here")
    assert r.returncode == 2 and "--out /proc/no-results-here: cannot write in /proc" in r.stderr
    r = cli(good, "--backend", "vm", "--baseline", str(tmp_path / "nothing"), "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "not a result set (no results.json)" in r.stderr
    assert not (tmp_path / "o" / "two-paths").exists()


def cli(*args, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "runners.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("content,field", [
    ("name: t\ntopology: {kind: dual-homed, paths: [{name: A, bw: -1}]}\n", "topology.paths[0].bw"),
    ("name: t\ntopology: {kind: dual-homed, paths: [{name: A, bw: 1, delay: 5}]}\n", "topology.paths[0].delay"),
    ("name: t\ntopology: {kind: dual-homed, paths: [{name: A, bw: 1}]}\nmptcp: {primary: B}\n", "mptcp.primary"),
    ("name: t\ntopology: {kind: dual-homed, paths: [{name: A, bw: 1}\n", "YAML syntax error"),
    ("", "the file is empty"),
    ("name: t\ntopology: {kind: dual-homed, paths: [{name: A, bw: 1}]}\ntraffic: {tool: nosuch, duration: 1}\n",
     "traffic.tool: no tool named 'nosuch' (tools: command, iperf3)"),
])
def test_cli_bad_input_exits_2_without_traceback(tmp_path, content, field):
    f = tmp_path / "bad.yaml"
    f.write_text(content)
    r = cli(str(f), "--out", str(tmp_path / "res"))
    assert r.returncode == 2, r.stderr
    assert str(f) in r.stderr and field in r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    assert not (tmp_path / "res").exists()


def test_cli_missing_file_and_usage_errors(tmp_path):
    r = cli(str(tmp_path / "missing.yaml"))
    assert r.returncode == 2 and "missing.yaml: no such file" in r.stderr
    assert cli().returncode == 2
    assert cli("scenarios/two-paths.yaml", "--repeat", "0").returncode == 2
    assert cli("scenarios/two-paths.yaml", "--backend", "cloud").returncode == 2


def test_cli_check_and_schema():
    r = cli("--check", *[str(p) for p in sorted((REPO / "scenarios").glob("*.yaml"))])
    assert r.returncode == 0, r.stderr
    schema = json.loads(cli("--schema").stdout)
    assert schema["title"].startswith("MPTCP testbed scenario") and "topology" in schema["required"]


def test_help_documents_backends_and_exit_codes():
    out = cli("--help").stdout
    for word in ("--backend", "--out", "--repeat", "--kernel", "exit codes", "native", "vm", "auto"):
        assert word in out


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root; the test machines run as root")
def test_results_belong_to_the_user_who_ran_sudo(tmp_path):
    from runners.cli.run import hand_over

    d = new_run_dir(tmp_path, "two-paths")
    ResultStore(d).add_run({**RUN, "id": "r001"})   # a set with a run: `latest` points at it
    ResultStore(d).flush_raw()
    (d / "raw" / "r001").mkdir(parents=True, exist_ok=True)
    (d / "raw" / "r001" / "run.json").write_text("{}")
    hand_over(d, env={"SUDO_UID": "4242", "SUDO_GID": "4343"})
    for p in (d, d / "raw" / "r001" / "run.json", d.parent, d.parent / "latest"):
        st = os.lstat(p)
        assert (st.st_uid, st.st_gid) == (4242, 4343), p
    assert os.stat(tmp_path).st_uid == 0          # only what the run made
    hand_over(d, env={"SUDO_UID": "x; rm -rf /", "SUDO_GID": "1"})   # not a number: nothing happens
