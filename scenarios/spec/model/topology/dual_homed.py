"""The dual-homed topology: a client and a server, one direct link per path."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ..types import Ident, Shaped, Strict
from .shared import unique_names


class PathSpec(Shaped):
    """One end-to-end path of a dual-homed topology: a direct link between client and server."""

    name: Ident


class DualHomed(Strict):
    kind: Literal["dual-homed"] = Field(
        description="dual-homed: a client and a server with one interface per path, each path its own link")
    paths: list[PathSpec] = Field(min_length=1, max_length=8)

    @model_validator(mode="after")
    def _unique_names(self) -> "DualHomed":
        unique_names([p.name for p in self.paths], "paths", "path")
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
