"""The typed scenario model (format v1).

Every field that ends up in a command line is constrained here, because the
runner executes those commands as root. Unknown keys are errors so that a
typo never silently falls back to a default.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field,
                      StrictInt, WithJsonSchema, model_validator)

from . import units
from .expect import parse_check

FORMAT_VERSION = 1

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
        {"type": "string", "pattern": r"(?i)^\s*\d+(\.\d+)?\s*(b|kb|mb|gb|kib|mib|gib)?\s*$"}]}),
]


def _positive(v: float) -> float:
    if v <= 0:
        raise ValueError(f"must be greater than 0 (got {v:g})")
    return v


def _rate_range(v: float) -> float:
    _positive(v)
    if v > 100_000:
        raise ValueError(f"must be at most 100000 Mbit/s (got {v:g})")
    return v


def _delay_range(v: float) -> float:
    if v < 0 or v > 60_000:
        raise ValueError(f"must be between 0ms and 60s (got {v:g}ms)")
    return v


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PathSpec(Strict):
    """One end-to-end path: a link between client and server, shaped in both directions."""

    name: Ident
    bw: Annotated[Rate, AfterValidator(_rate_range)] = Field(
        description="bottleneck rate, Mbit/s (or '700kbit', '1Gbit')")
    delay: Annotated[Duration, AfterValidator(_delay_range)] = Field(
        default=0.0, description="one-way delay, applied in each direction (RTT = 2 x delay)")
    loss: float = Field(default=0.0, ge=0, le=100, description="random loss in %, per direction")
    queue: StrictInt = Field(default=100, ge=1, le=1_000_000,
                             description="bottleneck buffer in packets, beyond the packets in flight on the delay line")


class Topology(Strict):
    kind: Literal["dual-homed"] = Field(
        description="dual-homed: a client and a server with one interface per path, each path its own link")
    paths: list[PathSpec] = Field(min_length=1, max_length=8)

    @model_validator(mode="after")
    def _unique_names(self) -> "Topology":
        seen: set[str] = set()
        for i, p in enumerate(self.paths):
            if p.name in seen:
                raise ValueError(f"paths[{i}].name: path name {p.name!r} is used twice")
            seen.add(p.name)
        return self

    def path(self, name: str) -> PathSpec:
        return next(p for p in self.paths if p.name == name)

    def index(self, name: str) -> int:
        return [p.name for p in self.paths].index(name)


class Limits(Strict):
    subflows: Optional[StrictInt] = Field(default=None, ge=0, le=8,
                                          description="ip mptcp limits subflows; default: paths - 1")
    add_addr_accepted: Optional[StrictInt] = Field(default=None, ge=0, le=8,
                                                   description="ip mptcp limits add_addr_accepted; default: paths - 1")


class Mptcp(Strict):
    primary: Optional[Ident] = Field(default=None, description="path of the initial subflow; default: the first path")
    scheduler: Annotated[str, Field(pattern=KERNEL_IDENT)] = Field(
        default="default", description="net.mptcp.scheduler; needs a kernel that offers it unless 'default'")
    congestion: Annotated[str, Field(pattern=KERNEL_IDENT)] = Field(
        default="cubic", description="TCP congestion control of every subflow (and of the TCP baseline)")
    backup: list[Ident] = Field(default_factory=list, description="paths whose endpoints carry the backup flag")
    endpoints: Literal["signal", "subflow"] = Field(
        default="signal",
        description="signal: the server announces its other paths' addresses (ADD_ADDR); "
                    "subflow: the client opens subflows from its other interfaces, with source routing")
    limits: Limits = Field(default_factory=Limits)


class Traffic(Strict):
    tool: Literal["iperf3"] = "iperf3"
    duration: Optional[Annotated[float, AfterValidator(_positive)]] = Field(
        default=None, le=3600, description="seconds of traffic; exclusive with bytes")
    bytes: Optional[Annotated[Size, AfterValidator(_positive)]] = Field(
        default=None, description="fixed transfer size (iperf3 -n); exclusive with duration")
    direction: Literal["upload", "download"] = Field(
        default="upload", description="upload: client -> server; download: server -> client")
    interval: float = Field(default=1.0, ge=0.1, le=60, description="seconds between throughput samples")
    omit: float = Field(default=0, ge=0, le=60, description="iperf3 --omit: seconds of slow start left out")

    @model_validator(mode="after")
    def _one_amount(self) -> "Traffic":
        if self.duration is not None and self.bytes is not None:
            raise ValueError("bytes: give either duration or bytes, not both")
        if self.duration is None and self.bytes is None:
            object.__setattr__(self, "duration", 10.0)
        return self


class Runs(Strict):
    compare: list[Literal["mptcp", "tcp"]] = Field(
        default_factory=lambda: ["mptcp", "tcp"], min_length=1,
        description="mptcp: all paths; tcp: plain TCP on the primary path, alone")
    primaries: list[Ident] = Field(
        default_factory=list,
        description="run every compare mode once per listed primary path (E4: [A, B]); default: mptcp.primary")
    repeat: StrictInt = Field(default=1, ge=1, le=1000)
    seed: Optional[StrictInt] = Field(
        default=None, ge=0, description="seed of the randomised run order; default: drawn and recorded")
    pause: Annotated[Duration, AfterValidator(_delay_range)] = Field(
        default=1000.0, description="idle time between runs, so queues drain")

    @model_validator(mode="after")
    def _unique_modes(self) -> "Runs":
        if len(set(self.compare)) != len(self.compare):
            raise ValueError("compare: lists a mode twice")
        if len(set(self.primaries)) != len(self.primaries):
            raise ValueError("primaries: lists a path twice")
        return self


def _same(value: Any, allowed: list) -> bool:
    """YAML gives 250ms as a string and 5 as an int; compare as written."""
    return any(value == a or str(value) == str(a) for a in allowed)


def _check_expr(v: str) -> str:
    parse_check(v)
    return v


class Expectation(Strict):
    """A claim checked statistically at every point; see scenarios/expect.py for the grammar."""

    name: Optional[Ident] = None
    check: Annotated[str, AfterValidator(_check_expr)] = Field(
        description="e.g. 'mptcp.throughput_mbps >= 1.8 * tcp.throughput_mbps' or "
                    "'mptcp@B.throughput_mbps > mptcp@A.throughput_mbps'")
    when: dict[str, Annotated[list[Any], Field(min_length=1)]] = Field(
        default_factory=dict,
        description="only at points whose parameters take these values, e.g. {variant: [exp1-delay]}")

    def applies(self, params: dict) -> bool:
        return all(k in params and _same(params[k], allowed) for k, allowed in self.when.items())

    @property
    def label(self) -> str:
        return self.name or self.check


SweepKey = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)+$")]
Grid = dict[SweepKey, Annotated[list[Any], Field(min_length=1)]]


class Variant(Strict):
    """A named set of overrides (keys as in `sweep`), e.g. one of E3's cases, with an optional grid of its own."""

    name: Ident
    description: str = ""
    set: dict[SweepKey, Any] = Field(default_factory=dict, description="dotted key -> value, e.g. {paths.A.bw: 2}")
    sweep: Grid = Field(default_factory=dict, description="a grid swept in this variant only (added to the global one)")


class Scenario(Strict):
    """A whole experiment: one topology, its MPTCP settings, the traffic and the runs."""

    name: Annotated[str, Field(pattern=SCENARIO_NAME)]
    description: str = ""
    topology: Topology
    mptcp: Mptcp = Field(default_factory=Mptcp)
    traffic: Traffic = Field(default_factory=Traffic)
    runs: Runs = Field(default_factory=Runs)
    sweep: Grid = Field(
        default_factory=dict,
        description="parameter grid: every combination is a point, e.g. {paths.A.delay: [15ms, 250ms]}")
    variants: list[Variant] = Field(default_factory=list,
                                    description="named override sets; each is combined with the whole grid")
    expect: list[Expectation] = Field(default_factory=list, description="claims checked statistically per point")

    @model_validator(mode="after")
    def _cross_refs(self) -> "Scenario":
        names = [p.name for p in self.topology.paths]
        if self.mptcp.primary is not None and self.mptcp.primary not in names:
            raise ValueError(f"mptcp.primary: no path named {self.mptcp.primary!r} (paths: {', '.join(names)})")
        for b in self.mptcp.backup:
            if b not in names:
                raise ValueError(f"mptcp.backup: no path named {b!r} (paths: {', '.join(names)})")
        for i, p in enumerate(self.runs.primaries):
            if p not in names:
                raise ValueError(f"runs.primaries[{i}]: no path named {p!r} (paths: {', '.join(names)})")
        seen = set()
        for i, v in enumerate(self.variants):
            if v.name in seen:
                raise ValueError(f"variants[{i}].name: variant name {v.name!r} is used twice")
            seen.add(v.name)
        params = {"variant"} | set(self.sweep) | {k for v in self.variants for k in v.sweep}
        for i, e in enumerate(self.expect):
            for key in e.when:
                if key not in params:
                    raise ValueError(f"expect[{i}].when.{key}: not a sweep key or 'variant' "
                                     f"(known: {', '.join(sorted(params))})")
            c = parse_check(e.check)
            for side in (c.left, c.right):
                if side is None:
                    continue
                if side.mode not in self.runs.compare:
                    raise ValueError(f"expect[{i}].check: mode {side.mode!r} is not in runs.compare")
                if side.primary is not None and side.primary not in names:
                    raise ValueError(f"expect[{i}].check: no path named {side.primary!r}")
        return self

    @property
    def primary(self) -> str:
        return self.mptcp.primary or self.topology.paths[0].name

    @property
    def primaries(self) -> list[str]:
        return list(self.runs.primaries) or [self.primary]


def json_schema() -> dict:
    schema = Scenario.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"MPTCP testbed scenario, format v{FORMAT_VERSION}"
    return schema
