"""The whole scenario: its parts checked against each other, and the JSON Schema of the format."""
from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from .. import placeholders
from ..expect import parse_check
from ..kernel import KERNEL_KEY, is_kernel_path, kernel_label_problem, release_matches
from .events import Event, target_problem, timeline_problem
from .runs import Expectation, Grid, Runs, ValueRange, Variant
from .settings import Mptcp, Requires, Sockets
from .topology import Topology
from .traffic import IPERF_PORTS, Traffic
from .types import SCENARIO_NAME, Strict


FORMAT_VERSION = 1


class Scenario(Strict):
    """A whole experiment: one topology, its MPTCP settings, the traffic and the runs."""

    name: Annotated[str, Field(pattern=SCENARIO_NAME)]
    description: str = ""
    topology: Topology
    requires: Requires = Field(default_factory=Requires)
    mptcp: Mptcp = Field(default_factory=Mptcp)
    traffic: Traffic = Field(default_factory=Traffic)
    sockets: Sockets = Field(default_factory=Sockets)
    runs: Runs = Field(default_factory=Runs)
    sweep: Grid = Field(
        default_factory=dict,
        description="parameter grid: every combination is a point, e.g. {paths.A.delay: [15ms, 250ms]}")
    variants: list[Variant] = Field(default_factory=list,
                                    description="named override sets; each is combined with the whole grid")
    expect: list[Expectation] = Field(default_factory=list, description="claims checked statistically per point")
    events: list[Event] = Field(default_factory=list, description="changes of paths or links during each run "
                                "(checked, not applied yet: issue 30)")

    @model_validator(mode="after")
    def _cross_refs(self) -> "Scenario":
        names = self.topology.path_names
        if self.mptcp.primary is not None and self.mptcp.primary not in names:
            raise ValueError(f"mptcp.primary: no path named {self.mptcp.primary!r} (paths: {', '.join(names)})")
        for b in self.mptcp.backup:
            if b not in names:
                raise ValueError(f"mptcp.backup: no path named {b!r} (paths: {', '.join(names)})")
        cmd = self.traffic.command
        if cmd is not None:
            for where, words in cmd.argvs():
                for ph in (ph for word in words for ph in placeholders.placeholders(word)):
                    if ":" in ph and ph.split(":", 1)[1] not in names:
                        raise ValueError(f"traffic.command.{where}: {{{ph}}} names no path "
                                         f"(paths: {', '.join(names)})")
        for i, port in enumerate(self.mptcp.signal_ports):
            if IPERF_PORTS[0] <= port <= IPERF_PORTS[1]:
                raise ValueError(f"mptcp.signal_ports[{i}]: {port} is taken by iperf3 "
                                 f"({IPERF_PORTS[0]}-{IPERF_PORTS[1]}, one port per client)")
        if len(set(self.mptcp.signal_ports)) != len(self.mptcp.signal_ports):
            raise ValueError("mptcp.signal_ports: lists a port twice")
        for i, p in enumerate(self.runs.primaries):
            if p not in names:
                raise ValueError(f"runs.primaries[{i}]: no path named {p!r} (paths: {', '.join(names)})")
        if isinstance(self.runs.tcp_on, list):
            for i, p in enumerate(self.runs.tcp_on):
                if p not in names:
                    raise ValueError(f"runs.tcp_on[{i}]: no path named {p!r} (paths: {', '.join(names)})")
        self._check_tcp_together()
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

    def _check_tcp_together(self) -> None:
        """Baselines run together only where they cannot meet: one iperf3 flow per path, on disjoint links."""
        if not self.runs.tcp_together:
            return
        paths = self.tcp_paths
        if "tcp" not in self.runs.compare or len(paths) < 2:
            raise ValueError("runs.tcp_together: needs tcp in runs.compare and at least two TCP baseline paths "
                             "(runs.tcp_on: every-path, a list, or several runs.primaries)")
        if self.traffic.tool != "iperf3":
            raise ValueError("runs.tcp_together: only with traffic.tool: iperf3 (a command is one client)")
        links = {p: self.topology.links_of(p) for p in paths}
        if any(v is None for v in links.values()):
            raise ValueError(f"runs.tcp_together: not in a {self.topology.kind} topology, where the links a path "
                             "crosses depend on the switches; run the baselines one after another")
        for i, a in enumerate(paths):
            for b in paths[i + 1:]:
                shared = sorted(links[a] & links[b])
                if shared:
                    raise ValueError(f"runs.tcp_together: paths {a} and {b} share link(s) {', '.join(shared)}, so "
                                     "their baselines would compete; run them one after another")

    @model_validator(mode="after")
    def _events(self) -> "Scenario":
        """Unique names, known targets, within the run, and a timeline each target can follow."""
        seen: dict[str, int] = {}
        for i, e in enumerate(self.events):
            if e.name in seen:
                raise ValueError(f"events[{i}].name: event name {e.name!r} is used twice "
                                 f"(first: events[{seen[e.name]}])")
            seen[e.name] = i
            problem = target_problem(i, e, self.topology, self.traffic.duration)
            if problem:
                raise ValueError(problem)
        problem = timeline_problem(self.events, self.mptcp.backup)
        if problem:
            raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _kernels(self) -> "Scenario":
        """Kernel sweep values are kernels; a check that names a kernel needs a kernel sweep that has it."""
        grids = [("sweep", self.sweep)] + [(f"variants[{i}].sweep", v.sweep) for i, v in enumerate(self.variants)]
        labels: list[str] = []
        for where, grid in grids:
            values = grid.get(KERNEL_KEY)
            if values is None:
                continue
            if isinstance(values, ValueRange):
                raise ValueError(f"{where}.kernel: list the kernels, e.g. [6.1, 6.12]")
            for j, v in enumerate(values):
                problem = kernel_label_problem(v)
                if problem:
                    raise ValueError(f"{where}.kernel[{j}]: {problem}")
            if len(set(values)) != len(values):
                raise ValueError(f"{where}.kernel: lists a kernel twice")
            labels += values
        for i, v in enumerate(self.variants):
            if KERNEL_KEY in v.set:
                problem = kernel_label_problem(v.set[KERNEL_KEY])
                if problem:
                    raise ValueError(f"variants[{i}].set.kernel: {problem}")
                labels.append(v.set[KERNEL_KEY])
        for i, e in enumerate(self.expect):
            for k in parse_check(e.check).kernels:
                if not labels:
                    raise ValueError(f"expect[{i}].check: names kernel {k}, but the scenario does not sweep kernels "
                                     "(add `sweep: {kernel: [6.1, 6.12]}`, or run with --kernel A --kernel B)")
                if not any(release_matches(k, x) or is_kernel_path(x) for x in labels):
                    raise ValueError(f"expect[{i}].check: kernel {k} is not among the swept kernels "
                                     f"({', '.join(dict.fromkeys(labels))})")
        return self

    @property
    def primary(self) -> str:
        return self.mptcp.primary or self.topology.path_names[0]

    @property
    def primaries(self) -> list[str]:
        return list(self.runs.primaries) or [self.primary]

    @property
    def tcp_paths(self) -> list[str]:
        on = self.runs.tcp_on
        return self.topology.path_names if on == "every-path" else self.primaries if on == "primary" else list(on)

    @property
    def efficiency_paths(self) -> list[str] | None:
        """Paths whose TCP-alone throughputs sum to the efficiency's denominator; None: no efficiency."""
        return None if self.runs.tcp_on == "primary" or "tcp" not in self.runs.compare else self.tcp_paths


def json_schema() -> dict:
    schema = Scenario.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"MPTCP testbed scenario, format v{FORMAT_VERSION}"
    return schema
