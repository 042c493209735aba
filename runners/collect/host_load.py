"""The host's CPU over one run's traffic, read in a VM's guest: what the host's processes other than the
testbed's took while this run's packets flowed (docs/fidelity.md, "The host's CPU while a VM runs").

Under TCG the guest's CPUs are the host's: a busy host slows the emulation, and the guest sees only the
result. The host writes a row of its CPU counters every half second into the result folder while the guest
runs (runners.linux.host_cpu.Recorder); the guest maps its run's traffic window onto the host's clock
and takes the host's shares over it.

The clocks: the guest's wall clock is set from the emulated RTC at boot, to the second, so it may be a
second off the host's. A file the guest writes into its 9p result folder gets its mtime from the host's
kernel, on the host's clock: the guest writes one, reads its mtime back, and the difference from its own
time at the write is the offset (measured on 2026-11-26 under TCG: -0.755, -0.761 and -0.760 s in
three tries a second apart, so a few milliseconds of error).
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from runners.linux import host_cpu

CLOCK_PROBE = ".guest-clock-probe"
# the host writes a row every SAMPLE_INTERVAL_S. A run judged just after its traffic took the window up
# to the host's last row when that came at most END_SLACK_S before the traffic's end (the window is off
# by at most a sample interval at each end either way); waiting for the row after it cost each run 0.1-0.5
# s of the guest's time (TCG, 2026-11-27). Otherwise it waits for a row, at most WAIT_FOR_ROW_S.
END_SLACK_S = host_cpu.SAMPLE_INTERVAL_S
WAIT_FOR_ROW_S = 3 * host_cpu.SAMPLE_INTERVAL_S
# the clocks' offset is measured again after this long: 4-5 round trips over 9p a measurement. Kept per
# process (a warm VM's job is a fork of a process that never measures): at most one set's runs share it.
OFFSET_KEPT_S = 60.0
_offsets: dict[Path, tuple[float, float]] = {}    # folder -> (time.monotonic() measured, offset)


def clock_offset(folder: Path, tries: int = 2) -> float | None:
    """The host's clock minus this machine's, in seconds, from the mtime the host's file system gives a
    file written here (the try with the shortest write); None when the folder cannot be written."""
    probe, best = Path(folder) / CLOCK_PROBE, None
    try:
        for _ in range(tries):
            before = time.time()
            probe.write_text(f"{before}\n")
            after = time.time()
            mtime = os.stat(probe).st_mtime
            if best is None or after - before < best[0]:
                best = (after - before, mtime - (before + after) / 2)
    except OSError:
        return None
    finally:
        try:
            probe.unlink(missing_ok=True)
        except OSError:
            pass
    return round(best[1], 4) if best else None


def _recent_offset(folder: Path) -> tuple[float | None, float]:
    """(clock_offset, seconds since it was measured): measured at most once every OFFSET_KEPT_S per folder
    (the runs of a set share it)."""
    kept = _offsets.get(folder)
    if kept is not None and time.monotonic() - kept[0] < OFFSET_KEPT_S:
        return kept[1], round(time.monotonic() - kept[0], 1)
    offset = clock_offset(folder)
    if offset is not None:
        _offsets[folder] = (time.monotonic(), offset)
    return offset, 0.0


def over_window(folder: Path, wall_start: float, wall_end: float,
                wait_s: float = WAIT_FOR_ROW_S) -> tuple[dict | None, str | None]:
    """(the host's shares over [wall_start, wall_end] of this machine's clock with the clock offset, None)
    or (None, why not). Without a row at most END_SLACK_S before the window's end or after it, waits up to
    `wait_s` for one."""
    folder = Path(folder)
    offset, offset_age = _recent_offset(folder)
    if offset is None:
        return None, "the guest could not write its clock probe into the result folder"
    start, end = wall_start + offset, wall_end + offset
    deadline = time.monotonic() + wait_s
    while True:
        try:
            rows = host_cpu.read_rows_since(folder / host_cpu.SAMPLES_FILE, start)
        except FileNotFoundError:
            return None, "the host recorded no rows (it could not write them, or read its /proc)"
        except OSError as e:
            return None, f"the host's rows could not be read: {e.strerror or e}"
        got = host_cpu.window_shares(rows, start, end, slack=END_SLACK_S)
        if got is not None:
            got["clock_offset_s"], got["clock_offset_age_s"] = offset, offset_age
            return got, None
        # a recorder that writes no more (its host cannot read /proc now): no row is coming
        stopped = not rows or rows[-1]["t"] < time.time() + offset - 4 * host_cpu.SAMPLE_INTERVAL_S
        if stopped or time.monotonic() >= deadline:
            return None, "the host's rows do not span the traffic (it recorded none after it)"
        time.sleep(host_cpu.SAMPLE_INTERVAL_S / 2)
