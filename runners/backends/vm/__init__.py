"""The micro-VM backend (virtme-ng): the host side (host.py: run_set), boot, kernels and kernel sweeps,
the guest's command, the warm VM and its guest, the root's cache, the shell in a VM. May import what
runners.backends may."""
