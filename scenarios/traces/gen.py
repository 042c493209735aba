"""Write the shipped rate traces (Mahimahi's format), deterministically: `python -m scenarios.traces.gen`.

Each trace is a rate over time, in Mbit/s per millisecond, turned into delivery opportunities of one
1500-byte packet: a millisecond at R Mbit/s earns R x 1000 bits of credit, and every 12000 bits of
credit is one line with that millisecond. The last line is the trace's length (Mahimahi loops after it),
so a trace that ends idle still ends with one opportunity at its last millisecond.
"""
from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Callable

PACKET_BITS = 1500 * 8
SEED = 30            # issue 30; the random walk is the same on every machine and Python 3 version
LENGTH_MS = 10_000   # each trace lasts 10 s, then loops


def opportunities(rate_mbit: Callable[[int], float], length_ms: int) -> list[int]:
    """The millisecond of each 1500-byte delivery opportunity for a rate given per millisecond."""
    out: list[int] = []
    credit = 0.0
    for ms in range(length_ms):
        credit += rate_mbit(ms) * 1000
        while credit >= PACKET_BITS:
            out.append(ms)
            credit -= PACKET_BITS
    if not out or out[-1] != length_ms:
        out.append(length_ms)
    return out


def step(ms: int) -> float:
    """8 Mbit/s for 5 s, then 2 Mbit/s: a path that suddenly slows."""
    return 8.0 if ms < 5000 else 2.0


def on_off(ms: int) -> float:
    """1 s at 8 Mbit/s, 1 s at nothing, five times: a path that comes and goes."""
    return 8.0 if (ms // 1000) % 2 == 0 else 0.0


def fade(ms: int) -> float:
    """8 Mbit/s down to nothing at 4-6 s (held for 2 s), then back up: a handover's fade-out and fade-in."""
    if ms < 4000:
        return 8.0 * (1 - ms / 4000)
    if ms < 6000:
        return 0.0
    return 8.0 * (ms - 6000) / 4000


def random_walk(seed: int = SEED) -> Callable[[int], float]:
    """A new rate every 500 ms, 1 Mbit/s up or down from the last, kept within 1-8 Mbit/s, from 4."""
    rng = random.Random(seed)
    rates = [4.0]
    for _ in range(LENGTH_MS // 500):
        rates.append(min(8.0, max(1.0, rates[-1] + rng.choice((-1.0, 1.0)))))
    return lambda ms: rates[ms // 500]


TRACES = {"step.trace": step, "on-off.trace": on_off, "fade.trace": fade, "random-walk.trace": random_walk()}


def render(name: str) -> str:
    return "".join(f"{ms}\n" for ms in opportunities(TRACES[name], LENGTH_MS))


def main(folder: Path = Path(__file__).resolve().parent) -> int:
    for name in TRACES:
        (folder / name).write_text(render(name))
        print(f"wrote {folder / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
