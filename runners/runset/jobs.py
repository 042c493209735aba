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

import argparse
import random

from scenarios.spec.sweep import Point

from runners.pipeline.job import Job, topology_signature


def runs_in(jobs: list[Job]) -> int:
    """The run records the jobs write."""
    return sum(len(j.paths) for j in jobs)


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


def parse_shard(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard {text!r}: use K/N, e.g. 2/4") from None
    if not 1 <= k <= n:
        raise argparse.ArgumentTypeError(f"--shard {text!r}: K must be between 1 and N")
    return k, n
