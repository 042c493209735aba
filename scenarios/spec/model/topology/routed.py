"""The routed topology: hosts and routers joined by links, each path the links it crosses."""
from __future__ import annotations

from ipaddress import IPv4Network, IPv6Network
from typing import Annotated, Literal, Optional

from pydantic import Field, model_validator

from ...graph import adjacency, first_overlap, reachable
from ..types import Ident, Shaped, Strict
from .shared import Family, NodeName, PathsAndLinks, unique_names


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


class Routed(PathsAndLinks, Strict):
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
        unique_names([x.name for x in self.links], "links", "link")
        unique_names([p.name for p in self.paths], "paths", "path")
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
