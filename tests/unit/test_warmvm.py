"""The warm VM's job protocol, host side against the real guest-side server (run here, without a VM)."""
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from runners.backends.vm import warm as warmvm
from runners.linux.netns import mount_points

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def guest(tmp_path):
    """runners.backends.vm.warm_guest serving a spool folder, as it does inside the VM (imports skipped)."""
    vm = warmvm.WarmVm(tmp_path / "warm")
    vm.spool.mkdir(parents=True)
    proc = subprocess.Popen([sys.executable, "-m", "runners.backends.vm.warm_guest", "--spool", str(vm.spool), "--no-preload"],
                            cwd=REPO, stdout=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 30
    while not (vm.spool / "ready").exists():
        assert time.time() < deadline and proc.poll() is None, "the guest server did not start"
        time.sleep(0.05)
    warmvm._write_json(vm.state_file, {"pid": proc.pid, "kernel": "test", "kernel_image": "/boot/vmlinuz-test",
                                       "accel": "tcg", "cpus": 1, "memory": "1G", "started": time.time(),
                                       "rwdirs": [str(vm.spool), str(tmp_path)],
                                       "code": warmvm.code_fingerprint()})
    yield vm, proc
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_jobs_run_in_order_with_their_output_and_exit_codes(guest, tmp_path):
    vm, _ = guest
    assert vm.problem() is None
    out = io.StringIO()
    assert warmvm.submit(vm, ["--check", str(REPO / "scenarios" / "two-paths.yaml")], out=out) == 0
    assert "two-paths.yaml: ok (1 point, 2 runs, about 1 min)" in out.getvalue()
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\ntopology: {kind: dual-homed, paths: [{name: A, bw: -3}]}\n")
    out = io.StringIO()
    assert warmvm.submit(vm, ["--check", str(bad)], out=out) == 2
    assert "bad.yaml" in out.getvalue() and "bw" in out.getvalue()
    assert list((vm.spool / "jobs").iterdir()) == []   # the host removes a finished job's files
    ok, lines = warmvm.status_lines(vm)
    assert ok and "jobs finished 2, queued or running 0" in lines[2]


def test_the_vm_shares_only_its_folders(guest, tmp_path):
    vm, _ = guest
    assert vm.shares(tmp_path / "results" / "x")
    assert not vm.shares(Path("/elsewhere/results"))


def test_a_dead_guest_is_reported_and_the_job_fails_clearly(guest):
    vm, proc = guest
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert "gone" in vm.problem()
    (vm.home / "console.log").write_text("[  161.2] Kernel panic - not syncing: the guest's last words\n")
    with pytest.raises(warmvm.WarmVmGone, match="gone.*console is kept in .*failed-console.log"):
        warmvm.submit(vm, ["--check", str(REPO / "scenarios" / "two-paths.yaml")], out=io.StringIO())
    assert vm.state() is None   # stopped and cleared: the next run boots a replacement
    assert "Kernel panic" in (vm.home / "failed-console.log").read_text()     # kept for the diagnosis


def test_a_silent_guest_is_wedged(guest):
    vm, proc = guest
    os.killpg(proc.pid, signal.SIGSTOP)
    try:
        old = time.time() - warmvm.STALE_SECONDS - 5
        os.utime(vm.spool / "heartbeat", (old, old))
        assert vm.problem().startswith("wedged")
    finally:
        os.killpg(proc.pid, signal.SIGCONT)


def test_code_changed_since_boot_makes_it_out_of_date(guest):
    vm, _ = guest
    st = vm.state()
    st["code"] = "something-else"
    warmvm._write_json(vm.state_file, st)
    assert vm.problem().startswith("out of date")
    # a job already queued still runs: only a dead or silent guest stops it
    assert vm.health() is None
    assert warmvm.submit(vm, ["--check", str(REPO / "scenarios" / "two-paths.yaml")], out=io.StringIO()) == 0


def test_status_without_a_warm_vm(tmp_path):
    ok, lines = warmvm.status_lines(warmvm.WarmVm(tmp_path / "none"))
    assert not ok and "not running" in lines[0]


def test_one_warm_vm_per_kernel_each_found_by_its_image(tmp_path, monkeypatch):
    monkeypatch.setattr(warmvm, "WARM_DIR", tmp_path / "warm-vm")
    monkeypatch.delenv("TESTBED_WARM_DIR", raising=False)
    k61, k612 = Path("/boot/vmlinuz-6.1.0-56-amd64"), Path("/boot/vmlinuz-6.12.95+deb12-amd64")
    assert warmvm.slot_for(k612).home == tmp_path / "warm-vm"          # the default slot while it is free
    for vm, image in ((warmvm.default(), k61), (warmvm.WarmVm(tmp_path / "warm-vm-6.12.95+deb12-amd64"), k612)):
        vm.home.mkdir(parents=True)
        warmvm._write_json(vm.state_file, {"pid": 1, "kernel": image.name[8:], "kernel_image": str(image)})
    assert warmvm.for_kernel(k61).home == tmp_path / "warm-vm"
    assert warmvm.for_kernel(k612).home == tmp_path / "warm-vm-6.12.95+deb12-amd64"
    assert warmvm.for_kernel(Path("/boot/vmlinuz-6.9.1")) is None
    assert len(warmvm.running()) == 2
    assert warmvm.slot_for(Path("/boot/vmlinuz-6.9.1")).home == tmp_path / "warm-vm-6.9.1"   # the default is taken
    # their stages on disk, one folder per slot (/run, where their state is, is a tmpfs on most machines)
    assert warmvm.for_kernel(k612).stages.parent == warmvm.default().stages.parent
    assert warmvm.for_kernel(k612).stages.name == "warm-vm-6.12.95+deb12-amd64"
    assert str(warmvm.default().stages).startswith("/var/tmp/")


def test_a_warm_jobs_vm_metadata_is_the_guest_that_ran_it():
    """A job's --vm-cpus/--vm-memory do not resize the running guest: metadata.json says what ran it."""
    from runners.backends.vm.boot import VmPlan
    from runners.backends.vm.host import as_booted_by_warm_vm

    job = VmPlan(kernel=Path("/boot/vmlinuz-test"), kvm=False, accel_reason="no /dev/kvm", memory="8G", cpus=4,
                 rwdirs=(), guest_argv=("true",), cpu_model="qemu64")
    state = {"cpus": 2, "memory": "2G", "cpu_model": "qemu64,+ssse3"}
    ran = as_booted_by_warm_vm(job, state)
    assert (ran.cpus, ran.memory, ran.cpu_model) == (2, "2G", "qemu64,+ssse3")
    assert as_booted_by_warm_vm(job, {}) == job      # an older state file: the job's own plan, as before


def wait_for(predicate, within: float = 15.0) -> bool:
    deadline = time.time() + within
    while not predicate():
        if time.time() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_an_idle_guest_stops_itself_after_its_idle_time(guest):
    vm, proc = guest
    warmvm.set_keep(vm, 600)
    assert "stops after 10 min without a job: 600 s left" in warmvm.idle_line(vm, vm.state(), 0)
    assert warmvm.submit(vm, ["--check", str(REPO / "scenarios" / "two-paths.yaml")], out=io.StringIO()) == 0
    assert vm.state()["keep_seconds"] == 600 and proc.poll() is None
    warmvm.set_keep(vm, 1)     # the watchdog reads it once a second
    assert wait_for(lambda: proc.poll() is not None), "the idle guest did not stop"
    assert proc.returncode == 0 and vm.stopped_idle()
    assert vm.health() == "stopped itself after 1 s without a job"
    assert "stopped itself, idle" in warmvm.outlived(vm)     # `clean` tidies its state


def test_a_job_is_never_lost_to_the_idle_stop(tmp_path):
    """Both sides write, then look: the guest that sees a job stays; the host that sees the mark waits."""
    from runners.backends.vm.warm_guest import _stop_when_idle

    spool = tmp_path / "spool"
    (spool / "jobs").mkdir(parents=True)
    (spool / "keep.json").write_text('{"idle_seconds": 0}')
    (spool / "jobs" / "1.json").write_text('{"argv": []}')
    assert not _stop_when_idle(spool, spool / "jobs", time.monotonic() - 5)
    assert not (spool / "stopped-idle").exists()
    (spool / "jobs" / "1.done").write_text('{"code": 0}')
    assert _stop_when_idle(spool, spool / "jobs", time.monotonic() - 5) and (spool / "stopped-idle").exists()
    (spool / "keep.json").write_text('{"idle_seconds": null}')    # `vm up` without --keep-vm: never
    assert not _stop_when_idle(spool, spool / "jobs", time.monotonic() - 10**6)


def test_a_job_that_comes_as_the_guest_stopped_is_withdrawn(guest):
    vm, proc = guest
    (vm.spool / "stopped-idle").write_text("{}")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    with pytest.raises(warmvm.WarmVmStopped):
        warmvm.submit(vm, ["--check", str(REPO / "scenarios" / "two-paths.yaml")], out=io.StringIO())
    assert not list((vm.spool / "jobs").glob("*.json"))


def test_clean_finds_a_guest_idle_past_its_time_and_not_a_healthy_one(guest):
    vm, _ = guest
    assert warmvm.outlived(vm) is None          # `vm up` without --keep-vm: up until `vm down`
    warmvm.set_keep(vm, 600)
    assert warmvm.outlived(vm) is None
    old = time.time() - 600 - 61
    os.utime(vm.spool / "idle", (old, old))
    assert "idle for 661 s, past its idle time of 10 min" in warmvm.outlived(vm)


def test_stopping_a_warm_vm_moves_what_its_spool_kept_into_the_result_folder(guest, tmp_path):
    from runners.backends.vm.spool_out import Stage

    vm, _ = guest
    target = tmp_path / "out" / "set"
    target.mkdir(parents=True)
    stage = Stage.create(vm.stages, "1.0-1", target)
    (stage.files / "results.json").write_text('{"format": 1, "runs": []}\n')
    assert warmvm.stop(vm, log=lambda m: None)
    assert (target / "results.json").read_text() == '{"format": 1, "runs": []}\n'
    assert not vm.spool.exists()


def test_resume_takes_back_a_killed_runs_job_and_its_results(guest, tmp_path, monkeypatch):
    """The host died after its job ended: the next --resume of the folder moves the results in."""
    from runners.backends.vm.spool_out import Stage

    vm, _ = guest
    monkeypatch.setattr(warmvm, "WARM_DIR", vm.home)
    monkeypatch.setenv("TESTBED_WARM_DIR", str(vm.home))     # its stages in its home, as the fixture's
    target = tmp_path / "out" / "set"
    target.mkdir(parents=True)
    stage = Stage.create(vm.stages, "2.0-7", target)
    (stage.files / "metadata.json").write_text('{"status": "ok"}\n')
    for suffix, text in ((".json", '{"argv": []}'), (".done", '{"code": 0}')):
        (vm.spool / "jobs" / f"2.0-7{suffix}").write_text(text)
    assert len(warmvm.take_back(target, log=lambda m: None)) == 1
    assert (target / "metadata.json").read_text() == '{"status": "ok"}\n'
    assert not stage.home.exists() and not list((vm.spool / "jobs").iterdir())
    assert warmvm.take_back(target, log=lambda m: None) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="binds a folder in a mount namespace of the job's own (root)")
@pytest.mark.skipif("/" not in mount_points(), reason="in a chroot (the fresh-machine test's root) / is no mount "
                    "point (os.path.ismount('/') says True there all the same), so it cannot be made private as the guest's is; the suite on the machine itself runs it")
def test_a_job_writes_into_a_folder_the_vm_does_not_share_through_its_spool(guest, tmp_path_factory):
    """The guest binds the stage at the result folder's path for the job only; the host moves it in."""
    from runners.backends.vm.spool_out import Stage
    from tests.unit.test_experiments import fake_result_set

    vm, _ = guest
    elsewhere = tmp_path_factory.mktemp("elsewhere")     # not under the folders the fixture's VM shares
    direct = fake_result_set(elsewhere / "direct", "set", {"p001"})
    target = elsewhere / "out" / "set"
    shutil.copytree(direct, target)
    assert not vm.shares(target)
    from runners.cli import main
    assert main(["report", str(direct)]) == 0
    stage = Stage.create(vm.stages, "3.0-1", target)
    stage.seed()
    out = io.StringIO()
    assert warmvm.submit(vm, ["report", str(target)], out=out, job_id="3.0-1", mounts=[(stage.files, target)],
                         on_poll=stage.poll) == 0, out.getvalue()
    stage.finish()
    assert f"plots: {target}/plots" in out.getvalue()
    names = lambda d: sorted(str(p.relative_to(d)) for p in d.rglob("*"))    # noqa: E731
    assert names(target) == names(direct) and (target / "stats.csv").read_text() == (direct / "stats.csv").read_text()
    assert str(target) not in Path("/proc/self/mountinfo").read_text()    # the binding went with the job


def test_a_job_removed_or_unreadable_between_look_and_read_is_not_run(tmp_path):
    """The host removes a finished job's .json, then its .done: a look in between sees a queued job."""
    from runners.backends.vm.warm_guest import _read_job

    jobs = tmp_path / "jobs"
    jobs.mkdir()
    assert _read_job(jobs / "gone.json") == (jobs / "gone.json", None)
    (jobs / "bad.json").write_text("{not json")
    assert _read_job(jobs / "bad.json")[1] is None
    assert json.loads((jobs / "bad.json").with_suffix(".done").read_text())["code"] == 2   # its host is answered
    (jobs / "ok.json").write_text('{"argv": ["--check", "x.yaml"]}')
    assert _read_job(jobs / "ok.json")[1] == {"argv": ["--check", "x.yaml"]}


def test_a_job_is_done_only_once_the_guest_is_idle_and_has_counted_it(tmp_path, monkeypatch):
    """The guest counts the job and marks itself idle before it writes the .done: `vm status` run right after
    a run (the warm VM's CI test, 2026-11-26, TCG) once found no idle mark and said a job was running."""
    from runners.backends.vm import warm_guest

    spool = tmp_path / "spool"
    (spool / "jobs").mkdir(parents=True)
    job = spool / "jobs" / "1.0-1.json"
    job.write_text('{"argv": []}')
    seen = []
    real = warm_guest._write

    def write(path, text):
        seen.append((path.name, (spool / "idle").exists(), (spool / "history.jsonl").exists()))
        real(path, text)
    monkeypatch.setattr(warm_guest, "_write", write)
    warm_guest.finish_job(spool, job, {"code": 0, "cleaned": [], "seconds": 1.0})
    assert seen[-1] == ("1.0-1.done", True, True), seen
    assert json.loads((spool / "history.jsonl").read_text())["job"] == "1.0-1"


def test_the_guest_is_idle_again_after_each_job_whatever_it_saw_of_the_job_files(guest):
    """Seen in the VM: a look between the host's removal of a finished job's .json and of its .done took it
    for a queued job, and the guest kept its older idle time (it stopped early, `vm status` said busy)."""
    vm, _ = guest
    for _ in range(3):
        assert warmvm.submit(vm, ["--check", str(REPO / "scenarios" / "two-paths.yaml")], out=io.StringIO()) == 0
        assert wait_for(lambda: vm.idle_since() is not None, within=5)
        assert time.time() - vm.idle_since() < 5


def test_a_boot_after_a_failed_one_shares_its_stages_again(tmp_path, monkeypatch):
    """A guest that failed to boot leaves its state; the next `vm up` first stops it, and stopping clears
    the stages folder that the new plan shares: virtme-ng then refused the boot ("cannot access ...")."""
    from types import SimpleNamespace

    from runners.backends.vm import boot

    vm = warmvm.WarmVm(tmp_path / "warm", stages_dir=tmp_path / "stages" / "warm")
    kernel = tmp_path / "vmlinuz-6.1.0-56-amd64"
    kernel.write_text("")
    monkeypatch.setattr(boot, "kvm_usable", lambda: (False, "no usable /dev/kvm"))
    plan = warmvm.plan_warm(kernel, "2G", 2, vm, [])           # makes the stages folder it shares
    vm.home.mkdir(parents=True)
    warmvm._write_json(vm.state_file, {"pid": 2 ** 22 + 4321, "kernel": "6.1.0-56-amd64",   # no such process
                                       "started": time.time(), "rwdirs": []})
    seen = {}

    real_popen = subprocess.Popen

    def boots(argv, **kwargs):          # what vng would find on the host when it starts
        if argv[0] != "vng":
            return real_popen(argv, **kwargs)
        seen["shared"] = [argv[i + 1] for i, a in enumerate(argv) if a == "--rwdir"]
        seen["missing"] = [d for d in seen["shared"] if not Path(d).is_dir()]
        (vm.spool / "ready").write_text("{}\n")
        return SimpleNamespace(pid=os.getpid(), poll=lambda: None)
    monkeypatch.setattr(warmvm, "vng_binary", lambda: "vng")
    monkeypatch.setattr(boot, "compile_bytecode", lambda: None)
    monkeypatch.setattr(warmvm.root_cache, "install_shim", lambda *a: False)
    monkeypatch.setattr(warmvm.subprocess, "Popen", boots)
    warmvm._boot(vm, plan, log=lambda m: None, keep_seconds=None, booted_by="vm up")
    assert str(vm.stages) in seen["shared"] and seen["missing"] == []


def _woken_guest(tmp_path, stdin):
    vm = warmvm.WarmVm(tmp_path / "warm")
    vm.spool.mkdir(parents=True)
    # the guest's own looks an hour apart: a job that starts at all was started by its wake-up
    proc = subprocess.Popen([sys.executable, "-m", "runners.backends.vm.warm_guest", "--spool", str(vm.spool),
                             "--no-preload", "--wake-on-stdin", "--look-every", "3600"],
                            cwd=REPO, stdin=stdin, stdout=subprocess.DEVNULL, start_new_session=True)
    assert wait_for(lambda: (vm.spool / "ready").exists() or proc.poll() is not None, 30)
    warmvm._write_json(vm.state_file, {"pid": proc.pid, "kernel": "test", "kernel_image": "/boot/vmlinuz-test",
                                       "started": time.time(), "rwdirs": [str(vm.spool)],
                                       "code": warmvm.code_fingerprint()})
    return vm, proc


def test_a_woken_guest_starts_a_job_and_stops_when_told_not_when_it_next_looks(tmp_path):
    """qemu's standard input is the FIFO that `vm up` makes (the guest's `virtme.stdin`): a job and a stop
    each wake the guest, which otherwise sleeps between looks (an hour here)."""
    vm = warmvm.WarmVm(tmp_path / "warm")
    vm.home.mkdir(parents=True)
    fd = warmvm._wake_channel(vm)
    try:
        vm, proc = _woken_guest(tmp_path, fd)
    finally:
        os.close(fd)    # as after qemu's start: the guest's end holds the FIFO open, for reading and writing
    try:
        assert (vm.home / warmvm.WAKE_FIFO).is_fifo()
        time.sleep(1.5)   # past any look the server made as it started
        # a guest that did not wake up is killed after a minute: the job then fails (WarmVmGone), not hangs
        watchdog = threading.Timer(60, lambda: os.killpg(proc.pid, signal.SIGKILL))
        watchdog.start()
        out = io.StringIO()
        try:
            assert warmvm.submit(vm, ["--check", str(REPO / "scenarios" / "two-paths.yaml")], out=out) == 0
        finally:
            watchdog.cancel()
        assert "two-paths.yaml: ok" in out.getvalue()
        t0 = time.monotonic()
        assert warmvm.stop(vm, log=lambda m: None, grace=120)   # writes `stop` and wakes the guest
        assert time.monotonic() - t0 < 60, "the guest stopped only after stop()'s grace: it was not woken"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_a_guest_whose_wake_up_channel_ended_looks_on_its_own(tmp_path, monkeypatch):
    """Standard input at its end (a guest started without the FIFO): it is given up, and the guest looks
    every 0.1-0.5 s as before, not once an hour, and never spins on it."""
    vm, proc = _woken_guest(tmp_path, subprocess.DEVNULL)
    try:
        warmvm.wake(vm)   # no FIFO: nothing to write to, and no error
        out = io.StringIO()
        assert warmvm.submit(vm, ["--check", str(REPO / "scenarios" / "two-paths.yaml")], out=out) == 0
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_wake_never_blocks_and_never_writes_into_a_file_that_is_not_the_fifo(tmp_path):
    vm = warmvm.WarmVm(tmp_path / "warm")
    vm.home.mkdir(parents=True)
    fd = warmvm._wake_channel(vm)
    os.close(fd)
    warmvm.wake(vm)                        # a FIFO nobody reads: ENXIO, ignored at once
    (vm.home / warmvm.WAKE_FIFO).unlink()
    (vm.home / warmvm.WAKE_FIFO).write_text("")
    warmvm.wake(vm)
    assert (vm.home / warmvm.WAKE_FIFO).read_text() == ""
    fd = warmvm._wake_channel(vm)          # made again over whatever was there
    try:
        for _ in range(70_000):            # past the pipe's 64 KiB: EAGAIN, ignored
            warmvm.wake(vm)
    finally:
        os.close(fd)


def test_a_wake_up_channel_wakes_the_guest_once_per_byte_and_is_given_up_at_its_end():
    from runners.backends.vm.warm_guest import WakeChannel

    r, w = os.pipe()
    try:
        channel = WakeChannel(r)
        os.write(w, b"\n\n")
        channel.wait(3600)                  # a byte waiting: returns at once, the bytes taken
        assert channel.fd == r
        assert not select_readable(r)
        os.close(w)
        w = None
        channel.wait(3600)                  # at its end: readable and empty, so given up ...
        assert channel.fd is None
        t0 = time.monotonic()
        channel.wait(0.05)                  # ... and a plain sleep from then on, not a spin
        assert time.monotonic() - t0 >= 0.05
    finally:
        os.close(r)
        if w is not None:
            os.close(w)


def select_readable(fd: int) -> bool:
    import select
    return bool(select.select([fd], [], [], 0)[0])
