"""Kernels as a sweep dimension (no root, no VM): names resolved to images, points expanded per kernel,
verdicts and baselines across kernels, the native backend's refusal, and the kernel columns."""
import csv
import io
import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from scenarios.spec.loader import ScenarioError, parse_experiment

from runners.analysis.report import make_report, render_stats_csv
from runners.analysis.summary import refused_kernels, summary
from runners.analysis.verdicts import ACROSS_KERNELS, FAIL, INCONCLUSIVE, PASS, evaluate_points, regressions
from runners.backends.vm.kernels import (KernelNotFound, header_release, image_release, kernel_groups, modules_for,
    native_refusal, resolve_kernel, stage_image)
from runners.results.derived import group_runs
from runners.results.store import ResultStore
from runners.results.table import render_csv

REPO = Path(__file__).resolve().parents[2]


def run_options(argv: list[str]):
    """The RunOptions of a run's command line, as the run command freezes them (no checks)."""
    from runners.cli.run import build_parser
    from runners.runset.options import RunOptions

    args = build_parser().parse_args(argv)
    args.capture_spec, args.argv, args.started_at, args.process_age = None, argv, 0.0, 0.0
    return RunOptions.from_args(args)


BASE = """name: k
topology:
  kind: dual-homed
  paths:
    - {name: A, bw: 10, delay: 5ms}
    - {name: B, bw: 10, delay: 5ms}
traffic: {duration: 2}
"""


def fake_bzimage(path: Path, release: str) -> Path:
    """The first bytes of an x86 bzImage: 'HdrS' at 0x202, the version string's offset (- 0x200) at 0x20E."""
    head = bytearray(0x1000)
    head[0x202:0x206] = b"HdrS"
    struct.pack_into("<H", head, 0x20E, 0x400)
    text = f"{release} (someone@example.org) #1 SMP PREEMPT_DYNAMIC".encode()
    head[0x600:0x600 + len(text)] = text
    path.write_bytes(bytes(head))
    return path


def boot_dir(tmp_path: Path) -> Path:
    boot = tmp_path / "boot"
    boot.mkdir()
    for rel in ("6.1.0-56-amd64", "6.12.95+deb12-amd64", "6.12.9+deb12-amd64"):
        fake_bzimage(boot / f"vmlinuz-{rel}", rel)
    return boot


def test_release_prefixes_name_the_newest_matching_kernel_and_paths_name_an_image(tmp_path):
    boot = boot_dir(tmp_path)
    assert resolve_kernel("6.1", boot=boot).name == "vmlinuz-6.1.0-56-amd64"     # not 6.12
    assert resolve_kernel("6.12", boot=boot).name == "vmlinuz-6.12.95+deb12-amd64"   # the newest 6.12
    assert resolve_kernel("6.12.9", boot=boot).name == "vmlinuz-6.12.9+deb12-amd64"
    own = fake_bzimage(tmp_path / "bzImage", "6.18.0-rc1-mine")
    assert resolve_kernel("./bzImage", base=tmp_path, boot=boot) == own.resolve()   # relative to the scenario
    assert image_release(own) == "6.18.0-rc1-mine"      # from the header: the file is just `bzImage`
    with pytest.raises(KernelNotFound, match=r"kernel 6.13: no kernel in .* \(installed: 6.1.0-56-amd64, "
                                             r"6.12.9\+deb12-amd64, 6.12.95\+deb12-amd64\)"):
        resolve_kernel("6.13", boot=boot)
    with pytest.raises(KernelNotFound, match="no such kernel image"):
        resolve_kernel("./nope/bzImage", base=tmp_path, boot=boot)


def test_the_release_is_read_from_a_real_debian_image_header():
    images = sorted(Path("/boot").glob("vmlinuz-*"))
    if not images:
        pytest.skip("no kernel in /boot on this machine")
    for image in images:
        assert header_release(image) == image.name.removeprefix("vmlinuz-")


def test_modules_are_found_in_an_install_mod_path_or_the_release_folder_and_staged_beside_the_image(tmp_path):
    mods = tmp_path / "mods" / "lib" / "modules" / "6.18.0-mine"
    (mods / "kernel").mkdir(parents=True)
    (mods / "modules.order").write_text("")
    assert modules_for("6.18.0-mine", tmp_path / "mods") == mods          # INSTALL_MOD_PATH
    assert modules_for("6.18.0-mine", mods) == mods                        # the release folder itself
    assert modules_for("6.1.0-56-amd64", tmp_path / "mods") is None
    image = fake_bzimage(tmp_path / "bzImage", "6.18.0-mine")
    staged = stage_image(image, "6.18.0-mine", mods, tmp_path / "root")
    # virtme-ng walks up from the image to the folder holding lib/modules/<release>
    assert staged == tmp_path / "root" / "boot" / "vmlinuz-6.18.0-mine" and staged.resolve() == image.resolve()
    assert (tmp_path / "root" / "lib" / "modules" / "6.18.0-mine").resolve() == mods.resolve()


def test_a_kernel_sweep_makes_a_point_per_kernel_as_written(tmp_path):
    exp = parse_experiment(BASE + "sweep: {kernel: [6.1, 6.10, 6.12], paths.A.delay: [5ms, 50ms]}\n")
    assert [p.kernel for p in exp.points] == ["6.1", "6.1", "6.10", "6.10", "6.12", "6.12"]   # 6.10 is not 6.1
    assert exp.points[0].label == "kernel=6.1, paths.A.delay=5ms"
    assert all(p.scenario.model_dump() == exp.points[0].scenario.model_dump() for p in exp.points[::2])
    assert list(kernel_groups(exp.points)) == ["6.1", "6.10", "6.12"]


def test_the_command_line_kernels_replace_the_scenarios_sweep():
    exp = parse_experiment(BASE + "sweep: {kernel: [6.1, 6.12]}\n", kernels=["6.12", "/k/bzImage"])
    assert [p.kernel for p in exp.points] == ["6.12", "/k/bzImage"]
    exp = parse_experiment(BASE, kernels=["6.1", "6.12"])
    assert [p.label for p in exp.points] == ["kernel=6.1", "kernel=6.12"]
    assert len(parse_experiment(BASE, kernels=["6.12"]).points) == 1      # one --kernel: no sweep, as before


@pytest.mark.parametrize("extra, message", [
    ("sweep: {kernel: [6.1, '6.1;reboot']}\n", "sweep.kernel[1] (line 8): '6.1;reboot' is not a kernel"),
    ("sweep: {kernel: [6.1, 6.1]}\n", "sweep.kernel (line 8): lists a kernel twice"),
    ("sweep: {kernel: {from: 6, step: 1, count: 2}}\n", "sweep.kernel (line 8): list the kernels"),
    ("expect: [{check: 'mptcp@6.12.throughput_mbps >= mptcp@6.1.throughput_mbps'}]\n",
     "names kernel 6.12, but the scenario does not sweep kernels"),
    ("sweep: {kernel: [6.1, 6.12]}\nexpect: [{check: 'mptcp@6.6.throughput_mbps >= mptcp@6.1.throughput_mbps'}]\n",
     "kernel 6.6 is not among the swept kernels (6.1, 6.12)"),
    ("sweep: {kernel: [6.1, 6.12]}\nexpect: [{check: 'mptcp@6.12.seconds <= tcp.seconds'}]\n",
     "name a kernel on both sides"),
])
def test_bad_kernel_sweeps_and_checks_are_refused_with_the_field(extra, message):
    with pytest.raises(ScenarioError) as e:
        parse_experiment(BASE + extra, "s.yaml")
    assert message in e.value.render()


def run(point, label, kernel_label, release, mode, value, rep, **params):
    return {"id": f"{point}-r{rep:03d}-{mode}-A", "point": point, "point_label": label, "mode": mode,
            "repeat": rep, "primary": "A", "status": "ok", "kernel": release,
            "params": {"kernel": kernel_label, **params} if kernel_label else dict(params),
            "metrics": {"throughput_mbps": value, "subflows": 2}}


def two_kernel_runs(new: list[float], old: list[float]) -> dict:
    runs = [run("p001", "kernel=6.1", "6.1", "6.1.0-56-amd64", "mptcp", v, i + 1) for i, v in enumerate(old)]
    runs += [run("p002", "kernel=6.12", "6.12", "6.12.95+deb12-amd64", "mptcp", v, i + 1) for i, v in enumerate(new)]
    return {"runs": runs}


@pytest.mark.parametrize("new, outcome", [([18.9, 19.0, 19.1], PASS), ([12.0, 12.2, 12.1], FAIL),
                                          ([19.0], INCONCLUSIVE)])
def test_a_cross_kernel_check_compares_the_points_that_differ_only_in_their_kernel(new, outcome):
    exp = parse_experiment(BASE + "sweep: {kernel: [6.1, 6.12]}\nexpect:\n  - name: no-regression\n"
                           "    check: mptcp@6.12.throughput_mbps >= 0.95 * mptcp@6.1.throughput_mbps\n")
    [v] = evaluate_points(exp.scenario, group_runs(two_kernel_runs(new, [19.0, 19.1, 18.9])))
    assert (v.point, v.label, v.kind, v.outcome) == ("p001+p002", "base", ACROSS_KERNELS, outcome)
    assert (v.n_left, v.n_right) == (len(new), 3)


def test_cross_kernel_checks_group_by_the_other_parameters():
    runs = []
    for i, (kl, rel) in enumerate((("6.1", "6.1.0-56-amd64"), ("6.12", "6.12.95+deb12-amd64"))):
        for j, delay in enumerate(("5ms", "50ms")):
            pid = f"p00{2 * i + j + 1}"
            value = 10.0 if delay == "5ms" else (8.0 if kl == "6.1" else 4.0)   # 6.12 is worse at 50 ms only
            runs += [run(pid, f"kernel={kl}, paths.A.delay={delay}", kl, rel, "mptcp", value + d, r + 1,
                         **{"paths.A.delay": delay}) for r, d in enumerate((0.0, 0.1, -0.1))]
    exp = parse_experiment(BASE + "sweep: {kernel: [6.1, 6.12], paths.A.delay: [5ms, 50ms]}\nexpect:\n"
                           "  - check: mptcp@6.12.throughput_mbps >= 0.95 * mptcp@6.1.throughput_mbps\n")
    verdicts = {v.label: v for v in evaluate_points(exp.scenario, group_runs({"runs": runs}))}
    assert verdicts["paths.A.delay=5ms"].outcome == PASS and verdicts["paths.A.delay=5ms"].point == "p001+p003"
    assert verdicts["paths.A.delay=50ms"].outcome == FAIL


def test_a_kernel_given_by_path_is_named_by_its_release_in_a_check():
    runs = [run("p001", "kernel=6.1", "6.1", "6.1.0-56-amd64", "mptcp", v, i + 1) for i, v in enumerate((10, 10.1))]
    runs += [run("p002", "kernel=/k/bzImage", "/k/bzImage", "6.18.0-mine", "mptcp", v, i + 1)
             for i, v in enumerate((10, 10.1))]
    exp = parse_experiment(BASE + "sweep: {kernel: [6.1, /k/bzImage]}\nexpect:\n"
                           "  - check: mptcp@6.18.throughput_mbps >= 0.9 * mptcp@6.1.throughput_mbps\n")
    [v] = evaluate_points(exp.scenario, group_runs({"runs": runs}))
    assert v.outcome == PASS and (v.n_left, v.n_right) == (2, 2)


def test_a_baseline_from_another_kernel_lines_up_point_by_point():
    now = {"runs": [run("p001", "base", None, "6.12.95+deb12-amd64", "mptcp", v, i + 1)
                    for i, v in enumerate((12.0, 12.1, 11.9))]}
    then = {"runs": [run("p001", "base", None, "6.1.0-56-amd64", "mptcp", v, i + 1)
                     for i, v in enumerate((19.0, 19.1, 18.9))]}
    [v] = regressions(group_runs(now), group_runs(then), metrics=("throughput_mbps",))
    assert v.outcome == FAIL and "kernel 6.12.95+deb12-amd64 against 6.1.0-56-amd64" in v.detail
    # a sweep's point on 6.12 against a baseline point on 6.1: matched on everything but the kernel
    swept = {"runs": [run("p002", "kernel=6.12", "6.12", "6.12.95+deb12-amd64", "mptcp", v, i + 1)
                      for i, v in enumerate((19.0, 19.2, 18.8))]}
    [v] = regressions(group_runs(swept), group_runs(then), metrics=("throughput_mbps",))
    assert v.outcome == PASS and v.point == "p002"


def test_the_native_backend_refuses_other_kernels():
    exp = parse_experiment(BASE + "sweep: {kernel: [6.1, 6.12]}\n")
    why = native_refusal(exp.points, "6.12.95+deb12-amd64")
    assert why.startswith("this scenario runs on kernels 6.1, and the native backend runs only the running kernel "
                          "(6.12.95+deb12-amd64): use --backend vm")
    assert native_refusal([p for p in exp.points if p.kernel == "6.12"], "6.12.95+deb12-amd64") is None


def test_a_native_run_of_a_kernel_sweep_exits_2_before_anything_starts(tmp_path):
    f = tmp_path / "k.yaml"
    f.write_text(BASE)
    r = subprocess.run([sys.executable, "-m", "runners.cli", str(f), "--backend", "native", "--kernel", "5.4",
                        "--kernel", "5.10", "--out", str(tmp_path / "out")], cwd=REPO, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "runs on kernels 5.4, 5.10, and the native backend runs only the running kernel" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "out").exists()
    r = subprocess.run([sys.executable, "-m", "runners.cli", str(f), "--kernel", "6.1;x"], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--kernel '6.1;x' is not a kernel" in r.stderr


def test_kernel_columns_and_refusals_reach_the_csvs_and_the_summary(tmp_path):
    store = ResultStore(tmp_path)
    (tmp_path / "scenario.yaml").write_text(BASE + "sweep: {kernel: [6.1, 6.12]}\n")
    for r in two_kernel_runs([19.0, 19.1], [19.0, 19.2])["runs"]:
        store.add_run(r)
    rows = list(csv.DictReader(io.StringIO(render_csv(store.runs))))
    assert {(r["point"], r["kernel"], r["kernel_release"]) for r in rows} == {
        ("p001", "6.1", "6.1.0-56-amd64"), ("p002", "6.12", "6.12.95+deb12-amd64")}
    rep = make_report(tmp_path, plots=False)
    stats = list(csv.DictReader(io.StringIO(render_stats_csv(rep.stats))))
    assert {(r["point"], r["kernel"], r["kernel_release"]) for r in stats} == {
        ("p001", "6.1", "6.1.0-56-amd64"), ("p002", "6.12", "6.12.95+deb12-amd64")}
    meta = {"kernels": {"6.1": {"release": "6.1.0-56-amd64"}, "5.10": {"refused": "requires.kernel >=6.1: no"}}}
    assert refused_kernels(meta) == {"5.10": "requires.kernel >=6.1: no"}
    for r in store.runs:
        r["paths"] = {}
        r["metrics"].update(ofo_tcp=0, ofo_mptcp=0, retrans_segs=0)
    text = summary(store.runs, meta)
    assert "kernel 6.1: primary A: MPTCP 19.10 Mbit/s" in text and "kernel 6.12: primary A: MPTCP 19.05 Mbit/s" in text
    assert text.rstrip().endswith("kernel 5.10: not run (requires.kernel >=6.1: no)")


def test_a_kernel_whose_probe_refuses_the_scenario_is_recorded_and_the_guest_says_so(tmp_path, monkeypatch):
    """The guest of one kernel (what the VM backend starts per kernel): a refusal by that kernel's probe is
    written into metadata.json, and exit code 3 tells the host to go on with the other kernels."""
    import dataclasses
    import platform

    import runners.backends.choice
    from runners import cli
    from runners.backends.choice import BackendChoice
    from runners.backends.vm.guest import guest_command, write_job

    release = platform.release()
    f = tmp_path / "k.yaml"
    f.write_text(BASE + f"sweep: {{kernel: ['{release}', '5.4']}}\n")
    monkeypatch.setattr(runners.backends.choice, "choose_backend",
                        lambda requested, scenarios: BackendChoice("native", refusal="no sch_netem (kmod: netem)"))
    run_dir = tmp_path / "set"
    run_dir.mkdir()
    options = dataclasses.replace(run_options([str(f), "--backend", "vm"]), only_kernel=release)
    job = write_job(options, parse_experiment(f.read_text(), f), run_dir)
    (run_dir / "scenario.yaml").write_text(f.read_text())
    code = cli.main(guest_command(run_dir, job)[3:])
    assert code == 3
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert refused_kernels(meta) == {release: "no sch_netem (kmod: netem)"}


def test_a_kernels_guest_takes_the_shard_over_all_points_as_the_host_did(tmp_path):
    from runners.runset.session import open_run_set
    from scenarios.spec.sweep import shard_points

    exp = parse_experiment(BASE + "sweep: {kernel: [6.1, 6.12], paths.A.delay: [5ms, 50ms]}\n")
    host = kernel_groups(shard_points(exp.points, (1, 2)))          # p001 (6.1, 5ms), p003 (6.12, 5ms)
    assert {k: [p.id for p in pts] for k, pts in host.items()} == {"6.1": ["p001"], "6.12": ["p003"]}
    for label, ids in (("6.1", ["p001"]), ("6.12", ["p003"])):
        rs = open_run_set(exp, tmp_path / label, None, (1, 2), only_kernel=label)
        assert [p.id for p in rs.points] == ids and rs.multi_point     # run ids keep their point prefix


def test_the_report_of_a_command_line_kernel_sweep_reads_the_kernels_from_the_set(tmp_path):
    """--kernel 6.1 --kernel 6.12 on a file that names no kernel: its checks may name them, and the
    report (on the host, later, or `run-scenario report`) must expand the same points."""
    store = ResultStore(tmp_path)
    (tmp_path / "scenario.yaml").write_text(BASE + "expect:\n  - check: mptcp@6.12.subflows >= mptcp@6.1.subflows\n")
    store.set_metadata(kernel_sweep=["6.1", "6.12"])
    for r in two_kernel_runs([19.0, 19.1], [19.0, 19.2])["runs"]:
        store.add_run(r)
    [v] = make_report(tmp_path, plots=False).verdicts
    assert (v.point, v.outcome) == ("p001+p002", PASS)


def test_no_plots_writes_stats_verdicts_and_junit_but_no_figures(tmp_path):
    from runners import cli
    from runners.analysis.report import report_set

    store = ResultStore(tmp_path)
    (tmp_path / "scenario.yaml").write_text(BASE + "sweep: {kernel: [6.1, 6.12]}\n")
    for r in two_kernel_runs([19.0, 19.1], [19.0, 19.2])["runs"]:
        store.add_run(r)
    assert report_set(tmp_path, None, plots=False) == 0
    assert all((tmp_path / f).is_file() for f in ("stats.csv", "verdicts.json", "junit.xml"))
    assert not (tmp_path / "plots").exists() and not (tmp_path / "report.html").exists()
    assert cli.parse_command_line(["s.yaml", "--no-plots"])[1].no_plots


def test_the_host_refuses_a_kernel_below_requires_kernel_and_runs_the_others(tmp_path, monkeypatch):
    """The VM backend's loop over a sweep's kernels (no boot here: the guest run is replaced): a kernel
    whose release fails requires.kernel is recorded as refused, the others run."""
    import runners.backends.vm.kernels as ki
    from runners.backends.vm import host

    boot = boot_dir(tmp_path)
    real = ki.resolve_kernel
    monkeypatch.setattr(ki, "resolve_kernel", lambda label, base=None: real(label, base, boot=boot))
    booted = []
    monkeypatch.setattr(host, "_run_one_vm", lambda options, exp, run_dir, kernel, req:
                        booted.append((options.only_kernel, kernel.name, options.only_points)) or 0)
    f = tmp_path / "k.yaml"
    f.write_text(BASE + "requires: {kernel: '>=6.12'}\nsweep: {kernel: [6.1, 6.12]}\n")
    exp = parse_experiment(f.read_text(), f)
    run_dir = tmp_path / "set"
    run_dir.mkdir()
    assert host._run_vm_per_kernel(run_options([str(f)]), exp, run_dir) == 0
    assert booted == [("6.12", "vmlinuz-6.12.95+deb12-amd64", None)]
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert refused_kernels(meta) == {"6.1": "requires.kernel >=6.12: kernel 6.1.0-56-amd64 does not meet it"}


def test_until_conclusive_adds_rounds_for_checks_across_kernels(tmp_path, monkeypatch):
    """After every kernel ran, an inconclusive cross-kernel check gets one more repetition of its points
    per round, a guest per kernel (replaced here by one that records a run per point asked)."""
    import runners.backends.vm.kernels as ki
    from runners.backends.vm import host

    boot = boot_dir(tmp_path)
    real = ki.resolve_kernel
    monkeypatch.setattr(ki, "resolve_kernel", lambda label, base=None: real(label, base, boot=boot))
    values = {"6.1": [19.0, 19.4, 18.6, 19.1], "6.12": [19.0, 17.0, 20.5, 19.0]}
    calls = []

    def fake_guest(options, exp, run_dir, kernel, req):
        label = options.only_kernel
        rep = options.repeat or exp.scenario.runs.repeat
        ids = options.only_points.split(",") if options.only_points else None
        calls.append((label, rep, ids))
        store = ResultStore(run_dir)
        if (run_dir / "results.json").exists():
            store.runs = json.loads((run_dir / "results.json").read_text())["runs"]
        pid = "p001" if label == "6.1" else "p002"
        release = {"6.1": "6.1.0-56-amd64", "6.12": "6.12.95+deb12-amd64"}[label]
        for r in range(1, rep + 1) if ids is None else [rep]:
            store.add_run(run(pid, f"kernel={label}", label, release, "mptcp", values[label][r - 1], r))
        return 0

    monkeypatch.setattr(host, "_run_one_vm", fake_guest)
    f = tmp_path / "k.yaml"
    f.write_text(BASE + "sweep: {kernel: [6.1, 6.12]}\nruns: {compare: [mptcp], repeat: 2}\nexpect:\n"
                 "  - check: mptcp@6.12.throughput_mbps >= 0.5 * mptcp@6.1.throughput_mbps\n")
    exp = parse_experiment(f.read_text(), f)
    run_dir = tmp_path / "set"
    run_dir.mkdir()
    (run_dir / "scenario.yaml").write_text(f.read_text())
    assert host._run_vm_per_kernel(run_options([str(f), "--until-conclusive", "--max-repeat", "4"]), exp, run_dir) == 0
    # rounds 1-2 on each kernel (the guest's own), then round 3 on both; round 3 decides (a pass)
    assert calls == [("6.1", 2, None), ("6.12", 2, None), ("6.1", 3, ["p001"]), ("6.12", 3, ["p002"])]
    [v] = make_report(run_dir, plots=False).verdicts
    assert v.outcome == PASS and (v.n_left, v.n_right) == (3, 3)


def trixie_machine(tmp_path: Path, monkeypatch) -> Path:
    """This machine as Debian 13 sees it: one 6.12 kernel in /boot (a fake one), no 6.1."""
    from runners.backends.vm import kernels

    boot = tmp_path / "boot"
    boot.mkdir()
    fake_bzimage(boot / "vmlinuz-6.12.117+deb13-amd64", "6.12.117+deb13-amd64")
    (tmp_path / "os-release").write_text('PRETTY_NAME="Debian GNU/Linux 13 (trixie)"\nID=debian\n'
                                         'VERSION_CODENAME=trixie\n')
    monkeypatch.setattr(kernels, "BOOT", boot)
    monkeypatch.setattr(kernels, "OS_RELEASE", tmp_path / "os-release")
    return boot


def test_the_advice_names_the_distributions_package_where_it_has_one_else_a_kernel_image():
    from runners.backends.vm.kernels import how_to_add

    bookworm, trixie = ("debian", "bookworm"), ("debian", "trixie")
    assert how_to_add("6.1", bookworm).startswith("Debian 12's own kernel: apt-get install linux-image-amd64;")
    assert how_to_add("6.12", bookworm).startswith("bookworm-backports' linux-image-6.12.*-amd64 (./setup.sh")
    assert how_to_add("6.12.95", bookworm).startswith("bookworm-backports'")      # a longer prefix of 6.12
    assert how_to_add("6.12", trixie).startswith("Debian 13's own kernel: apt-get install linux-image-amd64;")
    assert how_to_add("6.1", trixie).startswith("Debian 13 packages none; Debian 12's linux-image-6.1.0-*-amd64")
    assert "--kernel PATH" in how_to_add("6.6", trixie) and "debian trixie has no package" in how_to_add("6.6", trixie)
    assert "--kernel PATH" in how_to_add("6.1", ("", ""))
    assert how_to_add("./bzImage", trixie).startswith("no image at that path")


def test_check_warns_of_a_swept_kernel_this_machine_lacks_and_passes_the_file(tmp_path, monkeypatch, capsys):
    from runners.cli import main

    boot = trixie_machine(tmp_path, monkeypatch)
    assert main(["--check", str(REPO / "scenarios" / "kernels.yaml")]) == 0
    out, err = capsys.readouterr()
    assert "kernels.yaml: ok" in out
    assert f"warning: kernel 6.1: not on this machine (kernels in {boot}: 6.12.117+deb13-amd64)" in err
    assert "to add kernel 6.1: Debian 13 packages none; Debian 12's linux-image-6.1.0-*-amd64" in err
    assert "--kernel DIR/boot/vmlinuz-<release> --modules DIR" in err
    assert "6.12:" not in err     # 6.12 is here


def test_check_refuses_a_kernel_asked_for_with_kernel_that_this_machine_lacks(tmp_path, monkeypatch, capsys):
    from runners.cli import main

    trixie_machine(tmp_path, monkeypatch)
    assert main(["--check", str(REPO / "scenarios" / "two-paths.yaml"), "--kernel", "6.1"]) == 2
    out, err = capsys.readouterr()
    assert "two-paths.yaml: --kernel 6.1: not on this machine" in err and "ok" not in out
    assert "to add kernel 6.1:" in err
    assert main(["--check", str(REPO / "scenarios" / "two-paths.yaml"), "--kernel", "6.12"]) == 0


def test_dry_run_marks_each_missing_kernels_points_and_says_how_to_add_it(tmp_path, monkeypatch, capsys):
    from runners.cli import main

    trixie_machine(tmp_path, monkeypatch)
    argv = [str(REPO / "scenarios" / "kernels.yaml"), "--dry-run", "--backend", "vm", "--variant", "two-paths",
            "--out", str(tmp_path / "o")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("p00")}
    assert "kernel here" in out.splitlines()[1]
    assert "kernel=6.1 " in rows["p001"] and rows["p001"].endswith("missing here")
    assert "kernel=6.12" in rows["p002"] and rows["p002"].endswith("6.12.117+deb13-amd64")
    assert "kernel 6.1: not on this machine" in out and "to add kernel 6.1: Debian 13 packages none" in out
    # the same sweep asked for with --kernel: a kernel the user named is not here, exit 2
    assert main([str(REPO / "scenarios" / "two-paths.yaml"), "--dry-run", "--backend", "vm", "--kernel", "6.1",
                 "--kernel", "6.12", "--out", str(tmp_path / "o")]) == 2
    assert "--kernel 6.1: not on this machine" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_a_run_refused_for_a_missing_kernel_says_how_to_add_it(tmp_path, monkeypatch):
    from scenarios.spec.loader import load_experiment

    from runners.backends.vm.kernel_sets import vm_kernels_problem

    trixie_machine(tmp_path, monkeypatch)
    problem = vm_kernels_problem(load_experiment(REPO / "scenarios" / "kernels.yaml"), None)
    assert "kernel 6.1: no kernel in" in problem and "to add it: Debian 13 packages none" in problem


def test_kernels_as_written_follow_yaml_merge_keys():
    """A merge key (`<<: *s`) puts the merged pairs before the ones written out when the values are built;
    the kernels are read back from the pair the mapping keeps."""
    exp = parse_experiment(BASE + "variants:\n  - {name: a, sweep: &s {kernel: [6.1, 6.10]}}\n"
                                  "  - {name: b, sweep: {<<: *s, kernel: [6.12]}}\n"
                                  "  - {name: c, sweep: {<<: *s}}\n")
    assert [(p.label, p.kernel) for p in exp.points] == [
        ("variant=a, kernel=6.1", "6.1"), ("variant=a, kernel=6.10", "6.10"), ("variant=b, kernel=6.12", "6.12"),
        ("variant=c, kernel=6.1", "6.1"), ("variant=c, kernel=6.10", "6.10")]
