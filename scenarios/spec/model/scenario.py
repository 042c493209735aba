"""The typed scenario model (format v1).

Every field that ends up in a command line is constrained here, because the
runner executes those commands as root. Unknown keys are errors so that a
typo never silently falls back to a default.
"""
from __future__ import annotations

import os
from ipaddress import IPv4Network, IPv6Network
import typing
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field,
                      StrictInt, WithJsonSchema, model_validator)

from .. import placeholders, units
from ..expect import parse_check
from ..graph import adjacency, first_cycle_edge, first_overlap, reachable
from ..kernel import KERNEL_KEY, KERNEL_REQ, is_kernel_path, kernel_label_problem, release_matches

# pydantic looks for plugins in every installed package's entry points when the first model is built;
# the testbed uses none, and the search cost ~1 s per process in a TCG guest (2026-11-23)
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

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
        {"type": "string", "pattern": r"(?i)^\s*\d+(\.\d+)?\s*(b|kb|mb|gb|tb|kib|mib|gib|tib)?\s*$"}]}),
]


def _positive(v: float) -> float:
    if v <= 0:
        raise ValueError(f"must be greater than 0 (got {v:g})")
    return v


MIN_RATE_MBIT = 0.01   # 10 kbit/s: below it netem's rate is a few bytes per second, and tc shows it as 0


def _rate_range(v: float) -> float:
    _positive(v)
    if v < MIN_RATE_MBIT:
        raise ValueError(f"must be at least {MIN_RATE_MBIT:g} Mbit/s ('10kbit'), the least the testbed shapes "
                         f"(got {v:g})")
    if v > 100_000:
        raise ValueError(f"must be at most 100000 Mbit/s (got {v:g})")
    return v


def _delay_range(v: float) -> float:
    if v < 0 or v > 60_000:
        raise ValueError(f"must be between 0ms and 60s (got {v:g}ms)")
    return v


def _whole_seconds(v: float) -> float:
    """net.mptcp.add_addr_timeout takes whole seconds (the kernel's default: 120)."""
    if v % 1000 or not 1000 <= v <= 3_600_000:
        raise ValueError(f"must be whole seconds between 1s and 3600s (got {v:g}ms)")
    return v


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# The four shaping fields, shared by every model that shapes a link (Shaped, SwitchedLink).
LinkRate = Annotated[Rate, AfterValidator(_rate_range)]
LinkDelay = Annotated[Duration, AfterValidator(_delay_range)]
LossPercent = Annotated[float, Field(ge=0, le=100)]
QueuePackets = Annotated[StrictInt, Field(ge=1, le=1_000_000)]
DELAY_HELP = "one-way delay, applied in each direction (RTT = 2 x delay)"
LOSS_HELP = "random loss in %, per direction"
QUEUE_HELP = "bottleneck buffer in packets, beyond the packets in flight on the delay line"


class Shaped(Strict):
    """bw, delay, loss and queue of one bottleneck, shaped by netem in both directions."""

    bw: LinkRate = Field(description="bottleneck rate, Mbit/s (or '700kbit', '1Gbit')")
    delay: LinkDelay = Field(default=0.0, description=DELAY_HELP)
    loss: LossPercent = Field(default=0.0, description=LOSS_HELP)
    queue: QueuePackets = Field(default=100, description=QUEUE_HELP)


class PathSpec(Shaped):
    """One end-to-end path of a dual-homed topology: a direct link between client and server."""

    name: Ident


class DualHomed(Strict):
    kind: Literal["dual-homed"] = Field(
        description="dual-homed: a client and a server with one interface per path, each path its own link")
    paths: list[PathSpec] = Field(min_length=1, max_length=8)

    @model_validator(mode="after")
    def _unique_names(self) -> "DualHomed":
        _unique([p.name for p in self.paths], "paths", "path")
        return self

    @property
    def path_names(self) -> list[str]:
        return [p.name for p in self.paths]

    def path(self, name: str) -> PathSpec:
        return next(p for p in self.paths if p.name == name)

    @property
    def min_rate(self) -> float:
        return min(p.bw for p in self.paths)

    def links_of(self, path: str) -> set[str] | None:
        """The links a path crosses: each path of a dual-homed pair is its own link."""
        return {path}

    def path_rate(self, path: str) -> float:
        return self.path(path).bw


def _unique(names: list[str], field: str, what: str) -> None:
    seen: set[str] = set()
    for i, n in enumerate(names):
        if n in seen:
            raise ValueError(f"{field}[{i}].name: {what} name {n!r} is used twice")
        seen.add(n)


# Node names become interface names (`<node>-eth<n>`, at most 15 characters).
NodeName = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9]{0,9}$",
                                description="letters and digits, starting with a letter (at most 10)")]
Family = Literal["ipv4", "ipv6"]


class LinkSpec(Shaped):
    """A link between two nodes of a routed topology: its own subnet, shaped in both directions."""

    name: Ident
    between: Annotated[list[NodeName], Field(min_length=2, max_length=2)]
    ipv4: Optional[IPv4Network] = Field(default=None, description="subnet override, e.g. 192.168.7.0/24")
    ipv6: Optional[IPv6Network] = Field(default=None, description="subnet override, e.g. 2001:db8:7::/64")


class RoutedPath(Strict):
    """A named path: the links a subflow crosses from client to server, in one address family."""

    name: Ident
    via: list[Ident] = Field(min_length=1, description="link names from the client to the server")
    family: Optional[Family] = Field(default=None, description="default: the topology's family (ipv4 if dual)")


class HostSpec(Strict):
    family: Optional[Literal["ipv4", "ipv6", "dual"]] = None


class _PathsAndLinks:
    """Lookups by name, shared by the topology kinds that have named paths and links."""

    @property
    def path_names(self) -> list[str]:
        return [p.name for p in self.paths]

    def path(self, name: str):
        return next(p for p in self.paths if p.name == name)

    def link(self, name: str):
        return next(x for x in self.links if x.name == name)


class Routed(_PathsAndLinks, Strict):
    """Hosts and routers joined by links; static IPv4/IPv6 routes are computed from the paths and the graph."""

    kind: Literal["routed"]
    family: Literal["ipv4", "ipv6", "dual"] = Field(default="ipv4", description="families of every interface")
    client: NodeName = "h1"
    server: NodeName = "h2"
    routers: list[NodeName] = Field(default_factory=list)
    hosts: dict[NodeName, HostSpec] = Field(default_factory=dict, description="per-host settings (family)")
    links: list[LinkSpec] = Field(min_length=1, max_length=250)
    paths: list[RoutedPath] = Field(min_length=1, max_length=8)

    def node_family(self, node: str) -> set[str]:
        fam = (self.hosts.get(node).family if node in self.hosts and self.hosts[node].family else None) \
            or self.family
        return {"ipv4", "ipv6"} if fam == "dual" else {fam}

    def path_family(self, path: RoutedPath) -> str:
        return path.family or ("ipv6" if self.family == "ipv6" else "ipv4")

    def links_of(self, path: str) -> set[str] | None:
        return set(self.path(path).via)

    def path_rate(self, path: str) -> float:
        """The path's bottleneck: its slowest link."""
        return min(self.link(x).bw for x in self.path(path).via)

    @property
    def nodes(self) -> list[str]:
        out = [self.client, self.server] + list(self.routers)
        for link in self.links:
            out += [n for n in link.between if n not in out]
        return list(dict.fromkeys(out))

    @property
    def min_rate(self) -> float:
        return min(x.bw for x in self.links)

    @model_validator(mode="after")
    def _graph(self) -> "Routed":
        _unique([x.name for x in self.links], "links", "link")
        _unique([p.name for p in self.paths], "paths", "path")
        if self.client == self.server:
            raise ValueError("server: the client and the server must be different hosts")
        for i, r in enumerate(self.routers):
            if r in (self.client, self.server) or self.routers.index(r) != i:
                raise ValueError(f"routers[{i}]: {r!r} is the client, the server or listed twice")
        known = {self.client, self.server, *self.routers, *self.hosts}
        for i, link in enumerate(self.links):
            for n in link.between:
                if n not in known:
                    raise ValueError(f"links[{i}].between: unknown node {n!r} (nodes: {', '.join(sorted(known))}; "
                                     "add routers to `routers`, hosts to `hosts`)")
            if link.between[0] == link.between[1]:
                raise ValueError(f"links[{i}].between: a link needs two different nodes")
            fams = self.node_family(link.between[0]) & self.node_family(link.between[1])
            for fam, subnet in (("ipv4", link.ipv4), ("ipv6", link.ipv6)):
                if subnet is not None and fam not in fams:
                    raise ValueError(f"links[{i}].{fam}: an {fam.upper().replace('IPV', 'IPv')} subnet on a link "
                                     f"whose ends do not use {fam} (topology.family: {self.family})")
            if link.ipv4 is not None and link.ipv4.prefixlen > 30:
                raise ValueError(f"links[{i}].ipv4: {link.ipv4} is too small for two hosts (use /30 or larger)")
            if link.ipv6 is not None and link.ipv6.prefixlen > 126:
                raise ValueError(f"links[{i}].ipv6: {link.ipv6} is too small for two hosts (use /126 or larger)")
        clash = first_overlap([(i, n) for i, x in enumerate(self.links) for n in (x.ipv4, x.ipv6) if n is not None])
        if clash:
            (i, na), (j, nb) = clash
            raise ValueError(f"links[{j}].ipv{nb.version}: {nb} overlaps {na} of link {self.links[i].name!r}")
        # client and server must be connected at all
        if self.server not in reachable(adjacency((x.name, *x.between) for x in self.links), self.client):
            raise ValueError(f"links: the server {self.server!r} cannot be reached from the client {self.client!r}")
        names = {x.name: x for x in self.links}
        for i, p in enumerate(self.paths):
            at = self.client
            fam = self.path_family(p)
            visited = [at]
            for j, ln in enumerate(p.via):
                if ln not in names:
                    raise ValueError(f"paths[{i}].via[{j}]: no link named {ln!r}")
                ends = names[ln].between
                if at not in ends:
                    raise ValueError(f"paths[{i}].via[{j}]: link {ln!r} ({ends[0]}-{ends[1]}) does not touch "
                                     f"{at!r}; list the links in order from {self.client!r}")
                at = ends[1] if ends[0] == at else ends[0]
                if at in visited:
                    raise ValueError(f"paths[{i}].via[{j}]: the path visits {at!r} twice")
                visited.append(at)
            if at != self.server:
                raise ValueError(f"paths[{i}].via: ends at {at!r}, not at the server {self.server!r}")
            for n in visited:
                if fam not in self.node_family(n):
                    raise ValueError(f"paths[{i}].family: {n!r} does not use {fam}")
        return self


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

    @model_validator(mode="after")
    def _shaping_needs_rate(self) -> "SwitchedLink":
        if self.bw is None and (self.delay or self.loss or "queue" in self.model_fields_set):
            raise ValueError("bw: delay, loss and queue are shaped by netem at a rate; give `bw` too")
        return self

    @property
    def shaped(self) -> Optional[Shaped]:
        if self.bw is None:
            return None
        return Shaped(bw=self.bw, delay=f"{self.delay}ms", loss=self.loss, queue=self.queue)


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


class Switched(_PathsAndLinks, Strict):
    """Hosts on switches: one server, one or more clients, links with their own shaping."""

    kind: Literal["switched"]
    server: NodeName = "h1"
    clients: list[NodeName] = Field(default_factory=lambda: ["h2"], min_length=1, max_length=16,
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
        _unique([x.name for x in self.links], "links", "link")
        _unique([p.name for p in self.paths], "paths", "path")
        _unique([s.name for s in self.switches], "switches", "switch")
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


# A new topology kind: a model class here (with its `kind` Literal), one module in topologies/, and its
# line in topologies/kinds.py. Everything else reads the kinds from this union.
TOPOLOGY_CLASSES = (DualHomed, Routed, Switched)
Topology = Annotated[Union[TOPOLOGY_CLASSES], Field(discriminator="kind")]
TOPOLOGY_KINDS = tuple(typing.get_args(c.model_fields["kind"].annotation)[0] for c in TOPOLOGY_CLASSES)


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
    endpoints: Literal["signal", "subflow", "none"] = Field(
        default="signal",
        description="signal: the server announces its other paths' addresses (ADD_ADDR); "
                    "subflow: the client opens subflows from its other interfaces, with source routing; "
                    "none: no endpoints, MPTCP with its initial subflow only")
    signal_ports: list[Annotated[int, Field(ge=1024, le=65535)]] = Field(
        default_factory=list,
        description="extra server ports announced on the primary path's server address (signal endpoints "
                    "with a port): one more subflow over the same address pair per port")
    limits: Limits = Field(default_factory=Limits)
    add_addr_timeout: Optional[Annotated[Duration, AfterValidator(_whole_seconds)]] = Field(
        default=None,
        description="net.mptcp.add_addr_timeout: when an unacknowledged ADD_ADDR is sent again; default: "
                    "the kernel's (120s), so an ADD_ADDR lost on a lossy primary path delays the other subflows")


IPERF_PORTS = (5201, 5216)   # iperf3 servers: one port per client


def _argv_words(argv: list[str]) -> list[str]:
    for word in argv:
        if "\x00" in word:
            raise ValueError("a command word may not contain a NUL byte")
        problem = placeholders.word_problem(word)
        if problem:
            raise ValueError(problem)
    return argv


def _word(v: Any) -> Any:
    """`-t, 10` in YAML gives an int: a number is a word as written; anything else must be a string."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return str(v)
    return v


Word = Annotated[str, BeforeValidator(_word), WithJsonSchema({"type": ["string", "number"]})]
Argv = Annotated[list[Word], Field(min_length=1), AfterValidator(_argv_words)]


class CommandTool(Strict):
    """Another multipath tool in place of iperf3 (e.g. a tunnel such as MPT), as argument lists.

    Placeholders: {server_ip} {client_ip} (the primary path's), {server_ip:B}
    {client_ip:B} (path B's), {port}, {duration}, {bytes}, {interval}; {{ and
    }} are literal braces. No shell is involved. The same metrics are collected
    around it; throughput is the receiver's per-path byte counters over the
    client command's run time, unless `result: json` reads it from the client's
    output.
    """

    server: Optional[Argv] = Field(default=None, description="started in the server's namespace before the "
                                                             "client, stopped (SIGTERM) after it")
    client: Argv = Field(description="runs in the client's namespace; its exit ends the transfer")
    setup_client: list[Argv] = Field(default_factory=list, description="run in the client before each run")
    setup_server: list[Argv] = Field(default_factory=list, description="run in the server before each run")
    ready_port: Optional[StrictInt] = Field(default=None, ge=1, le=65535,
                                            description="wait until the server listens on this TCP or UDP port")
    result: Literal["counters", "json"] = Field(
        default="counters", description="json: the client prints a JSON object with throughput_mbps "
                                        "(or bytes and seconds)")
    mptcpize: bool = Field(default=False, description="in mptcp runs, wrap both commands in `mptcpize run`")

    def argvs(self) -> list[tuple[str, list[str]]]:
        """Every command with where it is in the file ('client', 'setup_server[1]'), in the order they run."""
        out = [(f"setup_client[{i}]", a) for i, a in enumerate(self.setup_client)]
        out += [(f"setup_server[{i}]", a) for i, a in enumerate(self.setup_server)]
        if self.server is not None:
            out.append(("server", self.server))
        return out + [("client", self.client)]


class Traffic(Strict):
    # checked against the registered tools (runners/traffic, TOOLS) when the scenario is laid out
    tool: Annotated[str, Field(pattern=IDENT)] = Field(
        default="iperf3", description="iperf3 | command | another tool registered in runners/traffic (TOOLS)")
    command: Optional[CommandTool] = Field(default=None, description="with tool: command, what to run")
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
        if self.tool == "command" and self.command is None:
            raise ValueError("command: tool: command needs a `command:` section (client, optionally server)")
        if self.tool != "command" and self.command is not None:
            raise ValueError("command: only with tool: command")
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
    pause: Annotated[Duration, AfterValidator(_delay_range)] = Field(
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


def _buffer_triple(v: list[int]) -> list[int]:
    if not v[0] <= v[1] <= v[2]:
        raise ValueError(f"must be [min, initial, max] with min <= initial <= max (got {v})")
    if v[2] > 1 << 30:
        raise ValueError(f"max must be at most 1GiB (got {v[2]})")
    return v


BufferTriple = Annotated[list[Annotated[Size, AfterValidator(_positive)]],
                         Field(min_length=3, max_length=3), AfterValidator(_buffer_triple)]


class Sockets(Strict):
    """TCP buffer sysctls in the hosts' namespaces (never the root one), for TCP and MPTCP alike.

    Why: on kernels before 6.7 an MPTCP socket's send buffer follows its
    largest subflow's, not their sum, so with several subflows and queueing
    delay the sender runs out of buffer before the paths are full. A large
    initial value (the middle one) lifts that limit for both TCP and MPTCP.
    """

    send: Optional[BufferTriple] = Field(default=None, description="net.ipv4.tcp_wmem: [min, initial, max]")
    receive: Optional[BufferTriple] = Field(default=None, description="net.ipv4.tcp_rmem: [min, initial, max]")




class Requires(Strict):
    """What the scenario needs from the kernel; the VM backend boots a kernel that has it."""

    kernel: Optional[Annotated[str, Field(pattern=KERNEL_REQ)]] = Field(
        default=None, description="kernel version constraint, e.g. '>=6.12' (the VM backend picks the newest "
                                  "kernel in /boot that satisfies it)")


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
