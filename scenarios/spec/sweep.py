"""Expand a scenario's `variants` and `sweep` grid into points, each a fully validated Scenario.

The key `kernel` is not a field: it names the kernel a point runs on (a
release prefix such as 6.12, or a kernel image's path), and the VM backend
boots each kernel once for its points. Other override keys are dotted paths into the scenario document. `paths.<name>.<field>`
and `links.<name>.<field>` are short for the field of the path (or link) with
that name (`paths.A.delay`, `links.P1.bw`), and `events.<name>.<field>` of the event with that
name (`events.a-down.at`, `events.b-slow.shape.bw`), so a sweep does not depend on list
positions; a variant's `set: {events.<name>: {...}}` replaces that event or adds it. Every point is validated like a whole
scenario, so a bad sweep value gets the same clear error as a bad field.
"""
from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from typing import Any

from .kernel import KERNEL_KEY
from .model import Scenario, ValueRange

ENGINE_KEYS = ("sweep", "variants", "expect")


class SweepError(ValueError):
    """A sweep key that does not address a field of the scenario."""


@dataclass(frozen=True)
class Point:
    id: str
    params: dict[str, Any]
    scenario: Scenario = field(compare=False)

    @property
    def kernel(self) -> str | None:
        """The kernel this point runs on when the scenario sweeps kernels ('6.12', or an image's path)."""
        return self.params.get(KERNEL_KEY)

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={_fmt(v)}" for k, v in self.params.items()) or "base"


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def set_dotted(doc: dict, key: str, value: Any) -> tuple:
    """Set `key` (e.g. 'paths.A.delay', 'mptcp.primary', 'traffic.duration') in a raw scenario dict.
    Returns where it went, as a validation error names it: ('topology', 'paths', 0, 'delay')."""
    parts = key.split(".")
    if parts[0] == "events" and len(parts) >= 2:
        return _set_event(doc, key, parts[1], parts[2:], value)
    for coll in ("paths", "links"):
        if parts[0] == coll or parts[:2] == ["topology", coll]:
            rest = parts[1:] if parts[0] == coll else parts[2:]
            if len(rest) != 2:
                raise SweepError(f"{key!r}: use {coll}.<name>.<field>, e.g. {coll}.A.delay")
            name, fld = rest
            for i, item in enumerate((doc.get("topology") or {}).get(coll) or []):
                if isinstance(item, dict) and item.get("name") == name:
                    item[fld] = value
                    return ("topology", coll, i, fld)
            raise SweepError(f"{key!r}: no {coll[:-1]} named {name!r}")
    _set_nested(doc, parts, value, key)
    return tuple(parts)


def _set_event(doc: dict, key: str, name: str, fields: list[str], value: Any) -> tuple:
    """`events.<name>.<field>[.<field>]` sets a field of the event of that name (`events.b-slow.shape.bw`);
    `events.<name>` (a variant's `set`) replaces that event, or adds it when there is none of that name."""
    events = doc.get("events")
    if events is None:
        events = doc["events"] = []
    if not isinstance(events, list):
        raise SweepError(f"{key!r}: `events` is not a list")
    i = next((i for i, e in enumerate(events) if isinstance(e, dict) and e.get("name") == name), None)
    if not fields:
        if not isinstance(value, dict):
            raise SweepError(f"{key!r}: an event is a mapping, e.g. {{at: 5s, path: A, do: down}}")
        event = {"name": name, **value}
        if i is None:
            events.append(event)
            return ("events", len(events) - 1)
        events[i] = event
        return ("events", i)
    if i is None:
        raise SweepError(f"{key!r}: no event named {name!r}")
    _set_nested(events[i], fields, value, key)
    return ("events", i, *fields)


def _set_nested(node: dict, parts: list[str], value: Any, key: str) -> None:
    """node[p0][p1]...[pN] = value, making the mappings on the way."""
    for part in parts[:-1]:
        nxt = node.get(part)
        if nxt is None:
            nxt = node[part] = {}
        if not isinstance(nxt, dict):
            raise SweepError(f"{key!r}: {part!r} is not a mapping")
        node = nxt
    node[parts[-1]] = value


def expand_values(v: Any) -> list:
    """A grid entry: a list of values, or a range {from, step, count, unit} such as E2's 40 file sizes."""
    if isinstance(v, dict):
        return ValueRange.model_validate(v).values()
    return list(v)


MAX_POINTS = 10_000


def count_points(raw: dict) -> int:
    """How many points the grid and variants make, without making them (a validated document)."""
    def grid_size(grid: dict) -> int:
        n = 1
        for v in grid.values():
            n *= int(v["count"]) if isinstance(v, dict) else len(v)
        return n
    variants = raw.get("variants") or [None]
    return sum(grid_size({**(raw.get("sweep") or {}), **((v or {}).get("sweep") or {})}) for v in variants)


def point_documents(raw: dict) -> list[tuple[dict[str, Any], dict]]:
    """(params, raw document) for every variant x grid combination, in a stable order."""
    n = count_points(raw)
    if n > MAX_POINTS:
        raise SweepError(f"the grid and variants make {n} points; at most {MAX_POINTS} (split the sweep into "
                         "several scenarios, or use --shard)")
    base = {k: v for k, v in raw.items() if k not in ENGINE_KEYS}
    variants = raw.get("variants") or [None]
    out = []
    for variant in variants:
        grid = dict(raw.get("sweep") or {})
        if variant is not None:
            grid.update(variant.get("sweep") or {})
        keys = list(grid)
        grid = {k: expand_values(v) for k, v in grid.items()}
        for combo in itertools.product(*(grid[k] for k in keys)) if keys else [()]:
            doc = copy.deepcopy(base)
            params: dict[str, Any] = {}
            if variant is not None:
                params["variant"] = variant["name"]
                for k, v in (variant.get("set") or {}).items():
                    if k == KERNEL_KEY:   # not a field of the scenario: where it runs
                        params[k] = v
                    else:
                        set_dotted(doc, k, v)
            for k, v in zip(keys, combo):
                if k != KERNEL_KEY:
                    set_dotted(doc, k, v)
                params[k] = v
            out.append((params, doc))
    return out


def shard_points(points: list[Point], shard: tuple[int, int] | None) -> list[Point]:
    """Points of shard K of N (1-based): every N-th point, so each point is in exactly one shard."""
    if not shard:
        return points
    k, n = shard
    return [p for i, p in enumerate(points) if i % n == k - 1]
