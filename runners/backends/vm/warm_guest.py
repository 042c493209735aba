"""The warm VM's guest side: run queued jobs one at a time, each in a fork of a pre-imported process.

Started by `run-scenario vm up` as the guest's command. It imports the
testbed once (seconds under TCG), then watches the spool folder that the host
shares with it:

  spool/jobs/<id>.json    a job: {"argv": [...]} for `run-scenario` (written by the host), with "mounts":
                          [[stage, result folder]] when the warm VM does not share the result folder
                          (runners.backends.vm.spool_out: the stage is bound there for this job only)
  spool/jobs/<id>.log     the job's console output, as it comes
  spool/jobs/<id>.cancel  the host asks to interrupt it (contents: INT or TERM)
  spool/jobs/<id>.done    {"code": N, "cleaned": [...]}: the job ended
  spool/heartbeat         rewritten every second: the host's sign that the guest is alive
  spool/ready             written once the imports are done
  spool/stop              the host asks the server to exit (the VM then powers off)
  spool/history.jsonl     one line per finished job (exit code, seconds, leftovers removed)
  spool/keep.json         {"idle_seconds": N or null}: stop after N s without a job (the host writes it)
  spool/idle              written when the guest becomes idle (its time is the host's: `vm status`),
                          removed when a job starts
  spool/stopped-idle      the guest stops because it was idle too long (see _stop_when_idle)

With --wake-on-stdin (as `vm up` starts it), a byte on standard input means "look now": the host
writes one after each job and stop (runners.backends.vm.warm.wake), and the guest sleeps on it
between its own looks instead of looking every 0.1-0.5 s.

Jobs run in name order (the host names them by submission time). After each
job, whatever a run can leave behind is looked for and removed, and the
`.done` file says what was found, so every job starts from a clean guest.
"""
from __future__ import annotations

import argparse
import json
import os
import select
import signal
import sys
import threading
import time
from pathlib import Path

from runners.backends import probe_cache

HEARTBEAT_SECONDS = 1.0
BRISK_SECONDS = 30.0    # after a job, look for the next one every 0.1 s for so long; then every 0.5 s
WOKEN_LOOK_SECONDS = 1.0   # with a wake-up channel, the guest's own looks (keep.json's idle time, a lost byte)


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def preload_testbed() -> None:
    """What every job imports: paid once here, inherited by every fork (and by each probe of `calibrate`)."""
    import mininet.net  # noqa: F401
    import runners.backends.native  # noqa: F401
    import runners.cli.run  # noqa: F401
    import runners.pipeline.runner  # noqa: F401
    import runners.backends.probe  # noqa: F401
    import scenarios.spec.loader  # noqa: F401
    import topologies.net  # noqa: F401
    from runners.backends.kernel_features import endpoint_answers
    from runners.backends.probe import iperf3_facts, kernel_debug, netem_works
    netem_works()   # memoised: every job's probe inherits the answer
    iperf3_facts()
    kernel_debug()
    if os.geteuid() == 0:
        endpoint_answers()   # metadata's endpoint flags: a namespace and 5 processes, 0.3-0.5 s a job in TCG


def _heartbeat(spool: Path, halt: threading.Event) -> None:
    while not halt.is_set():
        _write(spool / "heartbeat", f"{time.time():.3f}\n")
        halt.wait(HEARTBEAT_SECONDS)


def main_in_this_child(argv: list[str], stdout_fd: int, stderr_fd: int) -> None:
    """In a fresh fork: run-scenario's main() with its output on these descriptors, then exit with its code.

    Shared by the warm VM and the integration tests, which both fork a process that imported the
    testbed once instead of starting `python -m runners.cli`. Never returns.
    """
    code = 1
    try:
        os.dup2(stdout_fd, 1)
        os.dup2(stderr_fd, 2)
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        null = os.open(os.devnull, os.O_RDONLY)   # the job's processes never read the warm VM's wake-ups
        os.dup2(null, 0)
        os.close(null)
        sys.stdin = open(0, closefd=False)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        from runners.cli import main
        code = main(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 2
    except BaseException:
        import traceback
        traceback.print_exc()
    finally:
        from runners.results.store import wait_for_writes
        wait_for_writes()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _forget_cached_root() -> bool:
    """In the guest (TESTBED_IN_VM): drop what it cached of the host's root (root_cache); True there."""
    if not os.environ.get("TESTBED_IN_VM"):
        return False
    from runners.backends.vm.root_cache import forget_cached_root
    forget_cached_root()
    return True


CLONE_NEWNS, MS_BIND, MS_REC, MS_PRIVATE = 0x00020000, 4096, 16384, 1 << 18


def bind_in_own_namespace(mounts: list[list[str]]) -> None:
    """In the job's process, before it starts: a mount namespace of its own, and each stage bound at its
    result folder's path, so that the job writes its results where a cold boot's guest would, and the
    binding goes with the job's last process. OSError when the kernel refuses."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def check(ret: int, what: str) -> None:
        if ret != 0:
            e = ctypes.get_errno()
            raise OSError(e, f"{what}: {os.strerror(e)}")
    check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "making / private")
    for source, target in mounts:
        # the host made the folder; in the guest's overlay of /tmp or /home it may not show yet
        os.makedirs(target, exist_ok=True)
        check(libc.mount(os.fsencode(source), os.fsencode(target), None, MS_BIND, None),
              f"binding {source} at {target}")


def run_job(job: Path, spec: dict) -> dict:
    t0 = time.monotonic()
    in_vm = _forget_cached_root()    # the job reads the host's files as they are now, not as an earlier job saw them
    pid = os.fork()
    if pid == 0:
        log = os.open(job.with_suffix(".log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        if spec.get("mounts"):
            try:
                bind_in_own_namespace(spec["mounts"])
            except OSError as e:
                os.write(log, f"error: warm VM: cannot put the job's results where it writes them: {e}\n".encode())
                os._exit(1)
        main_in_this_child(list(spec["argv"]), log, log)
    cancel = job.with_suffix(".cancel")
    sent = False
    exited = _exit_notice(pid)
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if cancel.exists() and not sent:
                sig = signal.SIGTERM if cancel.read_text().strip() == "TERM" else signal.SIGINT
                os.kill(pid, sig)
                sent = True
            wait_readable(exited, 0.1)   # returns as the job exits, not up to 0.1 s later
    finally:
        if exited is not None:
            os.close(exited)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        code = 128 - code
    from runners.linux.leftovers import remove_leftovers
    # only inside the micro-VM is everything a job could leave ours; the unit tests serve jobs on the
    # host, where a clean-up would stop other people's runs (it once killed a test suite's VM)
    cleaned = remove_leftovers(ovs_was_running=False) if in_vm else []   # no OVS runs in the guest between jobs
    return {"code": code, "cleaned": cleaned, "seconds": round(time.monotonic() - t0, 3)}


def _exit_notice(pid: int) -> int | None:
    """A descriptor that becomes readable when `pid` exits (pidfd, Linux 5.3); None without one."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def wait_readable(fd: int | None, timeout: float) -> bool:
    """Sleep until `fd` is readable or `timeout` passed (plain sleep without a descriptor); True if readable."""
    if fd is None:
        time.sleep(timeout)
        return False
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    except (OSError, ValueError):
        time.sleep(timeout)
        return False


class WakeChannel:
    """The host's wake-ups on standard input (one byte per job or stop). At its end (stdin at EOF or
    unreadable) it is given up and the guest looks on its own, as without one."""

    def __init__(self, fd: int | None):
        self.fd = fd
        if fd is not None:
            try:   # a byte another reader took between select and read must not block the read
                os.set_blocking(fd, False)
            except OSError:
                self.fd = None

    def wait(self, timeout: float) -> None:
        if self.fd is None:
            time.sleep(timeout)
            return
        try:
            if not select.select([self.fd], [], [], timeout)[0]:
                return
            if os.read(self.fd, 4096):
                return
        except BlockingIOError:   # taken by another reader: none for us this time
            return
        except (OSError, ValueError):
            pass
        self.fd = None   # at its end or unusable: given up, never readable-and-empty in a loop


def _read_job(job: Path) -> tuple[Path, dict | None]:
    """The job and what it asks; None when there is none to run after all: its host removed it since the
    look (a finished job's files go .json first, then .done: one looked at in between seemed queued; a
    withdrawn one), or it cannot be read (answered with exit 2, so that its host does not wait)."""
    try:
        spec = json.loads(job.read_text())
        if not isinstance(spec, dict) or not isinstance(spec.get("argv"), list):
            raise ValueError("no argv")
    except FileNotFoundError:
        return job, None
    except (OSError, ValueError) as e:
        _write(job.with_suffix(".done"), json.dumps({"code": 2, "cleaned": [], "error": f"unreadable job: {e}"}) + "\n")
        return job, None
    return job, spec


def finish_job(spool: Path, job: Path, result: dict) -> float:
    """Count the job, mark the guest idle, then answer its host (the .done); returns when idle began.

    Idle from here, whatever _pending() says: the host removes a finished job's files as it reads them,
    and a look between its removal of the .json and of the .done took the job for one still queued (the
    guest then kept its older idle time and stopped early, in the VM). Counted and marked before the
    .done: a host that sees its job done finds the guest idle and the job counted (`vm status` right
    after a run once said "a job is running or queued", CI rehearsal of 2026-11-26, TCG); a queued job
    takes the mark away again when it starts."""
    with open(spool / "history.jsonl", "a") as history:   # `vm status` counts these
        history.write(json.dumps({"job": job.stem, **result}) + "\n")
    idle_since = time.monotonic()
    _write(spool / "idle", "\n")
    _write(job.with_suffix(".done"), json.dumps(result) + "\n")
    return idle_since


def _pending(jobs: Path) -> list[Path]:
    return sorted(p for p in jobs.glob("*.json") if not p.with_suffix(".done").exists())


def _idle_limit(spool: Path) -> float | None:
    """keep.json's idle time; None (never stop) when there is none or it cannot be read."""
    try:
        value = json.loads((spool / "keep.json").read_text()).get("idle_seconds")
    except (OSError, ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _stop_when_idle(spool: Path, jobs: Path, idle_since: float) -> bool:
    """True when the guest has been idle for its idle time and may power off.

    A host may queue a job at that very moment. Both sides write first and look second: the guest
    writes `stopped-idle`, then looks for a job (and stays, removing the mark, if one came); the host
    writes its job, then looks for the mark, and waits until it is gone (the guest stayed for the job)
    or the guest is (runners.backends.vm.warm.submit). Either the guest sees the job or the host sees
    the mark."""
    limit = _idle_limit(spool)
    if limit is None or time.monotonic() - idle_since < limit:
        return False
    _write(spool / "stopped-idle", json.dumps({"idle_seconds": limit}) + "\n")
    if _pending(jobs):
        (spool / "stopped-idle").unlink(missing_ok=True)
        return False
    print(f"warm VM: no job for {limit:g} s: stopping", flush=True)
    return True


def serve(spool: Path, preload: bool = True, wake_fd: int | None = None,
          look_every: float = WOKEN_LOOK_SECONDS) -> int:
    jobs = spool / "jobs"
    jobs.mkdir(parents=True, exist_ok=True)
    halt = threading.Event()
    threading.Thread(target=_heartbeat, args=(spool, halt), daemon=True).start()
    probe_cache.settle()   # the jobs inherit the probe's answers; none writes them back (that is for cold boots)
    t0 = time.monotonic()
    if preload:
        preload_testbed()
    _write(spool / "ready", json.dumps({"preload_seconds": round(time.monotonic() - t0, 3),
                                        "kernel": os.uname().release}) + "\n")
    print(f"warm VM: ready ({os.uname().release}); waiting for jobs in {jobs}", flush=True)
    idle_since, looked = time.monotonic(), 0.0
    woken = WakeChannel(wake_fd)
    _write(spool / "idle", "\n")
    # what the imports cached of the host's root, dropped now, while the first job is still coming (its
    # host starts; 0.2 s in TCG), not when it came (run_job drops it again: by then ~0.01 s)
    _forget_cached_root()
    try:
        while not (spool / "stop").exists():
            pending = _pending(jobs)
            if not pending:
                if time.monotonic() - looked >= 1.0:    # keep.json is read over 9p: once a second is enough
                    looked = time.monotonic()
                    if _stop_when_idle(spool, jobs, idle_since):
                        break
                if woken.fd is not None:   # the host says when a job comes: no look in between
                    woken.wait(look_every)
                    continue
                # a job waits half of this on average before it starts: briefly while a script's next
                # command may come, then less often (each look is a 9p round trip: an idle guest kept qemu
                # at 13-20 % of a host core looking every 0.1 s, 8 % every 0.5 s; TCG, 2026-11-25)
                time.sleep(0.1 if time.monotonic() - idle_since < BRISK_SECONDS else 0.5)
                continue
            job, spec = _read_job(pending[0])
            if spec is None:
                continue
            (spool / "idle").unlink(missing_ok=True)
            print(f"warm VM: job {job.stem}", flush=True)
            idle_since = finish_job(spool, job, run_job(job, spec))
            _forget_cached_root()   # the bulk of it (0.2 s in TCG) while idle; the next job's own is then ~0.01 s
    finally:
        halt.set()
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m runners.backends.vm.warm_guest", description=__doc__.splitlines()[0])
    ap.add_argument("--spool", required=True)
    ap.add_argument("--no-preload", action="store_true", help="skip the imports and probes (unit tests)")
    ap.add_argument("--wake-on-stdin", action="store_true",
                    help="sleep until a byte comes on standard input (the host's wake-up) between looks")
    ap.add_argument("--look-every", type=float, default=WOKEN_LOOK_SECONDS, metavar="SECONDS",
                    help="with --wake-on-stdin: look at the spool on its own this often (default: %(default)s)")
    a = ap.parse_args(argv)
    if a.look_every <= 0:
        ap.error("--look-every: more than 0 seconds")
    return serve(Path(a.spool), preload=not a.no_preload, wake_fd=0 if a.wake_on_stdin else None,
                 look_every=a.look_every)


if __name__ == "__main__":
    sys.exit(main())
