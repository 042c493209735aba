"""Where a scenario runs: natively on this kernel, or in a micro-VM (booted, or warm).

`choose_backend` is the one place that decides, for the CLI and the benchmark alike.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class BackendChoice:
    """Where to run; `refusal` is set when `native` was asked for and this machine cannot."""
    name: str
    probe: object | None = None       # the native probe's ProbeReport, when one ran
    auto_note: str | None = None      # why `auto` chose the VM
    refusal: str | None = None


def choose_backend(requested: str, scenarios: list) -> BackendChoice:
    """`native`, `vm` or `auto` for these scenarios (a sweep's points): auto runs natively when the probe
    finds everything for all of them, else in the VM. The probe runs once per distinct `mptcp` section."""
    if requested == "vm":
        return BackendChoice("vm")
    from runners.backends.probe import probe

    report = probe(scenarios[0])
    for sc in scenarios[1:]:
        if sc.mptcp != scenarios[0].mptcp:
            report.missing += [m for m in probe(sc).missing if m not in report.missing]
    if report.ok:
        return BackendChoice("native", probe=report)
    if requested == "native":
        return BackendChoice("native", probe=report, refusal=report.render())
    return BackendChoice("vm", probe=report, auto_note=f"auto: {report.render()}\nauto: using the vm backend")
