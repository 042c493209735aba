"""The field types every part of the model uses: names, units with their ranges, and one shaped link."""
from __future__ import annotations

import os
from typing import Annotated, Optional

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictInt, WithJsonSchema,
                      model_validator)

from .. import units


# pydantic looks for plugins in every installed package's entry points when the first model is built;
# the testbed uses none, and the search cost ~1 s per process in a TCG guest (2026-11-23)
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

# Names end up in file names, CSV columns and (for kernel identifiers) in
# sysctl values, so they are restricted to a conservative character set.
IDENT = r"^[A-Za-z][A-Za-z0-9_-]{0,31}$"
SCENARIO_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
KERNEL_IDENT = r"^[a-z][a-z0-9_]{0,31}$"

Ident = Annotated[str, Field(pattern=IDENT, description="letters, digits, '_' or '-', starting with a letter")]


Duration = Annotated[
    float,
    BeforeValidator(units.parse_duration_ms),
    WithJsonSchema({"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*(us|ms|s)\s*$",
                    "description": "a duration with its unit: '15ms', '0.25s', '500us'"}),
]
Rate = Annotated[
    float,
    BeforeValidator(units.parse_rate_mbit),
    WithJsonSchema({"anyOf": [
        {"type": "number", "exclusiveMinimum": 0, "description": "Mbit/s"},
        {"type": "string", "pattern": r"(?i)^\s*\d+(\.\d+)?\s*(kbit|mbit|gbit)(/s|ps)?\s*$"}]}),
]
Size = Annotated[
    int,
    BeforeValidator(units.parse_size_bytes),
    WithJsonSchema({"anyOf": [
        {"type": "integer", "minimum": 1, "description": "bytes"},
        {"type": "string", "pattern": r"(?i)^\s*\d+(\.\d+)?\s*(b|kb|mb|gb|tb|kib|mib|gib|tib)?\s*$"}]}),
]


def positive(v: float) -> float:
    if v <= 0:
        raise ValueError(f"must be greater than 0 (got {v:g})")
    return v


MIN_RATE_MBIT = 0.01   # 10 kbit/s: below it netem's rate is a few bytes per second, and tc shows it as 0


def _rate_range(v: float) -> float:
    positive(v)
    if v < MIN_RATE_MBIT:
        raise ValueError(f"must be at least {MIN_RATE_MBIT:g} Mbit/s ('10kbit'), the least the testbed shapes "
                         f"(got {v:g})")
    if v > 100_000:
        raise ValueError(f"must be at most 100000 Mbit/s (got {v:g})")
    return v


def delay_range(v: float) -> float:
    if v < 0 or v > 60_000:
        raise ValueError(f"must be between 0ms and 60s (got {v:g}ms)")
    return v


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# The four shaping fields, shared by every model that shapes a link (Shaped, SwitchedLink).
LinkRate = Annotated[Rate, AfterValidator(_rate_range)]
LinkDelay = Annotated[Duration, AfterValidator(delay_range)]
LossPercent = Annotated[float, Field(ge=0, le=100)]
QueuePackets = Annotated[StrictInt, Field(ge=1, le=1_000_000)]
DELAY_HELP = "one-way delay, applied in each direction (RTT = 2 x delay)"
LOSS_HELP = "random loss in %, per direction"
QUEUE_HELP = "bottleneck buffer in packets, beyond the packets in flight on the delay line"


# A trace file, relative to the scenario file's folder (or absolute): Mahimahi's format (spec/traces.py)
TRACE_FILE = r"^[A-Za-z0-9_./-]{1,200}$"
TraceFile = Annotated[str, Field(pattern=TRACE_FILE, description="a Mahimahi trace, relative to the scenario file")]


def _trace_step(v: float) -> float:
    if not 10 <= v <= 10_000:
        raise ValueError(f"must be between 10ms and 10s (got {v:g}ms)")
    return v


class TraceSpec(Strict):
    """A rate that follows a recorded trace instead of a fixed bw: one file per direction (or one alone)."""

    to_server: Optional[TraceFile] = Field(default=None, description="the rate towards the server")
    to_client: Optional[TraceFile] = Field(default=None, description="the rate towards the client")
    once: bool = Field(default=False, description="play the trace once; default: loop it")
    step: Annotated[Duration, AfterValidator(_trace_step)] = Field(
        default=100.0, description="granularity of the rate steps (between 10ms and 10s)")

    @model_validator(mode="after")
    def _a_direction(self) -> "TraceSpec":
        if self.to_server is None and self.to_client is None:
            raise ValueError("to_server: give a trace file for to_server, to_client, or both")
        return self

    def files(self) -> list[tuple[str, str]]:
        """(direction, file) for each direction given."""
        return [(d, f) for d, f in (("to_server", self.to_server), ("to_client", self.to_client)) if f is not None]


TRACE_HELP = ("follow a rate trace (Mahimahi's format) from the start of each run's traffic; `bw` is the rate "
              "the link is built with and the one the estimates use")


class Shaped(Strict):
    """bw, delay, loss and queue of one bottleneck, shaped by netem in both directions."""

    bw: LinkRate = Field(description="bottleneck rate, Mbit/s (or '700kbit', '1Gbit')")
    delay: LinkDelay = Field(default=0.0, description=DELAY_HELP)
    loss: LossPercent = Field(default=0.0, description=LOSS_HELP)
    queue: QueuePackets = Field(default=100, description=QUEUE_HELP)
    trace: Optional[TraceSpec] = Field(default=None, description=TRACE_HELP)
