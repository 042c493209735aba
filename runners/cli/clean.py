"""`run-scenario clean [--yes]`: what runs left behind on this machine, listed and removed."""
from __future__ import annotations

import argparse
import os

from runners.console.output import err
from runners.errors import EXIT_FAIL, EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run-scenario clean",
                                description="List what runs left behind on this machine (Mininet hosts and "
                                            "links, OVS bridges, iperf3, a controller, micro-VMs of cold boots, "
                                            "their temporary folders, a warm VM past its idle time, wedged, "
                                            "or gone but for its state) and, with --yes, remove it. Exit 0 when "
                                            "the machine is clean. Run it when no run is going: it stops those "
                                            "too. After a SIGKILLed run, --resume runs it first: it removes what "
                                            "names the set's folder (its micro-VM, its temporary folder), lists "
                                            "the rest, and natively does not start while anything is listed.")
    p.add_argument("--yes", action="store_true", help="remove what is listed")
    return p


def main(argv: list[str]) -> int:
    p = build_parser()
    a = p.parse_args(argv)
    from runners.linux.leftovers import find_leftovers, remove_leftovers
    found = _warm_vms(a.yes)   # this user's own: no root needed
    if os.geteuid() != 0:
        for line in found:
            print(("removed: " if a.yes else "left behind: ") + line)
        err("clean needs root for the rest (what runs leave behind belongs to root)")
        return EXIT_FAIL
    found += remove_leftovers() if a.yes else find_leftovers()
    for line in found:
        print(("removed: " if a.yes else "left behind: ") + line)
    if not found:
        print("clean: nothing left behind")
        return EXIT_OK
    if not a.yes:
        print("clean: run `run-scenario clean --yes` to remove these")
        return EXIT_FAIL
    rest = _warm_vms(False) + find_leftovers()
    for line in rest:
        print("still there: " + line)
    return EXIT_OK if not rest else EXIT_FAIL


def _warm_vms(stop: bool) -> list[str]:
    """Warm VMs that should not be up any more (runners.backends.vm.warm.outlived), stopped with --yes
    (what their spools kept for result folders goes there first). A healthy warm VM is not listed."""
    from runners.backends.vm import warm as warmvm

    found = []
    for vm in warmvm.running():
        why = warmvm.outlived(vm)
        if why is None:
            continue
        found.append(why)
        if stop:
            warmvm.keep_console(vm)    # a stuck guest's last words, for the diagnosis
            warmvm.stop(vm, log=lambda m: None)
    return found
