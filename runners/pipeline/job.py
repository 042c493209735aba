"""One job: a run (or TCP baselines run together) of one point, repetition, primary path and mode, as the
runner does it; and what of a point needs a new network (the rest changes on the network it has).

runners.runset.jobs plans which jobs to do and in which order."""
from __future__ import annotations

from dataclasses import dataclass, replace

from scenarios.spec.sweep import Point


@dataclass(frozen=True)
class Job:
    point: Point
    rep: int
    primary: str
    mode: str
    multi_point: bool = False
    together: tuple[str, ...] = ()    # TCP baselines run at the same time, one flow per path

    @property
    def paths(self) -> tuple[str, ...]:
        return self.together or (self.primary,)

    @property
    def key(self) -> tuple[str, int, str, str]:
        return (self.point.id, self.rep, self.primary, self.mode)

    @property
    def keys(self) -> list[tuple[str, int, str, str]]:
        """One per run record the job writes."""
        return [(self.point.id, self.rep, p, self.mode) for p in self.paths]

    def alone(self, path: str) -> "Job":
        """The run record of one path of a job run together."""
        return replace(self, primary=path, together=())

    @property
    def run_id(self) -> str:
        base = f"r{self.rep:03d}-{self.mode}-{self.primary}"
        return f"{self.point.id}-{base}" if self.multi_point else base


SHAPING_FIELDS = {"bw", "delay", "loss", "queue", "trace"}


def _strip_shaping(v):
    if isinstance(v, dict):
        return tuple(sorted((k, _strip_shaping(x)) for k, x in v.items() if k not in SHAPING_FIELDS))
    if isinstance(v, list):
        return tuple(_strip_shaping(x) for x in v)
    return str(v)


def topology_signature(point: Point) -> tuple:
    """What needs a new Mininet network when it changes: everything but shaping (and MPTCP settings)."""
    return _strip_shaping(point.scenario.topology.model_dump())
