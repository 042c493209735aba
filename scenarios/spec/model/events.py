"""Events: what changes on a path or link during a run (issue 30), and the timeline that checks them.

An event acts on one target (a path, or a link of a routed or switched topology) at a time counted from
the start of each run's traffic, with one action (`do`) or new shaping values (`shape`). A flapping path
is one event with `every`, `until`, two actions and a duty cycle. The model only describes and checks
events: applying them during a run is not built yet (the run command refuses a scenario that has any).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal, Optional, Union

from pydantic import AfterValidator, Field, model_validator

from .types import (DELAY_HELP, LOSS_HELP, QUEUE_HELP, Duration, Ident, LinkDelay, LinkRate, LossPercent,
                    QueuePackets, Strict)

# endpoint-remove / endpoint-add: the path's MPTCP endpoint taken away and given back (RM_ADDR, ADD_ADDR)
Action = Literal["down", "up", "blackhole", "restore", "backup", "nobackup", "endpoint-remove", "endpoint-add"]
PATH_ONLY = ("backup", "nobackup", "endpoint-remove", "endpoint-add")   # MPTCP's view: a path, not a link
DEFAULT_DUTY = 50.0


def _not_negative(v: float) -> float:
    if v < 0:
        raise ValueError(f"must be 0s or later (got {v:g}ms)")
    return v


def _positive_ms(v: float) -> float:
    if v <= 0:
        raise ValueError(f"must be longer than 0s (got {v:g}ms)")
    return v


class EventShape(Strict):
    """New shaping values, each optional; what is not given stays as it is."""

    bw: Optional[LinkRate] = Field(default=None, description="new rate, Mbit/s")
    delay: Optional[LinkDelay] = Field(default=None, description=DELAY_HELP)
    loss: Optional[LossPercent] = Field(default=None, description=LOSS_HELP)
    queue: Optional[QueuePackets] = Field(default=None, description=QUEUE_HELP)

    @model_validator(mode="after")
    def _something(self) -> "EventShape":
        if not self.model_fields_set:
            raise ValueError("give at least one of bw, delay, loss, queue")
        return self

    def changes(self) -> dict:
        return {k: getattr(self, k) for k in ("bw", "delay", "loss", "queue") if k in self.model_fields_set}


class Event(Strict):
    """One change at `at` (from the start of the run's traffic), or a flap repeated `every` until `until`."""

    name: Ident = Field(description="unique; sweeps and variants address the event by it (events.<name>.at)")
    at: Annotated[Duration, AfterValidator(_not_negative)] = Field(
        description="when, counted from the start of each run's traffic, e.g. 5s")
    path: Optional[Ident] = Field(default=None, description="the path it acts on (or `link`)")
    link: Optional[Ident] = Field(default=None, description="the link it acts on, in a routed or switched topology")
    do: Optional[Union[Action, Annotated[list[Action], Field(min_length=2, max_length=2)]]] = Field(
        default=None, description="down | up | blackhole | restore | backup | nobackup | endpoint-remove | "
                                  "endpoint-add; with `every`, two actions: [blackhole, restore]")
    shape: Optional[EventShape] = Field(default=None, description="new bw, delay, loss or queue (in place)")
    every: Optional[Annotated[Duration, AfterValidator(_positive_ms)]] = Field(
        default=None, description="a flap: the pair of actions starts again every so often")
    until: Optional[Duration] = Field(default=None, description="with every: no cycle ends after this time")
    duty: Optional[Annotated[float, Field(gt=0, lt=100)]] = Field(
        default=None, description=f"with every: percent of each cycle in the first action's state "
                                  f"(default {DEFAULT_DUTY:g})")

    @model_validator(mode="after")
    def _one_target_one_action(self) -> "Event":
        if (self.path is None) == (self.link is None):
            raise ValueError("path: give one target: `path: NAME` or `link: NAME`")
        if (self.do is None) == (self.shape is None):
            raise ValueError("do: give one action: `do: ACTION` or `shape: {...}`")
        flap = self.every is not None
        if flap and (self.until is None or not isinstance(self.do, list)):
            raise ValueError("every: a flap needs `until` and two actions, e.g. do: [blackhole, restore]")
        if not flap and isinstance(self.do, list):
            raise ValueError("do: two actions only with `every` (a flap); one event does one thing")
        if not flap and (self.until is not None or self.duty is not None):
            raise ValueError("until: `until` and `duty` only with `every` (a flap)")
        if flap and self.until <= self.at:
            raise ValueError(f"until: must be after `at` ({self.until:g}ms <= {self.at:g}ms)")
        if flap and not self.occurrences():
            raise ValueError("every: not one cycle fits between `at` and `until`")
        actions = self.do if isinstance(self.do, list) else [self.do] if self.do else []
        if self.link is not None and any(a in PATH_ONLY for a in actions):
            raise ValueError(f"do: {', '.join(a for a in actions if a in PATH_ONLY)} acts on a path's MPTCP "
                             "endpoint: give `path:`, not `link:`")
        return self

    @property
    def target(self) -> tuple[str, str]:
        return ("path", self.path) if self.path is not None else ("link", self.link)

    def occurrences(self) -> list["Occurrence"]:
        """Every change this event makes, in time order: one, or two per flap cycle. A cycle starts at
        at + k x every and switches to the second action after duty % of `every`; only cycles that end by
        `until` are made, so a flapping path is in the second action's state (restored) by then."""
        if self.every is None:
            return [Occurrence(self.name, self.at, self.target, self.do, self.shape)]
        out = []
        on = self.every * (self.duty if self.duty is not None else DEFAULT_DUTY) / 100
        start = self.at
        while start + on <= self.until:
            out += [Occurrence(self.name, start, self.target, self.do[0], None),
                    Occurrence(self.name, start + on, self.target, self.do[1], None)]
            start += self.every
        return out


@dataclass(frozen=True)
class Occurrence:
    """One change on the timeline: its event's name, the time in ms, the target and the action."""

    event: str
    at_ms: float
    target: tuple[str, str]
    action: Optional[str]           # None: a shape change
    shape: Optional[EventShape]


# What each action needs of its target's state, and what it leaves: (state key, needed, new value).
_STATE = {
    "down": ("down", False, True), "up": ("down", True, False),
    "blackhole": ("blackholed", False, True), "restore": ("blackholed", True, False),
    "backup": ("backup", False, True), "nobackup": ("backup", True, False),
    "endpoint-remove": ("removed", False, True), "endpoint-add": ("removed", True, False),
}
_REFUSAL = {
    "down": "is already down", "up": "is not down", "blackhole": "is already blackholed",
    "restore": "is not blackholed", "backup": "is already a backup path", "nobackup": "is not a backup path",
    "endpoint-remove": "has no endpoint to remove", "endpoint-add": "already has its endpoint",
}


def timeline(events: list[Event]) -> list[tuple[int, Occurrence]]:
    """Every occurrence of every event with the event's index, in time order (stable for equal times)."""
    items = [(i, o) for i, e in enumerate(events) for o in e.occurrences()]
    return sorted(items, key=lambda item: item[1].at_ms)


def timeline_problem(events: list[Event], backups: list[str]) -> Optional[str]:
    """The first impossible or contradictory change, simulated per target from the configured state
    (`backups`: the paths that start as backup paths); None when the timeline holds."""
    state: dict[tuple[str, str], dict[str, bool]] = {}
    at_once: dict[tuple[tuple[str, str], float], int] = {}
    for i, occ in timeline(events):
        kind, name = occ.target
        first = at_once.setdefault((occ.target, occ.at_ms), i)
        if first != i:
            return (f"events[{i}].at: {kind} {name} has two events at {occ.at_ms / 1000:g}s "
                    f"({events[first].name}, {occ.event}); their order would be undefined: set them apart")
        if occ.action is None:
            continue
        now = state.setdefault(occ.target, {"down": False, "blackholed": False, "removed": False,
                                            "backup": kind == "path" and name in backups})
        key, needed, after = _STATE[occ.action]
        if now[key] != needed:
            return (f"events[{i}].do: {occ.action} at {occ.at_ms / 1000:g}s, but {kind} {name} "
                    f"{_REFUSAL[occ.action]} then")
        now[key] = after
    return None


def state_at(events: list[Event], backups: list[str], at_ms: float) -> dict[tuple[str, str], dict[str, bool]]:
    """Each target's state once every change up to and including `at_ms` is made (down, blackholed,
    removed, backup), for a valid timeline: what the recovery metrics need to know which paths are live
    after an event. Targets no event names are not listed."""
    state: dict[tuple[str, str], dict[str, bool]] = {}
    for _, occ in timeline(events):
        if occ.at_ms > at_ms:
            break
        now = state.setdefault(occ.target, {"down": False, "blackholed": False, "removed": False,
                                            "backup": occ.target[0] == "path" and occ.target[1] in backups})
        if occ.action is not None:
            key, _, after = _STATE[occ.action]
            now[key] = after
    return state


def not_applied(events: list[Event], transfer_s: float) -> list[Occurrence]:
    """The occurrences planned at or after the end of a fixed-size transfer (traffic.bytes): never applied,
    and the run's record says so."""
    return [o for _, o in timeline(events) if o.at_ms >= transfer_s * 1000]


def _traced_target(topology, kind: str, name: str) -> bool:
    """The target follows a rate trace: a dual-homed path, a link, or in routed and switched topologies a
    path whose ends (the hosts' interfaces, where its events act) are on a traced link."""
    if kind == "link":
        return getattr(topology.link(name), "trace", None) is not None
    if topology.kind == "dual-homed":
        return topology.path(name).trace is not None
    return any(getattr(topology.link(x), "trace", None) is not None for x in _path_end_links(topology, name))


def _path_end_links(topology, path: str) -> list[str]:
    """The links at a routed or switched path's two ends: the client's and the server's."""
    if topology.kind == "routed":
        via = topology.path(path).via
        return [via[0], via[-1]]
    p = topology.path(path)
    ends = [(c, p.client_if) for c in topology.clients] + [(topology.server, p.server_if)]
    return [own[k].name for host, k in ends if k < len(own := topology.host_links(host))]


def target_problem(i: int, event: Event, topology, duration_s: Optional[float]) -> Optional[str]:
    """An event on a target the topology lacks, a shape change where nothing is shaped, or a change
    outside the run (at or after traffic.duration; a fixed-size transfer has no end known beforehand)."""
    kind, name = event.target
    if kind == "path" and name not in topology.path_names:
        return f"events[{i}].path: no path named {name!r} (paths: {', '.join(topology.path_names)})"
    links = [x.name for x in getattr(topology, "links", [])]
    if kind == "link" and not links:
        return f"events[{i}].link: a {topology.kind} topology has no named links; give `path:`"
    if kind == "link" and name not in links:
        return f"events[{i}].link: no link named {name!r} (links: {', '.join(links)})"
    if event.shape is not None and kind == "path" and topology.kind != "dual-homed":
        return (f"events[{i}].shape: in a {topology.kind} topology the links are shaped, not the paths: "
                "give `link:`")
    if event.shape is not None and kind == "link" and topology.link(name).bw is None:
        return f"events[{i}].shape: link {name!r} is not shaped (no bw), so there is nothing to change"
    traced = _traced_target(topology, kind, name)
    actions = {event.do} if isinstance(event.do, str) else set(event.do or ())
    if traced and (event.shape is not None or actions & {"blackhole", "restore"}):
        field = "shape" if event.shape is not None else "do"
        return (f"events[{i}].{field}: {kind} {name!r} follows a trace, whose every step sets its shaping anew: "
                f"a `shape` or a blackhole would be undone at the next step. Take it `down` instead, or "
                f"change another {kind}")
    last = event.occurrences()[-1].at_ms
    if duration_s is not None and last >= duration_s * 1000:
        field = "until" if event.every is not None else "at"
        what = "the flap's last change" if event.every is not None else "the event"
        return (f"events[{i}].{field}: {what} at {last / 1000:g}s is not within the run's traffic "
                f"(traffic.duration: {duration_s:g}s)")
    return None
