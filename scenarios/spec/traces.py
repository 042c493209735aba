"""Rate traces in Mahimahi's format, read strictly, and turned into rate steps.

The format (Mahimahi's mm-link): one line per delivery opportunity of one 1500-byte packet, the line a
whole number of milliseconds from the start of the trace; several packets in one millisecond repeat the
timestamp. Timestamps never decrease, and the last one, which is the trace's length, is above 0: a
looping trace starts again after it (as mm-link does: the next cycle's timestamps are shifted by it).
A trace file follows the scenario files' rules (files.read_regular): a regular file, at most
MAX_TRACE_BYTES.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .files import FileProblem, read_regular

MAX_TRACE_BYTES = 16 << 20   # 16 MiB: about 2 million opportunities, a minute at 300 Mbit/s
PACKET_BITS = 1500 * 8
_WHOLE_MS = re.compile(r"^[0-9]{1,12}$")


class TraceError(ValueError):
    """A trace that cannot be used: the message, and the 1-based line at fault (None: the whole file)."""

    def __init__(self, message: str, line: Optional[int] = None):
        super().__init__(message)
        self.line = line

    def where(self, file: str) -> str:
        return f"{file}{f' line {self.line}' if self.line else ''}: {self}"


@dataclass(frozen=True)
class Trace:
    """The delivery opportunities of one cycle, in ms from its start; the cycle lasts `length_ms`."""

    opportunities_ms: tuple[int, ...]

    @property
    def length_ms(self) -> int:
        return self.opportunities_ms[-1]

    @property
    def mean_mbit(self) -> float:
        return len(self.opportunities_ms) * PACKET_BITS / self.length_ms / 1000


def parse_trace(text: str) -> Trace:
    """Mahimahi's trace text into a Trace; TraceError names the line at fault. A final newline is
    optional; an empty line elsewhere, a comment or any other text is refused, as mm-link refuses it."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise TraceError("is empty; a trace has one line per 1500-byte delivery opportunity, a timestamp in ms")
    out: list[int] = []
    for n, raw in enumerate(lines, 1):
        word = raw.rstrip("\r")
        if word == "":
            raise TraceError("is empty; each line is one timestamp in ms", n)
        if not _WHOLE_MS.match(word):
            raise TraceError(f"{word[:40]!r} is not a whole number of milliseconds", n)
        ms = int(word)
        if out and ms < out[-1]:
            raise TraceError(f"{ms} is before the line above ({out[-1]}); timestamps never decrease", n)
        out.append(ms)
    if out[-1] == 0:
        raise TraceError("lasts 0 ms (its last timestamp is its length, and must be above 0)", len(out))
    return Trace(tuple(out))


def load_trace(path: Path) -> Trace:
    """Read and parse one trace file; TraceError for anything wrong with it (missing, not a regular file,
    over the cap, not text, or its content)."""
    try:
        data = read_regular(path, MAX_TRACE_BYTES, "a trace file")
    except FileNotFoundError:
        raise TraceError("no such file") from None
    except IsADirectoryError:
        raise TraceError("is a directory, not a trace file") from None
    except FileProblem as e:
        raise TraceError(str(e)) from None
    except OSError as e:
        raise TraceError(f"cannot read: {e.strerror or e}") from None
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError as e:
        raise TraceError(f"is not text (byte {e.start} is not ASCII); a trace holds one number per line") from None
    return parse_trace(text)


def rate_steps(trace: Trace, step_ms: float, duration_ms: float, once: bool = False) -> list[float]:
    """The trace's rate in Mbit/s over each step of `step_ms` from 0 to `duration_ms` (the last step may be
    shorter; its rate is over its own length). The trace loops unless `once`; once, it delivers nothing
    after its end (rate 0), as mm-link's link has no opportunity left."""
    n = math.ceil(duration_ms / step_ms)
    counts = [0] * n
    cycle = 0
    while True:
        shift = cycle * trace.length_ms
        if shift >= duration_ms or (once and cycle):
            break
        for t in trace.opportunities_ms:
            at = t + shift
            if at >= duration_ms:
                break
            counts[int(at // step_ms)] += 1
        cycle += 1
    widths = [min(step_ms, duration_ms - k * step_ms) for k in range(n)]
    return [c * PACKET_BITS / w / 1000 for c, w in zip(counts, widths)]


def trace_files(scenario) -> list[tuple[tuple, str]]:
    """Every trace file a scenario names, with where (('topology', 'paths', 0, 'trace', 'to_server'), file)."""
    topo = scenario.topology
    shaped = [("paths", i, p) for i, p in enumerate(topo.paths)] if topo.kind == "dual-homed" else \
        [("links", i, x) for i, x in enumerate(topo.links)]
    return [(("topology", coll, i, "trace", direction), f)
            for coll, i, item in shaped if getattr(item, "trace", None) is not None
            for direction, f in item.trace.files()]


def uses_traces(scenario) -> bool:
    return bool(trace_files(scenario))
