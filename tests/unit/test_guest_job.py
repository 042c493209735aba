"""The VM's guest gets its run options from a job file the host writes from RunOptions
(runners.backends.vm.guest): every field crosses but the declared host-only ones, a new field crosses by
default, and a job file the guest cannot use is bad input (exit 2, naming the file and the key)."""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from runners import cli
from runners.backends.vm import guest
from runners.cli.run import build_parser
from runners.collect.capture import CaptureSpec
from runners.results.metadata import given_options
from runners.runset.options import RunOptions

# options of the run's parser that are not RunOptions fields: they stop before a run, become capture_spec,
# or are the guest's own command line
NOT_RUN_OPTIONS = {"check", "dry_run", "schema", "capture", "snaplen", "guest_job", "help"}


def every_field(tmp_path: Path) -> dict:
    """A value for every RunOptions field, none its default (a new field must be given one here)."""
    run_dir = tmp_path / "results" / "s" / "20261125T000000Z"
    run_dir.mkdir(parents=True)
    values = dict(scenario=["s.yaml"], out="out", backend="vm", repeat=3, kernel=["6.1", "kernels/vmlinuz-7.0"],
                  modules="mods", vm_memory="3G", vm_cpus=2, shard="1/2", resume="results/s/old", until_conclusive=True,
                  max_repeat=6, baseline="base", allow_commands=True, variant=["v1", "v2"], svg=True, no_plots=True,
                  junit="j.xml", yes=True, capture_spec=CaptureSpec(("client", "routers"), 96), verbose=True,
                  quiet=True, pause_after="run", keep_vm="5min", strict_fidelity=True, argv=["s.yaml", "--repeat", "3"], started_at=1.5, process_age=0.25,
                  run_dir=str(run_dir), scenario_file="ignored: the job takes exp.file", vm_guest=False,
                  no_report=False, no_run_log=False, only_kernel="6.1", only_points="p001,p003")
    assert set(values) == {f.name for f in dataclasses.fields(RunOptions)}
    return values


def test_the_declared_host_only_options_are_run_options_and_every_run_argument_is_one():
    names = {f.name for f in dataclasses.fields(RunOptions)}
    assert set(guest.HOST_ONLY) <= names
    assert set(guest.passed_on()) == names - set(guest.HOST_ONLY)
    dests = {a.dest for a in build_parser()._actions}
    assert dests - NOT_RUN_OPTIONS <= names, "a new run argument must become a RunOptions field"


def test_the_job_round_trip_gives_the_guest_every_option_but_the_host_only_ones(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    values = every_field(tmp_path)
    options = RunOptions(**values)
    exp = SimpleNamespace(file="mine/s.yaml")
    job = guest.write_job(options, exp, Path(values["run_dir"]))
    assert job == Path(values["run_dir"]) / guest.JOB_FILE
    assert [p.name for p in job.parent.iterdir()] == [guest.JOB_FILE]     # renamed into place: no temporary left
    doc = json.loads(job.read_text())
    assert doc["version"] == guest.JOB_VERSION and not set(doc) & set(guest.HOST_ONLY)

    back = guest.read_job(job, "/r/scenario.yaml", ["/r/scenario.yaml", "--guest-job", str(job)], 9.0, 0.5)
    made_absolute = {"baseline": str(tmp_path / "base"), "kernel": ["6.1", str(tmp_path / "kernels/vmlinuz-7.0")],
                     "run_dir": str(Path(values["run_dir"]).resolve()), "scenario_file": str(tmp_path / "mine/s.yaml")}
    the_guests_own = {"no_report": True, "no_run_log": True, "vm_guest": True}
    for name in guest.passed_on():
        assert getattr(back, name) == {**values, **made_absolute, **the_guests_own}[name], name
    for name, value in guest.HOST_ONLY.items():
        if name not in ("scenario", "argv", "started_at", "process_age"):
            assert getattr(back, name) == value, name
    assert (back.scenario, back.argv, back.started_at, back.process_age) == (
        ["/r/scenario.yaml"], ["/r/scenario.yaml", "--guest-job", str(job)], 9.0, 0.5)
    assert back.capture_spec == CaptureSpec(("client", "routers"), 96)


def test_a_new_run_option_reaches_the_guest_unless_declared_host_only(tmp_path, monkeypatch):
    @dataclasses.dataclass(frozen=True)
    class Wider(RunOptions):
        new_option: int = 0

    monkeypatch.setattr(guest, "RunOptions", Wider)
    values = every_field(tmp_path)
    job = guest.write_job(Wider(**values, new_option=5), SimpleNamespace(file="s.yaml"), Path(values["run_dir"]))
    assert json.loads(job.read_text())["new_option"] == 5
    assert guest.read_job(job, "s.yaml", [], 0.0, 0.0).new_option == 5
    monkeypatch.setitem(guest.HOST_ONLY, "new_option", 0)
    job = guest.write_job(Wider(**values, new_option=5), SimpleNamespace(file="s.yaml"), Path(values["run_dir"]))
    assert "new_option" not in json.loads(job.read_text())
    assert guest.read_job(job, "s.yaml", [], 0.0, 0.0).new_option == 0


def test_the_guests_command_line_is_the_copy_and_the_job(tmp_path):
    run_dir, job = tmp_path / "set", tmp_path / "set" / guest.JOB_FILE
    argv = guest.guest_command(run_dir, job)
    assert argv == [sys.executable, "-m", "runners.cli", str(run_dir / "scenario.yaml"), "--guest-job", str(job)]
    name, args = cli.parse_command_line(argv[3:])
    assert name == "run" and args.guest_job == str(job) and args.scenario == [str(run_dir / "scenario.yaml")]
    assert given_options(build_parser(), argv[3:]) == {"scenario", "guest_job"}


def test_the_guest_job_takes_no_other_option(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["s.yaml", "--guest-job", str(tmp_path / "j.json"), "--repeat", "2"])
    assert e.value.code == 2
    assert "--guest-job FILE takes the scenario file and nothing else" in capsys.readouterr().err


def good_job(tmp_path: Path) -> dict:
    values = every_field(tmp_path)
    return guest.job_of(RunOptions(**values), SimpleNamespace(file="s.yaml"), Path(values["run_dir"]))


@pytest.mark.parametrize("change, says", [
    (lambda job: None, "no such file"),
    (lambda job: "{not json", "not JSON"),
    (lambda job: [1, 2], "not a JSON object"),
    (lambda job: {**job, "version": 2}, "version 2, this testbed reads version 1"),
    (lambda job: {k: v for k, v in job.items() if k != "version"}, "version None"),
    (lambda job: {**job, "colour": "red"}, "unknown key 'colour'"),
    (lambda job: {**job, "out": "results"}, "unknown key 'out'"),          # host-only: never in a job
    (lambda job: {k: v for k, v in job.items() if k != "repeat"}, "key 'repeat' is missing"),
    (lambda job: {**job, "repeat": "3"}, "key 'repeat' is \"3\", not int | None"),
    (lambda job: {**job, "until_conclusive": 1}, "key 'until_conclusive' is 1, not bool"),
    (lambda job: {**job, "variant": ["a", 2]}, "key 'variant' is [\"a\", 2], not list[str] | None"),
    (lambda job: {**job, "capture_spec": {"roles": ["client"]}}, "key 'capture_spec' is {\"roles\": [\"client\"]}"),
    (lambda job: {**job, "capture_spec": {"roles": ["moon"], "snaplen": 96}}, "key 'capture_spec': --capture takes"),
    (lambda job: {**job, "run_dir": "/nonexistent/set"}, "key 'run_dir' is '/nonexistent/set', not a folder"),
])
def test_a_job_file_the_guest_cannot_use_is_bad_input_named(tmp_path, capsys, change, says):
    path = tmp_path / "guest-job.json"
    doc = change(good_job(tmp_path))
    if doc is not None:
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    assert cli.main([str(tmp_path / "scenario.yaml"), "--guest-job", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"run-scenario: error: guest job {path}: {says}" in err and "Traceback" not in err


def test_an_unreadable_job_file_is_bad_input(tmp_path, capsys):
    path = tmp_path / "guest-job.json"
    path.mkdir()    # reading a folder fails even as root
    assert cli.main([str(tmp_path / "scenario.yaml"), "--guest-job", str(path)]) == 2
    assert f"guest job {path}: cannot read it (Is a directory)" in capsys.readouterr().err
