"""--resume continues with the options its set was started with and first cleans what its killed run left;
metadata.json records the user's command line, not the VM guest's. No root, no network, no VM: the native
runner is replaced by one that writes run records, and a VM's boot (or warm job) by running the guest's
command line in this process, as the guest would."""
import json
import os
import shlex
from pathlib import Path
from types import SimpleNamespace

import pytest

from runners import cli
import runners.backends.choice
from runners.backends.choice import BackendChoice
from runners.backends.vm import boot as vm, host, warm as warmvm
from runners.cli import run
from runners.linux import leftovers
from runners.pipeline import runner as native

FIX = Path(__file__).resolve().parents[1] / "fixtures"
SCENARIO = """name: resumed
topology:
  kind: dual-homed
  paths:
    - {name: A, bw: 10, delay: 5ms}
    - {name: B, bw: 10, delay: 5ms}
traffic: {duration: 2}
runs: {repeat: 3, compare: [mptcp], primaries: [A]}
variants:
  - {name: slow, set: {paths.A.delay: 50ms}}
  - {name: fast, set: {paths.A.delay: 1ms}}
expect:
  - {name: ten, check: mptcp.throughput_mbps > 10}
"""


class FakeRunner:
    """The native runner without a network: a run record per job, its throughput 9 or 11 Mbit/s in turn
    (so `ten` stays inconclusive); after `stop_after` records in the set, a Ctrl-C."""
    stop_after: int | None = None

    def __init__(self, store, probe, **kw):
        self.store, self.phases = store, {"build": 0.0, "shaping": 0.0, "teardown": 0.0, "runs": []}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def run_jobs(self, jobs):
        proto = json.loads((FIX / "run-mptcp.json").read_text())
        for job in jobs:
            if self.stop_after is not None and len(self.store.runs) >= self.stop_after:
                raise KeyboardInterrupt
            run = json.loads(json.dumps(proto))
            run.update(id=job.run_id, repeat=job.rep, primary=job.primary, mode=job.mode, point=job.point.id,
                       point_label=job.point.label, params=job.point.params)
            run["metrics"]["throughput_mbps"] = 9.0 if len(self.store.runs) % 2 else 11.0
            self.store.add_run(run)


@pytest.fixture
def testbed(tmp_path, monkeypatch):
    """A scenario file, a results folder, the fakes in place; `guests` collects every guest's arguments."""
    FakeRunner.stop_after = None
    guests = []
    kernel = tmp_path / "vmlinuz-6.1.0-56-amd64"
    kernel.write_text("")
    monkeypatch.setattr(native, "NativeRunner", FakeRunner)
    monkeypatch.setattr(runners.backends.choice, "choose_backend", lambda requested, scenarios: BackendChoice("vm")
                        if requested == "vm" else BackendChoice("native", probe=SimpleNamespace(facts={})))
    monkeypatch.setattr(vm, "choose_kernel", lambda kernel_arg, requirement, base=None: kernel)
    monkeypatch.setattr(vm, "vng_binary", lambda: "vng")
    monkeypatch.setattr(vm, "kvm_usable", lambda: (False, "no usable /dev/kvm"))
    monkeypatch.setattr(vm, "kernel_release", lambda image: "6.1.0-56-amd64")

    def guest(argv):   # what the guest runs: run-scenario's main() (a warm VM's job calls it so too)
        guests.append(list(argv))
        return cli.main(list(argv))
    monkeypatch.setattr(vm, "run_in_vm", lambda plan, **kw: guest(plan.guest_argv[3:]))
    monkeypatch.setattr(warmvm, "submit", lambda warm, argv, out=None, **kw: guest(argv))
    monkeypatch.setattr(host, "_usable_warm_vm", lambda plan, options: None)
    # what `clean` would find on this machine: only the temporary folders made here
    for name in ("leftover_processes", "leftover_netns", "leftover_links", "leftover_bridges"):
        monkeypatch.setattr(leftovers, name, lambda *a: [])
    monkeypatch.setattr(leftovers, "OWN_OVS_PARENT", tmp_path / "run")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(leftovers.tempfile, "gettempdir", lambda: str(tmp))
    monkeypatch.delenv("TESTBED_IN_VM", raising=False)
    f = tmp_path / "resumed.yaml"
    f.write_text(SCENARIO)
    return SimpleNamespace(file=f, out=tmp_path / "results", tmp=tmp, guests=guests, kernel=kernel)


@pytest.fixture
def no_report(monkeypatch):
    """A native set without its summary and report (what the hidden --no-report was used for here): `ten`'s
    verdict, and so the exit code, would depend on the shuffled order of the fake 9 and 11 Mbit/s runs."""
    import runners.analysis.report
    monkeypatch.setattr(runners.analysis.report, "summary_and_report", lambda run_dir, options, code: code)


def use_warm_vm(monkeypatch):
    monkeypatch.setattr(host, "_usable_warm_vm", lambda plan, options: SimpleNamespace(state=lambda: {},
                                                                                       shares=lambda folder: True))


def newest_set(tb) -> Path:
    return (tb.out / "resumed" / "latest").resolve()


def metadata(run_dir: Path) -> dict:
    return json.loads((run_dir / "metadata.json").read_text())


def runs(run_dir: Path) -> list[tuple[str, int]]:
    return sorted((r["point_label"], r["repeat"]) for r in json.loads((run_dir / "results.json").read_text())["runs"])


@pytest.mark.parametrize("how", ["booted", "warm"])
def test_a_vm_run_records_the_users_command_line_not_the_guests(testbed, monkeypatch, how):
    if how == "warm":
        use_warm_vm(monkeypatch)
    argv = [str(testbed.file), "--backend", "vm", "--repeat", "1", "--variant", "slow", "--no-plots",
            "--out", str(testbed.out)]
    assert cli.main(argv) == 0
    run_dir = newest_set(testbed)
    meta = metadata(run_dir)
    assert meta["command_line"] == shlex.join(["run-scenario", *argv]) and meta["cwd"] == os.getcwd()
    assert meta["argv"] == ["run-scenario", *argv]
    [guest] = testbed.guests
    assert meta["guest_argv"] == guest == [str(run_dir / "scenario.yaml"), "--guest-job", str(run_dir / "guest-job.json")]
    job = json.loads((run_dir / "guest-job.json").read_text())
    assert (job["run_dir"], job["vm_guest"], job["repeat"], job["variant"]) == (str(run_dir), True, 1, ["slow"])
    assert meta["backend"] == "vm" and meta["vm"]["warm"] == (how == "warm")
    assert json.loads((run_dir / "results.json").read_text())["metadata"]["command_line"] == meta["command_line"]


def test_a_native_run_records_the_users_command_line(testbed, no_report):
    argv = [str(testbed.file), "--backend", "native", "--repeat", "1", "--no-plots", "--out", str(testbed.out)]
    assert cli.main(argv) == 0
    meta = metadata(newest_set(testbed))
    assert meta["command_line"] == shlex.join(["run-scenario", *argv]) and "guest_argv" not in meta
    assert meta["run_options"] == {"repeat": 1, "variant": None, "until_conclusive": False, "max_repeat": 10}


@pytest.mark.parametrize("backend", ["native", "vm"])
def test_resume_continues_with_the_options_the_set_was_started_with(testbed, capsys, backend):
    """Started with --repeat 2 (the file says 3), one variant of two, --until-conclusive up to 4: stopped
    after one run, the resume runs that variant only, two rounds, then rounds 3 and 4 while `ten` is
    inconclusive."""
    FakeRunner.stop_after = 1
    start = [str(testbed.file), "--backend", backend, "--repeat", "2", "--variant", "slow", "--until-conclusive",
             "--max-repeat", "4", "--no-plots", "--out", str(testbed.out)]
    assert cli.main(start) == 130
    run_dir = newest_set(testbed)
    assert runs(run_dir) == [("variant=slow", 1)]
    FakeRunner.stop_after = None
    capsys.readouterr()
    resume = ["--resume", str(run_dir), "--backend", backend, "--no-plots"]
    assert cli.main(resume) in (0, 1)   # 1: `ten` is still inconclusive after round 4 (a failed verdict)
    out = capsys.readouterr().out
    assert ("resume: continuing as the set was started: --repeat 2, --variant slow, --until-conclusive, "
            "--max-repeat 4") in out
    assert runs(run_dir) == [("variant=slow", r) for r in (1, 2, 3, 4)]
    meta = metadata(run_dir)
    assert meta["run_options"] == {"repeat": 2, "variant": ["slow"], "until_conclusive": True, "max_repeat": 4}
    assert meta["command_line"] == shlex.join(["run-scenario", *start])
    assert [r["command_line"] for r in meta["resumes"]] == [shlex.join(["run-scenario", *resume])]
    if backend == "vm":   # what the host handed the resumed set's guest
        job = json.loads(Path(testbed.guests[-1][-1]).read_text())
        assert {k: job[k] for k in ("repeat", "max_repeat", "variant", "until_conclusive", "run_dir")} == {
            "repeat": 2, "max_repeat": 4, "variant": ["slow"], "until_conclusive": True, "run_dir": str(run_dir)}


def test_an_option_given_again_with_resume_is_used_and_said(testbed, no_report, capsys):
    start = [str(testbed.file), "--backend", "native", "--repeat", "1", "--variant", "slow", "--no-plots",
             "--out", str(testbed.out)]
    assert cli.main(start) == 0
    run_dir = newest_set(testbed)
    capsys.readouterr()
    assert cli.main(["--resume", str(run_dir), "--backend", "native", "--repeat", "2", "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert "resume: continuing as the set was started: --variant slow" in out
    assert "resume: --repeat 2 as given (the set was started with --repeat 1)" in out
    assert runs(run_dir) == [("variant=slow", 1), ("variant=slow", 2)]
    assert metadata(run_dir)["run_options"]["repeat"] == 2


def test_another_variant_with_resume_is_refused(testbed, no_report, capsys):
    assert cli.main([str(testbed.file), "--backend", "native", "--repeat", "1", "--variant", "slow", "--no-plots",
                     "--out", str(testbed.out)]) == 0
    run_dir = newest_set(testbed)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--resume", str(run_dir), "--variant", "fast"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert (f"--resume {run_dir}: the set was started with --variant slow; --variant fast would mix other points "
            "into it") in err and "Traceback" not in err
    assert runs(run_dir) == [("variant=slow", 1)]


def test_a_set_recorded_before_run_options_resumes_with_its_repeat(testbed, no_report, capsys):
    """The issue's case: metadata.json had `repeat` (2) and the resume took the file's 3."""
    assert cli.main([str(testbed.file), "--backend", "native", "--repeat", "2", "--no-plots",
                     "--out", str(testbed.out)]) == 0
    run_dir = newest_set(testbed)
    meta = metadata(run_dir)
    del meta["run_options"]
    (run_dir / "metadata.json").write_text(json.dumps(meta))
    assert cli.main(["--resume", str(run_dir), "--backend", "native", "--no-plots"]) == 0
    assert "resume: continuing as the set was started: --repeat 2" in capsys.readouterr().out
    assert len(runs(run_dir)) == 4    # two variants, two rounds: nothing more


def killed_set(tb, other: Path) -> tuple[Path, Path, Path]:
    """A set SIGKILLed during its cold boot (no status), its guest's temporary folder, and another's."""
    run_dir = tb.out / "resumed" / "20261125T000000Z"
    run_dir.mkdir(parents=True)
    (run_dir / "scenario.yaml").write_text(SCENARIO)
    (run_dir / "metadata.json").write_text(json.dumps({"scenario": "resumed", "backend": "vm"}))
    folders = []
    for name, target in (("testbed-vm-cmd-mine", run_dir), ("testbed-vm-cmd-theirs", other)):
        plan = vm.VmPlan(kernel=tb.kernel, kvm=False, accel_reason="", memory="2G", cpus=2, rwdirs=(str(target),),
                         guest_argv=("python", "-m", "runners.cli", str(target / "scenario.yaml"), "--guest-job",
                                     str(target / "guest-job.json")))
        (tb.tmp / name).mkdir()
        (tb.tmp / name / vm.GUEST_SCRIPT).write_text(plan.guest_script())
        folders.append(tb.tmp / name)
    return run_dir, *folders


def test_a_vm_resume_after_a_sigkill_removes_what_that_run_left(testbed, capsys):
    run_dir, mine, theirs = killed_set(testbed, testbed.out / "other" / "20261125T000000Z")
    assert cli.main(["--resume", str(run_dir), "--backend", "vm", "--repeat", "1", "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert f"resume: removed what the killed run left: temporary folder {mine}" in out
    assert not mine.exists() and theirs.exists()     # another run's may be in use: listed, not removed
    assert f"resume: also left behind on this machine (by another run, or one still going):\n  - temporary " \
           f"folder {theirs}" in out
    assert len(runs(run_dir)) == 2 and metadata(run_dir)["status"] == "ok"


def test_a_native_resume_after_a_sigkill_removes_its_own_and_refuses_while_others_are_left(testbed, no_report, capsys):
    run_dir, mine, theirs = killed_set(testbed, testbed.out / "other" / "20261125T000000Z")
    assert cli.main(["--resume", str(run_dir), "--backend", "native", "--no-plots"]) == 1
    captured = capsys.readouterr()
    assert f"resume: removed what the killed run left: temporary folder {mine}" in captured.out
    assert not mine.exists() and theirs.exists()
    assert f"  - temporary folder {theirs}\nremove them with `run-scenario clean --yes`" in captured.err
    assert not (run_dir / "results.json").exists()


def test_a_resumed_set_that_is_killed_again_is_seen_as_killed(testbed, no_report, monkeypatch):
    """A resume clears how the set ended before: a SIGKILL during it leaves no status, as in a first run."""
    FakeRunner.stop_after = 1
    assert cli.main([str(testbed.file), "--backend", "native", "--repeat", "2", "--no-plots",
                     "--out", str(testbed.out)]) == 130
    run_dir = newest_set(testbed)
    assert metadata(run_dir)["status"] == "interrupted"
    seen = {}

    def killed(runner, run_set, jobs, *rest):   # the resumed set as a SIGKILL finds it, mid-run
        seen.update(metadata(run_dir))
        raise SystemExit(137)
    import runners.runset.session
    monkeypatch.setattr(runners.runset.session, "run_to_the_end", killed)
    with pytest.raises(SystemExit):
        cli.main(["--resume", str(run_dir), "--backend", "native", "--no-plots"])
    assert seen["status"] is None


def test_until_conclusive_and_its_bound_given_again_are_used_and_said():
    from runners.results.metadata import resume_options

    args = run.build_parser().parse_args(["--resume", "d", "--no-until-conclusive", "--max-repeat", "6"])
    given = {"resume", "until_conclusive", "max_repeat"}
    meta = {"run_options": {"repeat": 2, "variant": None, "until_conclusive": True, "max_repeat": 4}}
    notes, refusal = resume_options(args, given, meta)
    assert refusal is None and (args.repeat, args.until_conclusive, args.max_repeat) == (2, False, 6)
    assert notes == ["continuing as the set was started: --repeat 2",
                     "--no-until-conclusive as given (the set was started with --until-conclusive)",
                     "--max-repeat 6 as given (the set was started with --max-repeat 4)"]
    assert cli.parse_command_line(["--resume", "d", "--until-conclusive"])[1].until_conclusive is True


@pytest.mark.parametrize("how", ["booted", "warm"])
def test_a_vm_run_names_its_results_folder_once(testbed, monkeypatch, capsys, how):
    """The host names the folder before the guest starts; the guest, which writes into it, does not again
    (issue 33: the VM run printed its `results:` line twice)."""
    if how == "warm":
        use_warm_vm(monkeypatch)
    assert cli.main([str(testbed.file), "--backend", "vm", "--repeat", "1", "--variant", "slow", "--no-plots",
                     "--out", str(testbed.out)]) == 0
    out = capsys.readouterr().out
    assert [ln for ln in out.splitlines() if ln.startswith("results: ")] == [f"results: {newest_set(testbed)}"]


def test_a_guest_job_that_cannot_be_written_fails_the_run_cleanly(testbed, monkeypatch, capsys):
    def full(options, exp, run_dir):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(host, "write_job", full)
    assert cli.main([str(testbed.file), "--backend", "vm", "--repeat", "1", "--no-plots",
                     "--out", str(testbed.out)]) == 1
    err = capsys.readouterr().err
    [run_dir] = (testbed.out / "resumed").glob("2*")
    assert f"the guest's job could not be written into {run_dir}: No space left on device" in err
    assert "Traceback" not in err and testbed.guests == []
