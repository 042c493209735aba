"""What the topology kinds share: node names, the check that names are unique, lookups by name."""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field


def unique_names(names: list[str], field: str, what: str) -> None:
    seen: set[str] = set()
    for i, n in enumerate(names):
        if n in seen:
            raise ValueError(f"{field}[{i}].name: {what} name {n!r} is used twice")
        seen.add(n)


# Node names become interface names (`<node>-eth<n>`, at most 15 characters).
NodeName = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9]{0,9}$",
                                description="letters and digits, starting with a letter (at most 10)")]
Family = Literal["ipv4", "ipv6"]


class PathsAndLinks:
    """Lookups by name, shared by the topology kinds that have named paths and links."""

    @property
    def path_names(self) -> list[str]:
        return [p.name for p in self.paths]

    def path(self, name: str):
        return next(p for p in self.paths if p.name == name)

    def link(self, name: str):
        return next(x for x in self.links if x.name == name)
