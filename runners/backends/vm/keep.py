"""How long a warm VM left up by a run waits for the next job: --keep-vm, TESTBED_KEEP_VM, CI, and the
idle-time arithmetic that `vm status` and `run-scenario clean` share. Pure: no VM, no files.

The first run that needs the VM backend boots its guest as a warm VM and leaves it up; the guest stops
itself once it has had no job for the idle time (runners.backends.vm.warm_guest's watchdog). Off with
`--keep-vm 0s` or TESTBED_KEEP_VM=0, and by default when CI is set (CI boots cold, every time)."""
from __future__ import annotations

import re
from typing import Mapping, NamedTuple

from scenarios.spec.units import parse_duration_ms

DEFAULT_KEEP_SECONDS = 600.0
ENV = "TESTBED_KEEP_VM"
# beyond its idle time, how long a guest may take to notice and power off before `clean` calls it stuck:
# the watchdog looks once a second, and the power-off takes a few seconds under TCG
OUTLIVED_GRACE_SECONDS = 60.0
_LONG = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(min|h)\s*$")


class Keep(NamedTuple):
    seconds: float    # 0: no warm VM is left up
    why: str          # where the value came from, for the messages


def parse_keep(value: str) -> float:
    """'600s', '10min', '1h', '0s' (or a bare '0') -> seconds; ValueError saying what is accepted."""
    text = str(value).strip()
    if text == "0":
        return 0.0
    m = _LONG.match(text)
    if m:
        return float(m.group(1)) * (60.0 if m.group(2) == "min" else 3600.0)
    try:
        return parse_duration_ms(text) / 1000.0
    except ValueError:
        raise ValueError(f"is not a duration like '600s', '10min' or '1h' (0s: no warm VM) (got {value!r})") from None


def keep_setting(given: str | None, env: Mapping[str, str]) -> Keep:
    """The idle time of a warm VM this run would leave up. --keep-vm wins, then TESTBED_KEEP_VM; with
    neither, none when CI is set (CI must boot cold) or inside a micro-VM (no VM boots there), else
    DEFAULT_KEEP_SECONDS. ValueError (naming the option or variable) for a value that is not a duration."""
    if given is not None:
        try:
            return Keep(parse_keep(given), "--keep-vm")
        except ValueError as e:
            raise ValueError(f"--keep-vm {e}") from None
    if env.get(ENV, "").strip():
        try:
            return Keep(parse_keep(env[ENV]), ENV)
        except ValueError as e:
            raise ValueError(f"{ENV} {e}") from None
    if env.get("CI"):
        return Keep(0.0, "CI is set")
    if env.get("TESTBED_IN_VM"):
        return Keep(0.0, "inside a micro-VM")
    return Keep(DEFAULT_KEEP_SECONDS, "default")


def describe(seconds: float) -> str:
    """600 -> '10 min', 90 -> '90 s', 5400 -> '1.5 h'."""
    if seconds >= 3600 and seconds % 360 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 120 and seconds % 6 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


def time_left(keep_seconds: float | None, idle_since: float | None, now: float) -> float | None:
    """Seconds until an idle guest stops itself: None when it never does (`vm up` without --keep-vm) or
    is not idle (a job is running or queued: `idle_since` None); never below 0."""
    if keep_seconds is None or idle_since is None:
        return None
    return max(0.0, keep_seconds - (now - idle_since))


def outlived(keep_seconds: float | None, idle_since: float | None, now: float,
             grace: float = OUTLIVED_GRACE_SECONDS) -> bool:
    """An idle guest still up `grace` seconds after it should have stopped itself (its watchdog is stuck,
    or the guest is): `run-scenario clean` stops it."""
    if keep_seconds is None or idle_since is None:
        return False
    return now - idle_since > keep_seconds + grace
