"""The topology kinds of the model, one module each (mirrored by topologies/), and the union of them."""
from __future__ import annotations

import typing
from typing import Annotated, Union

from pydantic import Field

from .dual_homed import DualHomed
from .routed import Routed
from .switched import Switched

# A new topology kind: a module here with its model class (its `kind` Literal) added below, the planner
# module of the same name in topologies/, and its line in topologies/kinds.py. Everything else reads the
# kinds from this union.
TOPOLOGY_CLASSES = (DualHomed, Routed, Switched)
Topology = Annotated[Union[TOPOLOGY_CLASSES], Field(discriminator="kind")]
TOPOLOGY_KINDS = tuple(typing.get_args(c.model_fields["kind"].annotation)[0] for c in TOPOLOGY_CLASSES)
