"""Faults at the micro-VM level, injected from the host: Ctrl-C during the boot with the terminal's pipe
gone, and a wedged guest (qemu stopped). Each boots a real VM (TCG here): no qemu, no temporary
folder and no guest may outlive run-scenario, and the result set says how it ended."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


pytestmark = pytest.mark.vm_host
REPO = Path(__file__).resolve().parents[2]


def as_from_a_terminal() -> None:
    """Ctrl-C's default disposition in the child, as a shell with job control gives its foreground job.
    Started in the background by a shell without job control (`nohup .ci/run &`), the suite inherits
    SIGINT ignored, and Python then leaves it ignored: the Ctrl-C test failed that way in two full
    runs (SigIgn had bit 2 set; 2026-11-24), never when started from a terminal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(tmp_path: Path, **env: str) -> subprocess.Popen:
    """run-scenario on the default scenario through a booted VM (a warm VM of this machine is not used)."""
    return subprocess.Popen([sys.executable, "-u", "-m", "runners.cli", "scenarios/two-paths.yaml", "--backend", "vm",
                             "--out", str(tmp_path / "res")], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, preexec_fn=as_from_a_terminal,
                            env={**os.environ, "TESTBED_WARM_DIR": str(tmp_path / "no-warm-vm"), **env})


def read_until(p: subprocess.Popen, prefix: str, seen: list[str], within: float = 120) -> None:
    deadline = time.monotonic() + within
    for line in p.stdout:
        seen.append(line)
        if line.startswith(prefix):
            return
        assert time.monotonic() < deadline, "".join(seen)
    raise AssertionError("".join(seen))


def descendants(pid: int) -> dict[int, str]:
    """pid -> command name of every process under `pid`."""
    parent, names = {}, {}
    for d in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        name, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        parent[int(d)], names[int(d)] = int(rest[1]), name
    out, todo = {}, [pid]
    while todo:
        p = todo.pop()
        for child, pp in parent.items():
            if pp == p and child not in out:
                out[child] = names[child]
                todo.append(child)
    return out


def wait_for_qemu(p: subprocess.Popen, within: float = 120) -> list[int]:
    """The qemu that runs the guest: virtme-ng first runs `qemu-system-x86_64 --version`, a process of
    the same name that ends at once (stopping that one instead left the real VM running)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        qemu = [pid for pid, name in descendants(p.pid).items() if name.startswith("qemu-system")
                and "-kernel" in _cmdline(pid)]
        if qemu:
            return qemu
        time.sleep(0.2)
    raise AssertionError("no qemu started")


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def process_state(pid: int) -> str:
    """Its signal masks and dispositions, and where each of its threads sleeps in the kernel."""
    lines = [ln for ln in _read(f"/proc/{pid}/status").splitlines() if ln.startswith(("Sig", "Shd"))]
    for task in sorted(Path(f"/proc/{pid}/task").glob("*")):
        lines.append(f"thread {task.name} ({_read(task / 'comm').strip()}): wchan {_read(task / 'wchan')}, "
                     + " ".join(ln for ln in _read(task / "status").splitlines() if ln.startswith("SigBlk")))
    return "\n".join(lines)


def _read(path) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError as e:
        return f"({e})"


def run_logs(tmp_path: Path) -> str:
    """The end of the result set's run.log: what the run said once its stdout was gone."""
    return "".join(f.read_text(errors="replace")[-3000:] for f in (tmp_path / "res").glob("*/2*/run.log"))


def metadata(tmp_path: Path) -> dict:
    return json.loads(next((tmp_path / "res").glob("*/2*/metadata.json")).read_text())


def test_ctrl_c_during_the_boot_with_the_pipe_gone_stops_the_vm(tmp_path, new_leftovers):
    """`run-scenario ... | tee log`, and Ctrl-C kills tee too: stopping the VM must not depend on printing."""
    p = start(tmp_path)
    seen: list[str] = []
    read_until(p, "booting micro-VM", seen)
    wait_for_qemu(p)
    time.sleep(2)
    p.stdout.close()                      # the reader is gone: every later write gets EPIPE
    p.send_signal(signal.SIGINT)
    # stdout is gone: what the run said after the Ctrl-C is in its run.log. Should the Ctrl-C have no
    # effect, what the process was doing is kept (that is how SIGINT ignored by inheritance was found).
    try:
        code = p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        state = process_state(p.pid)
        p.kill()
        p.wait()
        pytest.fail("the Ctrl-C did not stop run-scenario within 60 s\n--- its state:\n" + state
                    + "\n--- run.log:\n" + run_logs(tmp_path))
    assert code == 130, "".join(seen) + "\n--- run.log:\n" + run_logs(tmp_path)
    assert metadata(tmp_path)["status"] == "interrupted"
    assert new_leftovers() == []


def test_a_wedged_guest_is_stopped_and_reported(tmp_path, new_leftovers):
    # short: qemu is stopped as soon as it is seen, so the silence is the stop's. Its clock starts with
    # virtme-ng, before qemu: 15 s leaves room for a slow start of qemu on a busy host
    p = start(tmp_path, TESTBED_VM_SILENCE_S="15")
    seen: list[str] = []
    read_until(p, "booting micro-VM", seen)
    for pid in wait_for_qemu(p):
        os.kill(pid, signal.SIGSTOP)      # qemu stops responding: no output, no exit
    out, _ = p.communicate(timeout=120)
    text = "".join(seen) + out
    assert p.returncode == 1, text
    assert "the micro-VM printed nothing for 15 s" in text and "it was stopped" in text, text
    assert "Traceback" not in text
    meta = metadata(tmp_path)
    assert meta["status"] == "failed" and "printed nothing" in meta["failure"]
    assert new_leftovers() == []
