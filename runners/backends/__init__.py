"""Where a run set runs. May import runset, pipeline and everything below them (not the CLI).

BACKENDS names each backend's module; each has `run_set(options, exp, run_dir, probe) -> exit code`.
choice.py chooses one (the native probe, or the VM); probe.py, kernel_features.py and programs.py find
what this machine and kernel offer; vm/ is the micro-VM backend (boot, kernels, warm VM, guest)."""

BACKENDS = {
    "native": "runners.backends.native",   # this kernel, in this process
    "vm": "runners.backends.vm.host",      # a micro-VM per set (or per kernel), or the warm VM
}
