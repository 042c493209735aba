"""The switched topology: hosts on switches, the switches' links, paths and the OpenFlow controller."""
from __future__ import annotations

from ipaddress import IPv4Network
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import Field, StrictInt, model_validator

from ...graph import first_cycle_edge, first_overlap
from ..types import DELAY_HELP, LOSS_HELP, QUEUE_HELP, TRACE_HELP, Ident, TraceSpec, LinkDelay, LinkRate, LossPercent, QueuePackets, \
    Shaped, Strict
from .shared import NodeName, PathsAndLinks, unique_names


SwitchType = Literal["ovs", "ovs-user", "bridge"]
# A user's os-ken app: a .py file, relative to the scenario file or absolute.
APP_FILE = r"^[A-Za-z0-9_./-]{1,200}\.py$"


class SwitchSpec(Strict):
    """A layer-2 switch: Open vSwitch (kernel or userspace datapath) or a Linux bridge."""

    name: NodeName
    type: SwitchType = Field(default="ovs", description="ovs: kernel datapath; ovs-user: userspace datapath "
                             "(offloads turned off on its links); bridge: Linux bridge (no OpenFlow)")
    controller: bool = Field(default=False, description="connect to the scenario's controller (OpenFlow 1.3); "
                             "false: a standalone learning switch")


class SwitchedLink(Strict):
    """A link of a switched topology; shaped by netem in both directions when `bw` is given."""

    name: Ident
    between: Annotated[list[NodeName], Field(min_length=2, max_length=2)]
    bw: Optional[LinkRate] = Field(default=None, description="rate, Mbit/s; without it the link is not shaped")
    delay: LinkDelay = Field(default=0.0, description=DELAY_HELP)
    loss: LossPercent = Field(default=0.0, description=LOSS_HELP)
    queue: QueuePackets = Field(default=100, description=QUEUE_HELP)
    trace: Optional[TraceSpec] = Field(default=None, description=TRACE_HELP)

    @model_validator(mode="after")
    def _shaping_needs_rate(self) -> "SwitchedLink":
        if self.bw is None and (self.delay or self.loss or "queue" in self.model_fields_set or self.trace):
            raise ValueError("bw: delay, loss and queue are shaped by netem at a rate, and so is a trace; "
                             "give `bw` too")
        return self

    @property
    def shaped(self) -> Optional[Shaped]:
        if self.bw is None:
            return None
        return Shaped(bw=self.bw, delay=f"{self.delay}ms", loss=self.loss, queue=self.queue, trace=self.trace)


class SwitchedPath(Strict):
    """An address pair per client: the client's n-th link to the server's m-th link, in its own subnet.

    Two paths on one client interface give that interface a second address
    (an IP alias), as in E5's Exp 3.
    """

    name: Ident
    client_if: StrictInt = Field(default=0, ge=0, le=15, description="index of the client's link (file order)")
    server_if: StrictInt = Field(default=0, ge=0, le=15, description="index of the server's link (file order)")
    ipv4: Optional[IPv4Network] = Field(default=None, description="subnet override; default 10.0.<k>.0/24 "
                                        "for the k-th path (server .1, clients .11, .12, ...)")


class SteerSpec(Strict):
    """Subflow steering (E2's LISP router): each TCP flow leaves on uplink `port % N`."""

    uplinks: dict[NodeName, Annotated[list[Ident], Field(min_length=2, max_length=16)]] = Field(
        description="per steering switch, its uplink links in order: uplink i carries flows with port % N == i")
    by: Literal["client-port", "server-port"] = Field(
        default="client-port", description="client-port: the flow's source port as the client sends it "
                                           "(the LISP rule); server-port: the port it connects to")
    server_ports: list[Annotated[int, Field(ge=1, le=65535)]] = Field(
        default_factory=list, description="steer only TCP flows to these server ports; default: all TCP")


class ControllerSpec(Strict):
    """The OpenFlow controller of the switches that have `controller: true`."""

    app: Union[Literal["learning", "steering"], Annotated[str, Field(pattern=APP_FILE)]] = Field(
        default="learning", description="learning | steering | a path to your own os-ken app (.py), "
                                        "relative to the scenario file")
    port: StrictInt = Field(default=6653, ge=1024, le=65535, description="OpenFlow TCP port on 127.0.0.1")
    steer: Optional[SteerSpec] = Field(default=None, description="with app: steering (or your own app)")
    config: dict[str, Any] = Field(default_factory=dict, description="passed to your own app as JSON")


class Switched(PathsAndLinks, Strict):
    """Hosts on switches: one server, one or more clients, links with their own shaping."""

    kind: Literal["switched"]
    server: NodeName = "h1"
    clients: list[NodeName] = Field(default_factory=lambda: ["h2"], min_length=1, max_length=32,
                                    description="every client runs its own transfer to the server, at once")
    switches: list[SwitchSpec] = Field(min_length=1, max_length=32)
    controller: Optional[ControllerSpec] = None
    links: list[SwitchedLink] = Field(min_length=2, max_length=250)
    paths: list[SwitchedPath] = Field(min_length=1, max_length=8)

    def links_of(self, path: str) -> set[str] | None:
        """Unknown: which links a path's frames cross is up to the switches (learning or a controller)."""
        return None

    def path_rate(self, path: str) -> float:
        """Not known per path (see links_of): the slowest shaped link, which leans long in estimates."""
        return self.min_rate

    @property
    def switch_names(self) -> list[str]:
        return [s.name for s in self.switches]

    def host_links(self, host: str) -> list[SwitchedLink]:
        return [x for x in self.links if host in x.between]

    @property
    def min_rate(self) -> float:
        rates = [x.bw for x in self.links if x.bw is not None]
        return min(rates) if rates else 1000.0

    @model_validator(mode="after")
    def _graph(self) -> "Switched":
        unique_names([x.name for x in self.links], "links", "link")
        unique_names([p.name for p in self.paths], "paths", "path")
        unique_names([s.name for s in self.switches], "switches", "switch")
        self._check_nodes()
        self._check_links()
        self._check_paths()
        self._check_no_layer2_loops(self._steered_links())
        return self

    @property
    def hosts(self) -> list[str]:
        return [self.server, *self.clients]

    def _check_nodes(self) -> None:
        for i, c in enumerate(self.clients):
            if c == self.server or self.clients.index(c) != i:
                raise ValueError(f"clients[{i}]: {c!r} is the server or listed twice")
        for i, s in enumerate(self.switches):
            if s.name in self.hosts:
                raise ValueError(f"switches[{i}].name: {s.name!r} is also a host")
            if s.controller and s.type == "bridge":
                raise ValueError(f"switches[{i}].controller: a Linux bridge speaks no OpenFlow; use type ovs or ovs-user")
        if any(s.controller for s in self.switches) and self.controller is None:
            raise ValueError("controller: switches have `controller: true` but no controller is given")

    def _check_links(self) -> None:
        hosts, sw = self.hosts, self.switch_names
        for i, x in enumerate(self.links):
            a, b = x.between
            for n in (a, b):
                if n not in hosts and n not in sw:
                    raise ValueError(f"links[{i}].between: unknown node {n!r} (hosts: {', '.join(hosts)}; "
                                     f"switches: {', '.join(sw)})")
            if a == b:
                raise ValueError(f"links[{i}].between: a link needs two different nodes")
            if a in hosts and b in hosts:
                raise ValueError(f"links[{i}].between: hosts connect to switches here; use kind: routed "
                                 "or dual-homed for host-to-host links")
        for h in hosts:
            n = len(self.host_links(h))
            if n == 0:
                raise ValueError(f"links: host {h!r} has no link")
            if n > 16:
                raise ValueError(f"links: host {h!r} has {n} links (at most 16)")

    def _check_paths(self) -> None:
        for i, p in enumerate(self.paths):
            for h in self.clients:
                if p.client_if >= len(self.host_links(h)):
                    raise ValueError(f"paths[{i}].client_if: client {h!r} has only {len(self.host_links(h))} links")
            if p.server_if >= len(self.host_links(self.server)):
                raise ValueError(f"paths[{i}].server_if: the server has only "
                                 f"{len(self.host_links(self.server))} links")
        if len(self.clients) > 1:
            for i, p in enumerate(self.paths):
                if p.ipv4 is not None and p.ipv4.num_addresses < len(self.clients) + 16:
                    raise ValueError(f"paths[{i}].ipv4: {p.ipv4} is too small for {len(self.clients)} clients")
        clash = first_overlap([(i, p.ipv4) for i, p in enumerate(self.paths) if p.ipv4 is not None])
        if clash:
            (i, na), (j, nb) = clash
            raise ValueError(f"paths[{j}].ipv4: {nb} overlaps {na} of path {self.paths[i].name!r}")

    def _steered_links(self) -> set[str]:
        """The links named as steered uplinks (controller.steer), checked against the switches."""
        steer = self.controller.steer if self.controller else None
        if steer is None:
            if self.controller is not None and self.controller.app == "steering":
                raise ValueError("controller.steer: app: steering needs `steer:` (its uplinks)")
            return set()
        if self.controller.app == "learning":
            raise ValueError("controller.steer: needs app: steering (or your own app), not learning")
        sw = {s.name: s for s in self.switches}
        names = {x.name: x for x in self.links}
        steered: set[str] = set()
        for s, ups in steer.uplinks.items():
            if s not in sw:
                raise ValueError(f"controller.steer.uplinks.{s}: no switch named {s!r}")
            if not sw[s].controller:
                raise ValueError(f"controller.steer.uplinks.{s}: switch {s!r} is not under the controller "
                                 "(controller: true)")
            for j, ln in enumerate(ups):
                if ln not in names:
                    raise ValueError(f"controller.steer.uplinks.{s}[{j}]: no link named {ln!r}")
                if s not in names[ln].between:
                    raise ValueError(f"controller.steer.uplinks.{s}[{j}]: link {ln!r} does not touch {s!r}")
            if len(set(ups)) != len(ups):
                raise ValueError(f"controller.steer.uplinks.{s}: lists a link twice")
            steered |= set(ups)
        return steered

    def _check_no_layer2_loops(self, steered: set[str]) -> None:
        """A broadcast would circle a layer-2 loop forever. Only steered uplinks may close a loop."""
        between_switches = [(x.name, *x.between) for x in self.links if x.name not in steered
                            and x.between[0] not in self.hosts and x.between[1] not in self.hosts]
        name = first_cycle_edge(self.switch_names, between_switches)
        if name is not None:
            i = next(k for k, x in enumerate(self.links) if x.name == name)
            raise ValueError(f"links[{i}]: link {name!r} closes a layer-2 loop; remove it, or make it a "
                             "steered uplink (controller.steer.uplinks)")
