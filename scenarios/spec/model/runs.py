"""Which runs a scenario asks for: modes, primaries and repetitions, its sweep grid and variants, its claims."""
from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import AfterValidator, ConfigDict, Field, StrictInt, model_validator

from ..expect import parse_check
from .types import Duration, Ident, Strict, delay_range


class Runs(Strict):
    compare: list[Literal["mptcp", "tcp"]] = Field(
        default_factory=lambda: ["mptcp", "tcp"], min_length=1,
        description="mptcp: all paths; tcp: plain TCP on the primary path, alone")
    primaries: list[Ident] = Field(
        default_factory=list,
        description="run every compare mode once per listed primary path (E4: [A, B]); default: mptcp.primary")
    tcp_on: Union[Literal["primary", "every-path"], list[Ident]] = Field(
        default="primary",
        description="primary: the TCP baseline runs on each primary path; every-path (or a list of paths): "
                    "on each of those paths alone, which gives the baselines of the efficiency metric")
    tcp_together: bool = Field(
        default=False,
        description="run the TCP baselines of all tcp_on paths at the same time, one flow per path, instead of "
                    "one after another; the paths must share no link. Per-flow numbers stay exact; the "
                    "namespace-wide nstat counters (retransmitted segments, OFO) are null for such runs")
    repeat: StrictInt = Field(default=1, ge=1, le=1000)
    seed: Optional[StrictInt] = Field(
        default=None, ge=0, description="seed of the randomised run order; default: drawn and recorded")
    pause: Annotated[Duration, AfterValidator(delay_range)] = Field(
        default=200.0, description="idle time between runs, at least: each run then also waits until every "
                                   "shaped queue is empty, so queues drain whatever their depth and rate")

    @model_validator(mode="after")
    def _unique_modes(self) -> "Runs":
        if len(set(self.compare)) != len(self.compare):
            raise ValueError("compare: lists a mode twice")
        if len(set(self.primaries)) != len(self.primaries):
            raise ValueError("primaries: lists a path twice")
        if self.tcp_on != "primary" and "tcp" not in self.compare:
            # tcp_on names the TCP baselines of the efficiency metric: without tcp runs there are none
            raise ValueError("tcp_on: needs tcp in runs.compare (the TCP runs on those paths are the "
                             "efficiency's baselines); add tcp to compare, or drop tcp_on")
        return self


def _same(value: Any, allowed: list) -> bool:
    """YAML gives 250ms as a string and 5 as an int; compare as written."""
    return any(value == a or str(value) == str(a) for a in allowed)


def _check_expr(v: str) -> str:
    parse_check(v)
    return v


class Expectation(Strict):
    """A claim checked statistically at every point; see scenarios/spec/expect.py for the grammar."""

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


# a dotted field path, or `kernel` (the kernel the point runs on: scenarios/spec/kernel.py)
SweepKey = Annotated[str, Field(pattern=r"^([A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)+|kernel)$")]
class ValueRange(Strict):
    """`count` values from `from` in steps of `step`, with `unit` appended (e.g. 256, 512, ... KiB)."""

    from_: float = Field(alias="from")
    step: float
    count: StrictInt = Field(ge=1, le=1000)
    unit: str = Field(default="", pattern=r"^[A-Za-z/%]{0,8}$")

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @property
    def whole(self) -> bool:
        """`from` and `step` are whole numbers, so every value is one."""
        return self.from_.is_integer() and self.step.is_integer()

    def values(self) -> list:
        """The values the range stands for: numbers, or strings with the unit (e.g. '256KiB').

        Whole numbers are ints, as an integer field (queue, bytes) takes them: 1.0 was refused there."""
        if self.whole:
            vals = [int(self.from_) + i * int(self.step) for i in range(self.count)]
        else:
            vals = [self.from_ + i * self.step for i in range(self.count)]
        if not self.unit:
            return vals
        # an int in full: '{:g}' made 1000000 '1e+06', which is no size
        return [f"{x}{self.unit}" if isinstance(x, int) else f"{x:g}{self.unit}" for x in vals]


Grid = dict[SweepKey, Union[Annotated[list[Any], Field(min_length=1)], ValueRange]]
# a variant may also replace a whole section (`topology`, `runs`...): one file, several networks
SetKey = Annotated[str, Field(pattern=r"^([A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*)$")]


class Variant(Strict):
    """A named set of overrides (keys as in `sweep`), e.g. one of E3's cases, with an optional grid of its own."""

    name: Ident
    description: str = ""
    set: dict[SetKey, Any] = Field(default_factory=dict, description="dotted key -> value, e.g. {paths.A.bw: 2}, "
                                   "or a whole section, e.g. {topology: {...}} (scenarios/kernels.yaml)")
    sweep: Grid = Field(default_factory=dict, description="a grid swept in this variant only (added to the global one)")
    optional: bool = Field(default=False, description="run only when named with --variant (e.g. rates a "
                                                      "micro-VM cannot reproduce)")
