"""The traffic of a run: iperf3 or another tool, and a command tool's argument lists."""
from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from pydantic import AfterValidator, BeforeValidator, Field, StrictInt, WithJsonSchema, model_validator

from .. import placeholders
from .types import IDENT, Size, Strict, positive


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
    duration: Optional[Annotated[float, AfterValidator(positive)]] = Field(
        default=None, le=3600, description="seconds of traffic; exclusive with bytes")
    bytes: Optional[Annotated[Size, AfterValidator(positive)]] = Field(
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
