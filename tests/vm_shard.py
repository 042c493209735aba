"""One shard of the integration tests in its own micro-VM boot: `python -m tests.vm_shard JUNIT TIMEOUT NODEID...`.

tests/conftest.py starts one of these per shard, so that the shards' VMs can run side by side (the
default is one shard: on 2 cores two TCG guests made every test ~3x slower, docs/development.md).
A child process, not a thread: run_in_vm installs its SIGTERM handler, which only the main thread
may do. Exit codes: the guest pytest's, 3 when the VM itself failed (said on stdout),
143 on SIGTERM.
"""
from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    from runners.backends.vm.boot import VmError, plan_vm, run_in_vm
    from runners.errors import Terminated

    junit, timeout, nodeids = Path(argv[0]), float(argv[1]), argv[2:]
    # per-test times as they finish and a durations table: CI's budget is the whole suite
    guest = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "-rA",
             "-o", "console_output_style=times", "--durations=0", f"--junitxml={junit}", *nodeids]
    try:
        return run_in_vm(plan_vm(guest, [junit.parent]), timeout=timeout)
    except VmError as e:
        print(f"the micro-VM: {e}", flush=True)
        return 3
    except Terminated:
        return 143


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
