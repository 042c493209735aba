"""`run-scenario shell` through the VM backend: the guest runs the shell under `script`, which gives it a
pseudo-terminal, and this terminal's keystrokes reach it raw (line editing, history and Ctrl-C are the
guest's). The VM is booted for the shell and gone when it ends.
"""
from __future__ import annotations

import os
import shlex
import shutil
import signal
import sys
import tempfile
import termios
import tty
from pathlib import Path

from runners.backends.vm.boot import VmError, plan_vm, vng_binary, vng_env
from runners.errors import EXIT_FAIL, EXIT_INTERRUPTED, EXIT_TERMINATED, Terminated
from runners.linux.leftovers import VM_SCRIPT_PREFIX
from runners.linux.processes import start_reaped, stop_processes
from runners.pipeline.shell import open_session


def guest_argv(inner: list[str], rows: int, cols: int) -> list[str]:
    """The guest command: the terminal's size, then the shell under `script` (a pty of its own)."""
    return ["sh", "-c", f"stty rows {int(rows)} cols {int(cols)} 2>/dev/null; "
                        f"exec script -qfec {shlex.quote(shlex.join(inner))} /dev/null"]


def shell_in_vm(a, exp, point=None) -> int:
    """The shell in a booted micro-VM: the point's kernel when the scenario sweeps kernels."""
    from runners.backends.vm.kernels import KernelNotFound, resolve_kernel
    from runners.backends.vm.kernel_sets import kernel_base

    try:
        kernel = resolve_kernel(point.kernel, kernel_base(exp)) if point is not None and point.kernel else None
    except KernelNotFound as e:
        print(f"run-scenario: error: {e}", file=sys.stderr)
        return EXIT_FAIL
    session = open_session(a.out, exp.scenario.name)
    session.write_scenario(exp.text)
    session.set_metadata(scenario=exp.scenario.name, backend="vm", shell=True)   # the guest's replaces it
    run_dir = session.dir
    inner = [sys.executable, "-m", "runners.cli", "shell", str(run_dir / "scenario.yaml"), "--backend", "native",
             "--run-dir", str(run_dir), "--scenario-file", str(Path(exp.file).resolve())]
    for flag in ("point", "primary"):
        if getattr(a, flag):
            inner += [f"--{flag}", getattr(a, flag)]
    for v in a.variant or []:
        inner += ["--variant", v]
    size = shutil.get_terminal_size((80, 24))
    try:
        plan = plan_vm(guest_argv(inner, size.lines, size.columns), [run_dir], kernel=kernel,
                       requirement=exp.scenario.requires.kernel)
    except VmError as e:
        print(f"run-scenario: error: {e}", file=sys.stderr)
        return EXIT_FAIL
    print(f"booting a micro-VM for the shell ({'KVM' if plan.kvm else 'TCG: slow'}); `exit` leaves it", flush=True)
    return _boot_attached(plan)


def _boot_attached(plan) -> int:
    """Boot with this terminal attached (raw, when it is one) and wait; the terminal is restored after."""
    vng = vng_binary()
    script_dir = Path(tempfile.mkdtemp(prefix=VM_SCRIPT_PREFIX))
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd) if os.isatty(fd) else None

    def ended(signum, frame):   # SIGTERM, or SIGHUP: the terminal closed
        raise Terminated()
    old = {sig: signal.signal(sig, ended) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        plan.write_guest_files(script_dir)
        proc = start_reaped(plan.vng_argv(vng, script_dir), env=vng_env(vng))
        if saved is not None:
            tty.setraw(fd)
        try:
            return proc.wait()
        finally:
            if proc.poll() is None:
                stop_processes([proc], grace=10, group=True)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Terminated:
        return EXIT_TERMINATED
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        if saved is not None:
            try:
                termios.tcsetattr(fd, termios.TCSADRAIN, saved)
            except termios.error:
                pass   # the terminal is gone
        shutil.rmtree(script_dir, ignore_errors=True)
