"""The field types every part of the model uses: names, units with their ranges, and one shaped link."""
from __future__ import annotations

import os
from typing import Annotated

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictInt, WithJsonSchema

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


class Shaped(Strict):
    """bw, delay, loss and queue of one bottleneck, shaped by netem in both directions."""

    bw: LinkRate = Field(description="bottleneck rate, Mbit/s (or '700kbit', '1Gbit')")
    delay: LinkDelay = Field(default=0.0, description=DELAY_HELP)
    loss: LossPercent = Field(default=0.0, description=LOSS_HELP)
    queue: QueuePackets = Field(default=100, description=QUEUE_HELP)
