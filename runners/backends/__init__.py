"""Where a scenario runs: natively on this kernel, or in a micro-VM (booted, or warm).

`choose_backend` is the one place that decides, for the CLI and the benchmark alike.
"""
