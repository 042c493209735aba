"""A warm VM: `run-scenario vm up|status|down` (one guest kept running per kernel)."""
from __future__ import annotations

import argparse
from pathlib import Path

from runners.console.output import err
from runners.errors import EXIT_FAIL, EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run-scenario vm", description="A warm VM: a guest kept running (one per "
                                "kernel), so that runs with the vm backend start without a boot.")
    p.add_argument("action", choices=["up", "status", "down"])
    p.add_argument("--kernel", metavar="KERNEL", help="up: the kernel to boot, a release prefix (6.12) or an image's "
                   "path (default: as for --backend vm); one warm VM per kernel may be up. down: only this "
                   "kernel's (default: every warm VM)")
    p.add_argument("--modules", metavar="DIR", help="up: the modules of a kernel given by path (as for a run)")
    p.add_argument("--vm-memory", default="2G", metavar="SIZE", help="guest memory (default: 2G)")
    p.add_argument("--vm-cpus", type=int, metavar="N", help="guest CPUs (default: host CPUs, at most 4)")
    p.add_argument("--share", action="append", default=[], metavar="DIR",
                   help="another results folder the guest may write (default: results/ of this checkout)")
    return p


def main(argv: list[str]) -> int:
    p = build_parser()
    a = p.parse_args(argv)
    from runners.backends.vm import warm as warmvm
    from runners.backends.vm.boot import VmError

    from runners.backends.vm.boot import choose_kernel

    try:
        image = choose_kernel(a.kernel, None) if a.action == "up" or a.kernel else None
    except VmError as e:
        err(str(e))
        return EXIT_FAIL
    if a.action == "status":
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
    try:
        warmvm.up(vm, warmvm.plan_warm(image, a.vm_memory, a.vm_cpus, vm, shares,
                                       Path(a.modules) if a.modules else None))
    except VmError as e:
        err(str(e))
        return EXIT_FAIL
    return EXIT_OK
