"""A warm VM: `run-scenario vm up|status|down` (one guest kept running per kernel)."""
from __future__ import annotations

import argparse
from pathlib import Path

from runners.console.output import err
from runners.errors import EXIT_FAIL, EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run-scenario vm", description="A warm VM: a guest kept running (one per "
                                "kernel), so that runs with the vm backend start without a boot. The first such "
                                "run leaves one up by itself, until it has had no job for 10 min (run-scenario "
                                "--keep-vm); `vm up` keeps one until `vm down`.")
    p.add_argument("action", choices=["up", "status", "down"])
    p.add_argument("--kernel", metavar="KERNEL", help="up: the kernel to boot, a release prefix (6.12) or an image's "
                   "path (default: as for --backend vm); one warm VM per kernel may be up. down: only this "
                   "kernel's (default: every warm VM)")
    p.add_argument("--modules", metavar="DIR", help="up: the modules of a kernel given by path (as for a run)")
    p.add_argument("--vm-memory", default="2G", metavar="SIZE", help="guest memory (default: 2G)")
    p.add_argument("--vm-cpus", type=int, metavar="N", help="guest CPUs (default: host CPUs, at most 4)")
    p.add_argument("--share", action="append", default=[], metavar="DIR",
                   help="up: another results folder the guest writes directly (default: results/ of this "
                        "checkout); results for any other folder go through a stage it shares")
    p.add_argument("--keep-vm", metavar="DURATION",
                   help="up: stop by itself after DURATION without a job (600s, 10min, 1h; default: stay up "
                        "until `run-scenario vm down`)")
    return p


def main(argv: list[str]) -> int:
    p = build_parser()
    a = p.parse_args(argv)
    keep_seconds = None
    if a.keep_vm is not None:
        from runners.backends.vm.keep import parse_keep
        try:
            keep_seconds = parse_keep(a.keep_vm)
        except ValueError as e:
            p.error(f"--keep-vm {e}")
        if keep_seconds == 0:
            p.error("--keep-vm 0s: `vm up` keeps a VM up; give an idle time, or leave --keep-vm out to keep "
                    "it until `run-scenario vm down`")
    from runners.backends.vm import warm as warmvm
    from runners.backends.vm.boot import VmError

    from runners.backends.vm.boot import choose_kernel

    try:
        image = choose_kernel(a.kernel, None) if a.action == "up" or a.kernel else None
    except VmError as e:
        err(str(e))
        return EXIT_FAIL
    if a.action == "status":
        for vm in warmvm.running():
            if vm.stopped_idle() and not warmvm.alive(vm):   # it did as told: tidy its state, say so
                print(f"warm VM: {vm.health()}")
                warmvm.stop(vm, log=lambda m: None)
        vms = warmvm.running() or [warmvm.default()]
        oks = []
        for vm in vms:
            ok, lines = warmvm.status_lines(vm)
            print("\n".join(lines))
            oks.append(ok)
        return EXIT_OK if all(oks) else EXIT_FAIL
    if a.action == "down":   # every warm VM, or the one of --kernel
        vms = [warmvm.for_kernel(image)] if image is not None else warmvm.running()
        if not [vm for vm in vms if vm is not None and warmvm.stop(vm)]:
            print("warm VM: none was running" + (f" kernel {image.name}" if image is not None else ""))
        return EXIT_OK
    shares = [warmvm.RESULTS, *(Path(d).resolve() for d in a.share)]
    for d in shares:
        d.mkdir(parents=True, exist_ok=True)
    vm = warmvm.slot_for(image)
    vm.home.mkdir(parents=True, exist_ok=True)
    if vm.problem() is None and (vm.state() or {}).get("booted_by") == "run":
        # a run left it up: keep it, as `vm up` would have booted it (a guest's CPUs, memory and shared
        # folders are fixed at boot; results for other folders go through its stages)
        st = warmvm.adopt(vm, keep_seconds)
        print(f"warm VM: already up (pid {st['pid']}, kernel {st['kernel']}, left by a run); it now "
              + ("stays up until `run-scenario vm down`" if keep_seconds is None else
                 f"stops after {a.keep_vm} without a job"))
        return EXIT_OK
    try:
        warmvm.up(vm, warmvm.plan_warm(image, a.vm_memory, a.vm_cpus, vm, shares,
                                       Path(a.modules) if a.modules else None), keep_seconds=keep_seconds)
    except VmError as e:
        err(str(e))
        return EXIT_FAIL
    return EXIT_OK
