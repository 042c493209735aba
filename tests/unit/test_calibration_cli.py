"""The calibration on the command line: --check, --dry-run and a run compare the plan with this machine's
calibration and warn; --strict-fidelity refuses a plan beyond it (exit 2, nothing started) and ends a set
with unfaithful runs with exit 1 naming them; `run-scenario calibrate`'s own command line. Fixtures only:
the backend is pinned to native on this kernel, the calibration is a file in a temporary folder."""
from __future__ import annotations

import json
import platform
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from runners import cli
from runners.backends.vm import guest
from runners.cli import plan_check
from runners.errors import EXIT_FAIL, EXIT_INPUT, EXIT_OK
from runners.results.fidelity import OK, UNFAITHFUL
from runners.runset import calibration as cal
from runners.runset import calibration_search as search

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "tests" / "fixtures" / "calibration"


@pytest.fixture
def here(tmp_path, monkeypatch):
    """A machine whose runs are native on this kernel, its calibrations in a temporary folder; the
    calibration file's path (not written yet) and an overload scenario (4 x 300 Mbit/s)."""
    monkeypatch.setenv("TESTBED_CALIBRATION_DIR", str(tmp_path / "cal"))
    monkeypatch.setattr(plan_check, "_SAID", set())
    monkeypatch.setattr("runners.cli.run.estimate_backend", lambda requested, exp: ("native", None))
    overload = tmp_path / "overload.yaml"
    overload.write_text(search.paths_yaml(4, 300, mptcp=True))
    return SimpleNamespace(file=cal.file_for("native", platform.release()), overload=overload, tmp=tmp_path)


def calibrated(here) -> None:
    here.file.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(FIX / "tcg-vm.json", here.file)


def test_check_warns_naming_the_paths_and_the_limit(here, capsys):
    calibrated(here)
    assert cli.main(["--check", str(here.overload)]) == EXIT_OK
    err = capsys.readouterr().err
    assert f"warning: {here.overload}: paths A (300 Mbit/s), B (300 Mbit/s), C (300 Mbit/s), D (300 Mbit/s): beyond " \
           "the 220 Mbit/s one path carries faithfully here" in err
    assert "ask 1200 Mbit/s in all: beyond the 240 Mbit/s that 4 paths at once carry faithfully here (4 x 60)" in err
    assert f"(calibration of 2026-11-25: native, kernel {platform.release()})" in err


def test_strict_fidelity_makes_check_and_dry_run_refuse_a_plan_beyond_it(here, capsys):
    calibrated(here)
    assert cli.main(["--check", "--strict-fidelity", str(here.overload)]) == EXIT_INPUT
    out, err = capsys.readouterr()
    assert "error: " in err and "--strict-fidelity: refused" in err and ": ok (" not in out
    assert cli.main(["--dry-run", "--strict-fidelity", str(here.overload)]) == EXIT_INPUT
    assert cli.main(["--dry-run", str(here.overload)]) == EXIT_OK
    assert "warning: " in capsys.readouterr().err
    assert cli.main(["--check", "--strict-fidelity", str(REPO / "scenarios" / "two-paths.yaml")]) == EXIT_OK


def test_without_a_calibration_it_says_so_once_and_names_the_command(here, capsys):
    two = REPO / "scenarios" / "two-paths.yaml"
    assert cli.main(["--check", str(here.overload), str(two)]) == EXIT_OK
    out = capsys.readouterr()
    # a note is progress (stdout; -q leaves it out), not a warning
    assert out.out.count("no calibration of this machine") == 1 and "`run-scenario calibrate --backend native`" in out.out
    assert "warning" not in out.err and "calibration" not in out.err


def test_a_strict_run_beyond_the_calibration_starts_nothing(here, capsys, monkeypatch):
    from runners.backends.choice import BackendChoice

    calibrated(here)
    monkeypatch.setattr("runners.backends.choice.choose_backend", lambda requested, scenarios: BackendChoice("native"))
    monkeypatch.setattr("runners.cli.run._before_anything_starts",
                        lambda *a: pytest.fail("the run went on past the plan's check"))
    out = here.tmp / "results"
    assert cli.main([str(here.overload), "--strict-fidelity", "--out", str(out)]) == EXIT_INPUT
    assert not out.exists()
    assert "--strict-fidelity: refused" in capsys.readouterr().err


def test_a_run_beyond_the_calibration_without_strict_warns_and_goes_on(here, capsys, monkeypatch):
    from runners.backends.choice import BackendChoice

    calibrated(here)
    monkeypatch.setattr("runners.backends.choice.choose_backend", lambda requested, scenarios: BackendChoice("native"))
    went_on = []
    monkeypatch.setattr("runners.cli.run._before_anything_starts", lambda *a: went_on.append(1) or "stop here")
    assert cli.main([str(here.overload), "--out", str(here.tmp / "results")]) == EXIT_FAIL   # "stop here"
    assert went_on and "warning: " in capsys.readouterr().err


def test_strict_fidelity_stays_on_the_host():
    """The host compares the plan before its guest starts and ends the set after it: the guest runs the
    set to its end, and a guest's exit 1 would read as a kernel's runs failed."""
    assert guest.HOST_ONLY["strict_fidelity"] is False and "strict_fidelity" not in guest.passed_on()


def test_a_strict_set_with_unfaithful_runs_ends_with_exit_1_naming_them(tmp_path, capsys):
    from runners.analysis.report import summary_and_report

    from .test_experiments import fake_result_set

    d = fake_result_set(tmp_path, "set", {"p001"}, reps=(1, 3))
    doc = json.loads((d / "results.json").read_text())
    for r in doc["runs"]:
        r["fidelity"] = {"status": UNFAITHFUL if r["repeat"] == 3 else OK, "reasons": ["x"], "levels": [UNFAITHFUL]}
    (d / "results.json").write_text(json.dumps(doc))
    options = SimpleNamespace(baseline=None, svg=False, no_plots=True, junit=None, strict_fidelity=True)
    code = summary_and_report(d, options, EXIT_OK)
    err = capsys.readouterr().err
    bad = [r["id"] for r in doc["runs"] if r["repeat"] == 3]
    assert f"--strict-fidelity: {len(bad)} run(s) unfaithful: {', '.join(bad)}" in err
    # the verdicts leave the unfaithful runs out and pass; strict turns the set's end into 1
    assert code == EXIT_FAIL
    assert summary_and_report(d, SimpleNamespace(**{**vars(options), "strict_fidelity": False}), EXIT_OK) == EXIT_OK
    assert len(json.loads((d / "results.json").read_text())["runs"]) == len(doc["runs"])   # records kept


@pytest.mark.parametrize("argv, says", [
    (["--seconds", "1"], "--seconds must be between 2 and 30"),
    (["--budget", "5"], "--budget must be between 30 and 3600"),
    (["--host-rate", "0"], "--host-rate must be between 1 and 10000"),
    (["--backend", "native", "--kernel", "6.1"], "--kernel, --vm-cpus and --vm-memory are for the vm backend"),
])
def test_calibrates_bad_command_lines_exit_2(argv, says, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["calibrate", *argv])
    assert e.value.code == EXIT_INPUT and says in capsys.readouterr().err


def test_the_run_help_names_calibrate_and_strict_fidelity(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert "run-scenario calibrate" in out and "--strict-fidelity" in out and "calibration:" in out


def test_the_probes_run_as_guest_jobs_and_what_they_found_is_written(tmp_path, monkeypatch):
    """calibrate --in-guest DIR: each probe a folder with its scenario and a job file run as the warm VM
    runs a job (here a stand-in machine that carries 200 Mbit/s, 150 on one path, 5 clients), and
    measured.json with every limit and probe."""
    import inspect
    import os

    from scenarios.spec.loader import parse_scenario

    from runners.backends.vm import warm_guest
    from runners.cli import calibrate

    def machine(job: Path, spec: dict) -> dict:
        assert spec == json.loads(job.read_text())
        assert spec["argv"][1] == "--guest-job" and json.loads(Path(spec["argv"][2]).read_text())["no_report"]
        topo = parse_scenario((job.parent / "scenario.yaml").read_text(), "s.yaml").topology
        if topo.kind == "dual-homed":
            n, rate = len(topo.paths), topo.paths[0].bw
            ok = rate <= 150 and n * rate <= 200
        else:
            n, rate = len(topo.clients), 10
            ok = n <= 5
        flows = n if topo.kind == "dual-homed" else 1    # a TCP flow on each path, a run record each
        (job.parent / "results.json").write_text(json.dumps({"runs": [{"status": "ok", "metrics": {
            "throughput_mbps": 0.93 * n * rate / flows}, "fidelity": {
                "status": OK if ok else UNFAITHFUL, "reasons": [],
                "checks": {"delay": {"A": {"excess_ms": 0.7}}}}}] * flows}))
        return {"code": 0}

    # the stand-in is called as the real one is (it once took the job file alone, and calibrate followed it
    # while the warm guest's run_job had gained the job's contents: calibrate failed on every machine)
    assert list(inspect.signature(machine).parameters) == list(inspect.signature(warm_guest.run_job).parameters)

    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(warm_guest, "preload_testbed", lambda: None)
    monkeypatch.setattr(warm_guest, "run_job", machine)
    assert cli.main(["calibrate", "--in-guest", str(tmp_path)]) == EXIT_OK
    doc = json.loads((tmp_path / calibrate.MEASURED).read_text())
    paths = doc["limits"]["paths"]
    assert paths["1"]["value"] <= 150 < paths["1"]["failed_at"]
    for n in ("2", "4", "8"):
        assert paths[n]["value"] * int(n) <= 200 < paths[n]["failed_at"] * int(n)
    assert (doc["limits"]["hosts"]["value"], doc["limits"]["hosts"]["failed_at"]) == (5, 6)
    assert doc["limits"]["delay"]["median_ms"] == 0.7 and doc["settings"]["probe_seconds"] == search.PROBE_SECONDS
    assert len(doc["probes"]) == len(list(tmp_path.glob("*/scenario.yaml"))) == sum(
        b["probes"] for b in [*paths.values(), doc["limits"]["hosts"]])
