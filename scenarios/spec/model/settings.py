"""The scenario's settings beside its network: MPTCP, socket buffers, and what it needs of the kernel."""
from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import AfterValidator, Field, StrictBool, StrictInt, model_validator

from ..kernel import KERNEL_REQ
from .types import KERNEL_IDENT, Duration, Ident, Size, Strict, positive


def _whole_seconds(v: float) -> float:
    """net.mptcp.add_addr_timeout takes whole seconds (the kernel's default: 120)."""
    if v % 1000 or not 1000 <= v <= 3_600_000:
        raise ValueError(f"must be whole seconds between 1s and 3600s (got {v:g}ms)")
    return v


class Limits(Strict):
    subflows: Optional[StrictInt] = Field(default=None, ge=0, le=8,
                                          description="ip mptcp limits subflows; default: paths - 1")
    add_addr_accepted: Optional[StrictInt] = Field(default=None, ge=0, le=8,
                                                   description="ip mptcp limits add_addr_accepted; default: paths - 1")


def _seconds(v: float) -> float:
    """The MPTCP timeouts the kernel reads in whole seconds (0 turns blackhole detection off)."""
    if v % 1000 or not 0 <= v <= 3_600_000:
        raise ValueError(f"must be whole seconds between 0s and 3600s (got {v:g}ms)")
    return v


Seconds = Annotated[Duration, AfterValidator(_seconds)]
# keys of net.mptcp.* that other fields set, or that the testbed itself owns: refused with the reason
OWN_FIELDS = {
    "add_addr_timeout": "has its own field: use mptcp.add_addr_timeout",
    "scheduler": "has its own field: use mptcp.scheduler",
    "enabled": "is set by the testbed (1 in every host's namespace)",
    "pm_type": "is set by the testbed: the in-kernel path manager, with mptcp.endpoints",
    "path_manager": "is set by the testbed: the in-kernel path manager, with mptcp.endpoints",
    "available_schedulers": "is read-only",
    "available_path_managers": "is read-only",
}


class MptcpSysctls(Strict):
    """Per-namespace net.mptcp sysctls that govern failover; each unset one keeps the kernel's value.
    Whether the running kernel has a key is the probe's check (a kernel before 6.12 lacks blackhole_timeout)."""

    stale_loss_cnt: Optional[StrictInt] = Field(
        default=None, ge=1, le=1000, description="retransmission intervals without progress before a subflow "
                                                 "is marked stale (kernel default 4)")
    close_timeout: Optional[Seconds] = Field(default=None, description="how long an orphaned MPTCP socket "
                                             "lingers after close (kernel default 60s)")
    blackhole_timeout: Optional[Seconds] = Field(default=None, description="how long MPTCP is disabled after a "
                                                 "middlebox blackhole is detected; 0s: never (kernel default 3600s)")
    checksum_enabled: Optional[StrictBool] = Field(default=None, description="DSS checksums (default false)")
    allow_join_initial_addr_port: Optional[StrictBool] = Field(
        default=None, description="let peers join to the initial subflow's address and port (default true)")
    syn_retrans_before_tcp_fallback: Optional[StrictInt] = Field(
        default=None, ge=0, le=100, description="SYN+MP_CAPABLE retransmissions before falling back to TCP")

    @model_validator(mode="before")
    @classmethod
    def _own_fields(cls, data):
        if isinstance(data, dict):
            for key in data:
                if key in OWN_FIELDS:
                    raise ValueError(f"{key}: net.mptcp.{key} {OWN_FIELDS[key]}")
        return data

    def values(self) -> dict[str, str]:
        """The sysctls given, as written to net.mptcp.<key>: durations in seconds, booleans as 0 or 1."""
        out = {}
        for key in self.model_fields_set:
            v = getattr(self, key)
            if v is None:
                continue
            out[key] = str(int(v)) if isinstance(v, bool) else str(int(v // 1000)) \
                if key in ("close_timeout", "blackhole_timeout") else str(v)
        return dict(sorted(out.items()))


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
    sysctls: MptcpSysctls = Field(default_factory=MptcpSysctls,
                                  description="other net.mptcp sysctls in the hosts' namespaces, e.g. "
                                              "{stale_loss_cnt: 2, close_timeout: 10s}")


def _buffer_triple(v: list[int]) -> list[int]:
    if not v[0] <= v[1] <= v[2]:
        raise ValueError(f"must be [min, initial, max] with min <= initial <= max (got {v})")
    if v[2] > 1 << 30:
        raise ValueError(f"max must be at most 1GiB (got {v[2]})")
    return v


BufferTriple = Annotated[list[Annotated[Size, AfterValidator(positive)]],
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
