"""The warm VM, host side: `run-scenario vm up|status|down`, and jobs run in it without a boot.

`vm up` boots one guest per kernel asked for (virtme-ng, as the VM backend does) whose command is
runners.backends.vm.warm_guest, and leaves it running. While it is up, `run-scenario
--backend vm` (and auto, when it would use the VM) queues each job in the
shared spool folder and follows its output: no boot, no imports, the same
native backend inside. A guest that died or stopped answering is reported
and killed, and the next job boots a replacement.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from runners.paths import RESULTS  # noqa: F401  (run-scenario vm up shares it with the guest)
from runners.backends.vm import keep, root_cache, spool_out
from runners.backends.vm.boot import VmError, VmPlan, kernel_release, plan_vm, vng_binary, vng_env

def _warm_dir() -> Path:
    """Where the warm VM keeps its state: per user (root's in /run, which a reboot empties)."""
    if os.environ.get("TESTBED_WARM_DIR"):
        return Path(os.environ["TESTBED_WARM_DIR"])
    if os.geteuid() == 0:
        return Path("/run/mptcp-testbed/warm-vm")
    runtime = os.environ.get("XDG_RUNTIME_DIR") or f"/tmp/mptcp-testbed-{os.getuid()}"
    return Path(runtime) / "mptcp-testbed-warm-vm"


def _stages_root() -> Path:
    """Where the warm VMs' stages go (runners.backends.vm.spool_out): on disk, not in /run, a tmpfs in
    memory on most machines, which a run's captures could fill."""
    return Path("/var/tmp") / (f"mptcp-testbed-{os.getuid()}" if os.geteuid() else "mptcp-testbed") / "warm-stages"


WARM_DIR = _warm_dir()
STALE_SECONDS = 30.0      # a heartbeat older than this: the guest is wedged
BOOT_TIMEOUT = 600.0
WAKE_FIFO = "wake"        # in the VM's home: qemu's standard input, the guest's wake-up (_wake_channel)


class WarmVmGone(RuntimeError):
    """The warm VM died or stopped answering while a job ran."""


class WarmVmStopped(WarmVmGone):
    """The warm VM stopped itself, idle, as the job came: the job did not start (boot another)."""


@dataclass
class WarmVm:
    home: Path
    stages_dir: Path | None = None    # default: in its home (tests); the machine's slots: _stages_root()

    @property
    def spool(self) -> Path:
        return self.home / "spool"

    @property
    def state_file(self) -> Path:
        return self.home / "state.json"

    def state(self) -> dict | None:
        try:
            return json.loads(self.state_file.read_text())
        except (OSError, json.JSONDecodeError):
            return None

    def problem(self) -> str | None:
        """None when the guest is up, answering and runs the checkout's code; else what is wrong."""
        trouble = self.health()
        if trouble is None and (self.state() or {}).get("code") != code_fingerprint():
            return "out of date: the testbed's code changed after it booted"
        return trouble

    @property
    def stages(self) -> Path:
        """Result sets of folders it does not share, while their jobs run (runners.backends.vm.spool_out);
        a folder it shares with the guest, beside the spool."""
        return self.stages_dir or self.home / "stages"

    def idle_since(self) -> float | None:
        """When the guest last became idle, on the host's clock; None while a job runs (or before ready)."""
        try:
            return (self.spool / "idle").stat().st_mtime
        except OSError:
            return None

    def stopped_idle(self) -> bool:
        return (self.spool / "stopped-idle").exists()

    def health(self) -> str | None:
        """None when the guest is up and answering (what a running job depends on); else what is wrong."""
        st = self.state()
        if st is None:
            return "not started"
        if self.stopped_idle():
            return f"stopped itself after {keep.describe(st.get('keep_seconds') or 0)} without a job"
        if not _alive(st["pid"]):
            return f"its process {st['pid']} is gone (qemu exited or was killed)"
        if not (self.spool / "ready").exists():
            return "still booting"
        age = time.time() - (self.spool / "heartbeat").stat().st_mtime
        if age > STALE_SECONDS:
            return f"wedged: no heartbeat for {age:.0f} s"
        return None

    def shares(self, path: Path) -> bool:
        st = self.state() or {}
        return any(_under(path, Path(d)) for d in st.get("rwdirs", []))


def code_fingerprint() -> str:
    """The checkout's Python files (names, sizes, times): the guest runs the code it imported at boot."""
    import hashlib

    from runners.paths import REPO
    from runners.backends.vm.boot import PACKAGES
    h = hashlib.sha256()
    for pkg in PACKAGES:
        for f in sorted((REPO / pkg).rglob("*.py")):
            st = f.stat()
            h.update(f"{f}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def alive(vm: WarmVm) -> bool:
    """Its qemu still runs."""
    st = vm.state()
    return st is not None and _alive(st["pid"])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _under(path: Path, base: Path) -> bool:
    try:
        path.resolve().relative_to(base.resolve())
        return True
    except ValueError:
        return False


def _slot(home: Path) -> WarmVm:
    """A slot of this machine's: its stages on disk (TESTBED_WARM_DIR's, for a test's own VM, in its home)."""
    return WarmVm(home, None if os.environ.get("TESTBED_WARM_DIR") else _stages_root() / home.name)


def default() -> WarmVm:
    return _slot(WARM_DIR)


def all_vms() -> list[WarmVm]:
    """Every warm VM slot: the default one, and one per further kernel (`vm up --kernel 6.12` while
    another kernel's VM is up), so that a kernel sweep finds a warm VM for each of its kernels."""
    return [default()] + [_slot(p) for p in sorted(WARM_DIR.parent.glob(f"{WARM_DIR.name}-*")) if p.is_dir()]


def running() -> list[WarmVm]:
    return [vm for vm in all_vms() if vm.state() is not None]


def for_kernel(kernel_image: Path) -> WarmVm | None:
    """The warm VM that runs this kernel image, if one is up (or was, and died)."""
    return next((vm for vm in running() if vm.state()["kernel_image"] == str(kernel_image)), None)


def slot_for(kernel_image: Path) -> WarmVm:
    """Where `vm up` keeps a guest of this kernel: the slot of a VM already running it, else the default
    slot when free, else a slot named by the kernel's release."""
    mine = for_kernel(kernel_image)
    if mine is not None:
        return mine
    if default().state() is None:
        return default()
    return _slot(WARM_DIR.parent / f"{WARM_DIR.name}-{kernel_release(kernel_image)}")


def set_keep(vm: WarmVm, seconds: float | None) -> None:
    """The guest stops itself after `seconds` without a job (None: only `vm down` stops it). Its
    watchdog reads the file once a second; the state says it for `vm status`."""
    _write_json(vm.spool / "keep.json", {"idle_seconds": seconds})
    st = vm.state()
    if st is not None and st.get("keep_seconds") != seconds:
        st["keep_seconds"] = seconds
        _write_json(vm.state_file, st)


def adopt(vm: WarmVm, keep_seconds: float | None) -> dict:
    """`vm up` finds the warm VM a run left up: it is kept as `vm up` keeps one (its idle time now
    `keep_seconds`, and it counts as started by `vm up`); its state."""
    set_keep(vm, keep_seconds)
    st = vm.state()
    st["booted_by"] = "vm up"
    _write_json(vm.state_file, st)
    return st


@contextlib.contextmanager
def booting(vm: WarmVm):
    """One boot per slot at a time: two runs that both found no warm VM must not both boot one into the
    same slot (the second would stop the first's as "still booting"). Held while up() boots; a run that
    finds the VM still booting waits on it too. The kernel releases it when its holder dies."""
    vm.home.mkdir(parents=True, exist_ok=True)
    with open(vm.home / "boot.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def up(vm: WarmVm, plan: VmPlan, log=print, keep_seconds: float | None = None, booted_by: str = "vm up",
       reuse: bool = False) -> dict:
    """Boot the guest and wait until it has imported the testbed; return its state. `keep_seconds`: it
    stops itself after so long without a job (None: it stays up until `vm down`). `reuse`: one that is
    up (another command booted it meanwhile) is fine: its state, no boot."""
    with booting(vm):
        if vm.problem() is None:
            if reuse:
                return vm.state()
            raise VmError(f"a warm VM is already up (pid {vm.state()['pid']}); `run-scenario vm down` first")
        return _boot(vm, plan, log, keep_seconds, booted_by)


def _boot(vm: WarmVm, plan: VmPlan, log, keep_seconds: float | None, booted_by: str) -> dict:
    stop(vm, log=lambda m: None)    # a guest that failed to boot left its state: stop clears its folders ...
    vm.spool.mkdir(parents=True, exist_ok=True)
    vm.stages.mkdir(parents=True, exist_ok=True)    # ... the stages too, which the plan shares
    set_keep(vm, keep_seconds)
    vng = vng_binary()
    from runners.backends.vm.boot import compile_bytecode
    compile_bytecode()
    script_dir = vm.home / "cmd"
    script_dir.mkdir(exist_ok=True)
    plan.write_guest_files(script_dir)
    env = vng_env(vng)
    cached = root_cache.install_shim(script_dir / "bin", env, vng)   # its guest forgets the cache before each job
    t0 = time.time()
    wake_fd = _wake_channel(vm)
    try:
        with open(vm.home / "console.log", "wb") as console:
            proc = subprocess.Popen(plan.vng_argv(vng, script_dir), env=env, stdin=wake_fd,
                                    stdout=console, stderr=subprocess.STDOUT, start_new_session=True)
    finally:
        os.close(wake_fd)
    state = {"pid": proc.pid, "kernel": kernel_release(plan.kernel), "kernel_image": str(plan.kernel),
             "modules": plan.modules,
             "accel": "kvm" if plan.kvm else "tcg", "cpu_model": plan.cpu_model, "cpus": plan.cpus,
             "pvh_kernel": plan.pvh_kernel,
             "memory": plan.memory,
             "rwdirs": list(plan.rwdirs), "started": t0, "code": code_fingerprint(), "root_cached": cached,
             "keep_seconds": keep_seconds, "booted_by": booted_by}
    _write_json(vm.state_file, state)
    log(f"booting the warm VM: kernel {state['kernel']}, {state['accel'].upper()}, {plan.cpus} CPUs, {plan.memory}"
        + (", root cached (forgotten before each job)" if cached else "")
        + (", kernel entered by PVH" if plan.pvh_kernel else ""))
    while not (vm.spool / "ready").exists():
        if proc.poll() is not None:
            raise VmError(f"the warm VM exited during boot (exit {proc.returncode}); see {vm.home / 'console.log'}")
        if time.time() - t0 > BOOT_TIMEOUT:
            stop(vm, log=lambda m: None)
            raise VmError(f"the warm VM was not ready within {BOOT_TIMEOUT:.0f} s; see {vm.home / 'console.log'}")
        time.sleep(0.3)
    state["ready_seconds"] = round(time.time() - t0, 2)
    _write_json(vm.state_file, state)
    log(f"warm VM up in {state['ready_seconds']:.1f} s (pid {proc.pid}); jobs now run in it without a boot")
    return state


def _wake_channel(vm: WarmVm) -> int:
    """qemu's standard input: a FIFO it holds open for reading and writing (so never at its end), which
    virtme-ng hands to the guest's command as its standard input (the `virtme.stdin` serial port). A byte
    written to it wakes the guest at once (wake()), where it otherwise looks for a job every 0.1-0.5 s."""
    path = vm.home / WAKE_FIFO
    path.unlink(missing_ok=True)
    os.mkfifo(path, 0o600)
    return os.open(path, os.O_RDWR)


def wake(vm: WarmVm) -> None:
    """Tell the guest to look at its spool now (a job or a stop was written). Never blocks: a guest that
    does not read (booted without the channel, or gone) leaves it to its own look."""
    path = vm.home / WAKE_FIFO
    try:
        if not stat.S_ISFIFO(path.lstat().st_mode):   # written only where qemu reads
            return
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:   # none, or no reader (ENXIO)
        return
    try:
        os.write(fd, b"\n")
    except OSError:   # full (EAGAIN): the guest has wake-ups queued already
        pass
    finally:
        os.close(fd)


def plan_warm(kernel: Path | None, memory: str, cpus: int | None, vm: WarmVm,
              extra_rwdirs: list[Path], modules: Path | None = None) -> VmPlan:
    guest = [sys.executable, "-m", "runners.backends.vm.warm_guest", "--spool", str(vm.spool), "--wake-on-stdin"]
    vm.stages.mkdir(parents=True, exist_ok=True)
    return plan_vm(guest, [vm.spool, vm.stages, *extra_rwdirs], kernel=kernel, memory=memory, cpus=cpus,
                   modules=modules)


def stop(vm: WarmVm, log=print, grace: float = 20.0) -> bool:
    """Ask the guest to exit, then stop qemu for sure. True when there was one."""
    st = vm.state()
    if st is None:
        return False
    if _alive(st["pid"]) and vm.spool.exists():
        (vm.spool / "stop").write_text("stop\n")
        wake(vm)
        deadline = time.time() + grace
        while _alive(st["pid"]) and time.time() < deadline:
            _reap(st["pid"])
            time.sleep(0.2)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not _alive(st["pid"]):
            break
        try:
            os.killpg(st["pid"], sig)
        except ProcessLookupError:
            break
        time.sleep(1.0)
        _reap(st["pid"])
    # no job writes into a stage now: what a killed host did not move goes to its result folder
    spool_out.salvage(vm.stages, log=log)
    _clear(vm)
    log(f"warm VM (pid {st['pid']}) stopped")
    return True


def take_back(run_dir: Path, log=print, within: float = 120.0) -> list[str]:
    """--resume of a folder whose run was killed while its job ran in a warm VM through the spool: the
    job is interrupted (as Ctrl-C would), and once it has ended, what it wrote is moved into the folder
    (runners.backends.vm.spool_out). One line per job taken back."""
    done = []
    for vm in running():
        for stage in spool_out.stages_for(vm.stages, run_dir):
            job = vm.spool / "jobs" / f"{stage.home.name}.json"
            if job.exists() and not job.with_suffix(".done").exists() and vm.health() is None:
                job.with_suffix(".cancel").write_text("INT\n")
                deadline = time.time() + within
                while not job.with_suffix(".done").exists() and vm.health() is None and time.time() < deadline:
                    time.sleep(0.2)
                if not job.with_suffix(".done").exists() and vm.health() is None:
                    continue   # still writing: leave it for the warm VM's stop, which moves it then
            stage.finish()
            for suffix in (".json", ".log", ".done", ".cancel"):   # .json first: never a queued job again
                job.with_suffix(suffix).unlink(missing_ok=True)
            done.append(f"the killed run's job in the warm VM (pid {vm.state()['pid']}), its results moved in")
            log(f"resume: stopped {done[-1]}")
    return done


def keep_console(vm: WarmVm) -> Path | None:
    """A guest that died takes its story with it: stop() removes console.log. Keep a copy first (the
    guest kernel's last words: a panic, the OOM killer) as failed-console.log, the latest failure only."""
    console = vm.home / "console.log"
    if not console.exists():
        return None
    kept = vm.home / "failed-console.log"
    try:
        kept.write_bytes(console.read_bytes()[-256 * 1024:])
    except OSError:
        return None
    return kept


def _reap(pid: int) -> None:
    """vm up's own child (in tests and `vm down` from the same process) becomes a zombie otherwise."""
    if pid <= 0:   # waitpid would take any child, or a process group's
        return
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _clear(vm: WarmVm) -> None:
    import shutil

    for name in ("state.json", "console.log", WAKE_FIFO):
        (vm.home / name).unlink(missing_ok=True)
    shutil.rmtree(vm.spool, ignore_errors=True)
    shutil.rmtree(vm.stages, ignore_errors=True)    # salvaged first (stop)
    shutil.rmtree(vm.home / "cmd", ignore_errors=True)


def status_lines(vm: WarmVm) -> tuple[bool, list[str]]:
    st = vm.state()
    if st is None:
        return False, ["warm VM: not running (the next run that needs the VM leaves one up; `run-scenario vm up` "
                       "starts one now)"]
    problem = vm.problem()
    jobs = vm.spool / "jobs"
    history = vm.spool / "history.jsonl"
    done = len(history.read_text().splitlines()) if history.exists() else 0
    queued = len([p for p in jobs.glob("*.json") if not p.with_suffix(".done").exists()]) if jobs.exists() else 0
    lines = [f"warm VM: {'up' if problem is None else problem}",
             f"  pid {st['pid']}, kernel {st['kernel']} ({st['accel'].upper()}), {st['cpus']} CPUs, {st['memory']}"
             + (", root cached" if st.get("root_cached") else "")
             + (", kernel entered by PVH" if st.get("pvh_kernel") else ""),
             f"  up for {time.time() - st['started']:.0f} s; jobs finished {done}, queued or running {queued}",
             f"  {idle_line(vm, st, queued)}",
             f"  shares: {', '.join(st.get('rwdirs', []))} (results for other folders: through {vm.stages})"]
    return problem is None, lines


def idle_line(vm: WarmVm, st: dict, queued: int, now: float | None = None) -> str:
    """When it stops by itself: the time left, or that it does not."""
    seconds = st.get("keep_seconds")
    if seconds is None:
        return "stays up until `run-scenario vm down`"
    if queued or vm.idle_since() is None:
        return f"stops after {keep.describe(seconds)} without a job (a job is running or queued)"
    left = keep.time_left(seconds, vm.idle_since(), time.time() if now is None else now)
    return (f"stops after {keep.describe(seconds)} without a job: {left:.0f} s left "
            "(`run-scenario vm down` stops it now)")


def outlived(vm: WarmVm, now: float | None = None) -> str | None:
    """What is wrong with a warm VM that should not be up any more (`run-scenario clean`): one idle past
    its idle time (its watchdog did not stop it), a wedged one, or the state of one that is gone."""
    st = vm.state()
    if st is None:
        return None
    now = time.time() if now is None else now
    if not _alive(st["pid"]):
        how = "stopped itself, idle" if vm.stopped_idle() else "is gone"
        return f"the state of a warm VM that {how} (pid {st['pid']}): {vm.home}"
    trouble = vm.health()
    if trouble is not None and trouble.startswith("wedged"):
        return f"warm VM pid {st['pid']} (kernel {st['kernel']}): {trouble}"
    idle = vm.idle_since()
    if keep.outlived(st.get("keep_seconds"), idle, now):
        return (f"warm VM pid {st['pid']} (kernel {st['kernel']}): idle for {now - idle:.0f} s, past its idle "
                f"time of {keep.describe(st['keep_seconds'])}")
    return None


def _write_json(path: Path, doc: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, path)


def new_job_id() -> str:
    return f"{time.time():.6f}-{os.getpid()}"


def submit(vm: WarmVm, argv: list[str], out=None, poll: float = 0.05, job_id: str | None = None,
           mounts: list[tuple[Path, Path]] = (), on_poll=None) -> int:
    """Queue a run-scenario job in the guest, copy its output here as it comes, return its exit code.
    `mounts`: (stage, result folder) to bind for the job; `on_poll`: called as it runs (the mover).

    Ctrl-C and SIGTERM are passed on to the job (it cleans up as any run does). WarmVmStopped when the
    guest stopped itself, idle, as the job came (it did not start).
    """
    out = out or sys.stdout    # at call time: run.log's tee may be in place
    jobs = vm.spool / "jobs"
    jobs.mkdir(parents=True, exist_ok=True)
    job = jobs / f"{job_id or new_job_id()}.json"
    ahead = len([p for p in jobs.glob("*.json") if not p.with_suffix(".done").exists()])
    _write_json(job, {"argv": argv, "mounts": [[str(a), str(b)] for a, b in mounts]})
    wake(vm)
    _wait_unless_stopping(vm, job)
    if ahead:
        out.write(f"warm VM: queued behind {ahead} job(s)\n")
        out.flush()
    log_path, done_path = job.with_suffix(".log"), job.with_suffix(".done")
    offset, cancelled = 0, None

    def on_signal(signum, frame):
        nonlocal cancelled
        cancelled = "TERM" if signum == signal.SIGTERM else "INT"
        job.with_suffix(".cancel").write_text(cancelled + "\n")
    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while True:
            offset = _copy_new(log_path, offset, out)
            if on_poll is not None:
                on_poll()
            if done_path.exists():
                _copy_new(log_path, offset, out)
                result = json.loads(done_path.read_text())
                break
            # not problem(): an edit to the checkout while a job runs must not stop the guest under it
            problem = vm.health()
            if problem is not None and problem != "still booting":
                kept = keep_console(vm)
                stop(vm, log=lambda m: None)
                raise WarmVmGone(f"the warm VM failed during the job: {problem}; it was stopped "
                                 "(the next run boots a fresh one, or `run-scenario vm up`)"
                                 + (f"; its console is kept in {kept}" if kept else ""))
            time.sleep(poll)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    for item in result.get("cleaned", []):
        out.write(f"warm VM: after the job, removed a leftover: {item}\n")
    out.flush()
    for suffix in (".json", ".log", ".done", ".cancel"):   # .json first: a .json without .done is a queued job
        job.with_suffix(suffix).unlink(missing_ok=True)
    return int(result["code"])


def _wait_unless_stopping(vm: WarmVm, job: Path, within: float = 30.0) -> None:
    """The host's half of the idle stop's handshake (warm_guest._stop_when_idle): the job is written;
    if the guest has marked itself stopping, wait until it takes the job back (the mark goes) or is
    gone. WarmVmStopped, the job withdrawn, when it went."""
    deadline = time.time() + within
    while vm.stopped_idle():
        if not alive(vm) or time.time() > deadline:
            job.unlink(missing_ok=True)
            raise WarmVmStopped("the warm VM stopped itself, idle, as this job came")
        _reap((vm.state() or {}).get("pid", 0))
        time.sleep(0.1)


def _copy_new(path: Path, offset: int, out) -> int:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return offset
    if data:
        out.write(data.decode(errors="replace"))
        out.flush()
    return offset + len(data)
