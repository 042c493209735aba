"""Which runs to do, in which order (pure).

A job is one iperf3 run: (point, repetition, primary path, mode), or, with
runs.tcp_together, the TCP baselines of several paths run at the same time:
one job, one run record per path. Jobs come
in rounds: a round runs every (point, primary, mode) case once, shuffled by a
recorded seed, so slow drift of the machine cannot masquerade as an effect
and an interrupted sweep still has balanced data. Cases are grouped by
topology so the (slow) network rebuild happens only between groups.
"""
from __future__ import annotations

import random
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


def run_key(run: dict) -> tuple[str, int, str, str]:
    return (run.get("point", "p001"), int(run["repeat"]), run["primary"], run["mode"])


def runs_in(jobs: list[Job]) -> int:
    """The run records the jobs write."""
    return sum(len(j.paths) for j in jobs)


SHAPING_FIELDS = {"bw", "delay", "loss", "queue"}


def _strip_shaping(v):
    if isinstance(v, dict):
        return tuple(sorted((k, _strip_shaping(x)) for k, x in v.items() if k not in SHAPING_FIELDS))
    if isinstance(v, list):
        return tuple(_strip_shaping(x) for x in v)
    return str(v)


def topology_signature(point: Point) -> tuple:
    """What needs a new Mininet network when it changes: everything but shaping (and MPTCP settings)."""
    return _strip_shaping(point.scenario.topology.model_dump())


def plan_jobs(points: list[Point], rounds: range, seed: int, multi_point: bool | None = None) -> list[Job]:
    multi = len(points) > 1 if multi_point is None else multi_point
    groups: dict[tuple, list[tuple[Point, str, str, tuple[str, ...]]]] = {}
    for pt in points:
        sc = pt.scenario
        for mode in sc.runs.compare:
            cases = [(pt, p, mode, ()) for p in (sc.tcp_paths if mode == "tcp" else sc.primaries)]
            if mode == "tcp" and sc.runs.tcp_together:
                cases = [(pt, sc.tcp_paths[0], mode, tuple(sc.tcp_paths))]
            groups.setdefault(topology_signature(pt), []).extend(cases)
    jobs = []
    for rep in rounds:
        rng = random.Random(f"{seed}:{rep}")
        for cases in groups.values():
            order = list(cases)
            rng.shuffle(order)
            jobs += [Job(pt, rep, primary, mode, multi, together) for pt, primary, mode, together in order]
    return jobs
