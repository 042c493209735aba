"""Graph and subnet helpers shared by the model's checks and the topology planners (pure)."""
from __future__ import annotations

import ipaddress
from collections import deque
from typing import Iterable, TypeVar

Edge = tuple[str, str, str]   # (name, node a, node b)
T = TypeVar("T")


def adjacency(edges: Iterable[Edge]) -> dict[str, list[tuple[str, str]]]:
    """node -> [(neighbour, edge name)], in the edges' order."""
    adj: dict[str, list[tuple[str, str]]] = {}
    for name, a, b in edges:
        adj.setdefault(a, []).append((b, name))
        adj.setdefault(b, []).append((a, name))
    return adj


def reachable(adj: dict[str, list[tuple[str, str]]], start: str, through: set[str] | None = None) -> set[str]:
    """Every node reachable from `start`; when `through` is given, walks on only from those nodes
    (the others are reached but not passed)."""
    seen, todo = {start}, [start]
    while todo:
        for nbr, _ in adj.get(todo.pop(), ()):
            if nbr not in seen:
                seen.add(nbr)
                if through is None or nbr in through:
                    todo.append(nbr)
    return seen


def first_hops(adj: dict[str, list[tuple[str, str]]], src: str) -> dict[str, tuple[int, str, str]]:
    """node -> (distance, first neighbour, first edge) on a shortest path from src (breadth first)."""
    out: dict[str, tuple[int, str, str]] = {}
    q: deque[str] = deque()
    for nbr, edge in adj.get(src, ()):
        if nbr not in out:
            out[nbr] = (1, nbr, edge)
            q.append(nbr)
    out.setdefault(src, (0, src, ""))
    while q:
        n = q.popleft()
        d, first, edge0 = out[n]
        for nbr, _ in adj.get(n, ()):
            if nbr not in out:
                out[nbr] = (d + 1, first, edge0)
                q.append(nbr)
    out.pop(src, None)
    return out


def first_cycle_edge(nodes: Iterable[str], edges: Iterable[Edge]) -> str | None:
    """The first edge that closes a cycle (union-find), or None."""
    parent = {n: n for n in nodes}

    def find(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n
    for name, a, b in edges:
        ra, rb = find(a), find(b)
        if ra == rb:
            return name
        parent[ra] = rb
    return None


def first_overlap(subnets: list[tuple[T, ipaddress._BaseNetwork]]) -> tuple[tuple[T, object], tuple[T, object]] | None:
    """The first two (tag, subnet) pairs of one IP version that overlap, in the order given, or None."""
    for i, (ta, na) in enumerate(subnets):
        for tb, nb in subnets[i + 1:]:
            if na.version == nb.version and na.overlaps(nb):
                return (ta, na), (tb, nb)
    return None
