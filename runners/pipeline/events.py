"""Applying a run's events during its traffic (issue 30): one scheduler thread on a monotonic clock that
starts with the traffic (the per-path sampler's start, so events and samples share one time base), each
change recorded with its planned time, the time it was applied and how long its commands took; then
every touched target put back before the next run.

The commands are planned, purely, by topologies.events; this module only runs them at their times."""
from __future__ import annotations

import re
import subprocess
import threading
import time
from typing import Callable, Optional

from scenarios.spec.traces import load_trace, trace_files
from topologies.events import NodeCommands, PlannedChange, plan_changes, restore_commands
from topologies.plan import Shaping

from runners.collect.mptcp_monitor import MptcpMonitor
from runners.errors import RunFailure
from runners.linux.nsexec import at_once, run, run_batch
from runners.pipeline.shaping import parse_netem, shaping_mismatches, wanted

MPTCP_ONLY = ("backup", "nobackup", "endpoint-remove", "endpoint-add")


class EventScheduler(threading.Thread):
    """Applies `changes` (in time order) at t0 + at_ms, where t0 is given by begin()."""

    def __init__(self, host, changes: list[PlannedChange], mptcp: bool, log: Callable[[str], None]):
        super().__init__(daemon=True, name="events")
        self.host, self.changes, self.mptcp, self.log = host, changes, mptcp, log
        self.t0: Optional[float] = None
        self.applied: list[dict] = []
        self.made: list[PlannedChange] = []
        self.removed_endpoints: dict[tuple[str, str], list[str]] = {}   # (node, address) -> its `add` argv
        self._halt = threading.Event()
        # one `tc -batch -` and one `ip -batch -` per node, started before the traffic: a change is then a
        # line written to it, not a process start (100-900 ms under TCG, which lagged a trace's steps and
        # delayed a link going down by as much)
        self.feeders: dict[tuple[str, str], BatchFeeder] = {}
        self._current = ""
        for ch in changes:
            for nc in ch.commands:
                tool = batch_tool(nc.argvs)
                if tool:
                    self._feeder(host.network.get(nc.node), tool)

    def begin(self, t0: float) -> None:
        self.t0 = t0
        self.start()

    def _feeder(self, node, tool: str) -> "BatchFeeder":
        if (node.name, tool) not in self.feeders:
            self.feeders[(node.name, tool)] = BatchFeeder(node, tool)
        return self.feeders[(node.name, tool)]

    def run(self) -> None:
        for ch in self.changes:
            if self._halt.wait(max(0.0, self.t0 + ch.at_ms / 1000 - time.monotonic())):
                return
            self.applied.append(self._apply(ch))

    def _apply(self, ch: PlannedChange) -> dict:
        entry = {"event": ch.event, "target": f"{ch.target[0]} {ch.target[1]}", "action": ch.action,
                 "detail": ch.detail, "planned_s": round(ch.at_ms / 1000, 4)}
        if not self.mptcp and ch.action in MPTCP_ONLY:
            return {**entry, "applied_s": None, "not_applied": "a TCP run has no MPTCP endpoints"}
        started = time.monotonic()
        self._current = f"{ch.event} at {ch.at_ms / 1000:g}s"
        try:
            at_once(self._node, ch.commands)
            error = None
        except Exception as e:   # recorded and flagged; the traffic goes on, the run fails after it
            error = str(e)[:300]
        done = time.monotonic()
        self.made.append(ch)
        entry.update(applied_s=round(started - self.t0, 4), done_s=round(done - self.t0, 4),
                     drift_ms=round((started - self.t0) * 1000 - ch.at_ms, 1), took_ms=round((done - started) * 1000, 1))
        if error is None and ch.action == "shape":   # a trace's steps are read back once, at the end
            error = self._read_back(ch)
        if error:
            entry["error"] = error
        return entry

    def _read_back(self, ch: PlannedChange) -> Optional[str]:
        """A shape change read back on each interface (after the timing: it adds a process start)."""
        nodes = {i.name: i.node for i in self.host.plan.shaped_interfaces()}
        try:
            for dev, shaping in ch.shaping.items():
                check_netem(self.host.network.get(nodes[dev]), dev, shaping, f"event {ch.event} on {dev}")
        except Exception as e:   # noqa: BLE001 - recorded as the change's error
            return str(e)[:300]
        return None

    def _node(self, nc: NodeCommands) -> None:
        node = self.host.network.get(nc.node)
        if nc.endpoint is not None:
            self._endpoint(node, *nc.endpoint)
        tool = batch_tool(nc.argvs)
        if tool:
            self._feeder(node, tool).send([list(a) for a in nc.argvs], self._current)
        elif nc.argvs:
            run_batch(node, [list(a) for a in nc.argvs])

    def _endpoint(self, node, verb: str, address: str) -> None:
        """Delete the endpoint of `address` by its id (0: the initial subflow's address), keeping what
        adds it back; or add back what was deleted."""
        key = (node.name, address)
        if verb == "endpoint-add":
            run(node, self.removed_endpoints.pop(key, ["ip", "mptcp", "endpoint", "add", address, "subflow"]))
            return
        shown = run(node, ["ip", "mptcp", "endpoint", "show"]).out
        found = endpoint_line(shown, address)
        if found is None:
            run(node, ["ip", "mptcp", "endpoint", "delete", "id", "0", address])
            self.removed_endpoints[key] = ["ip", "mptcp", "endpoint", "add", address, "subflow"]
            return
        endpoint_id, words = found
        run(node, ["ip", "mptcp", "endpoint", "delete", "id", endpoint_id])
        self.removed_endpoints[key] = ["ip", "mptcp", "endpoint", "add", *words]

    def finish(self, traffic_s: float) -> list[dict]:
        """Stop at the traffic's end; the changes not made by then are recorded as not applied, and a
        change tc refused is recorded with its error."""
        self._halt.set()
        if self.is_alive():
            self.join(timeout=30)
        for feeder in self.feeders.values():
            for what, error in feeder.close():
                entry = next((a for a in self.applied if f"{a['event']} at {a['planned_s']:g}s" == what), None)
                if entry is not None:
                    entry["error"] = (entry.get("error", "") + " " + error).strip()
        done = {(a["event"], a["planned_s"]) for a in self.applied}
        for ch in self.changes:
            if (ch.event, round(ch.at_ms / 1000, 4)) not in done:
                self.applied.append({"event": ch.event, "target": f"{ch.target[0]} {ch.target[1]}",
                                     "action": ch.action, "detail": ch.detail, "planned_s": round(ch.at_ms / 1000, 4),
                                     "applied_s": None,
                                     "not_applied": f"the traffic had ended ({traffic_s:.2f} s)"})
        return self.applied

    def restore(self) -> None:
        """Every target back to its configured state, shaping read back; the next MPTCP run sets its
        endpoints afresh when a change touched them."""
        if not self.made:
            return
        sc, plan = self.host.scenario, self.host.plan
        todo = restore_commands(sc, plan, self.made)
        at_once(lambda nc: run_batch(self.host.network.get(nc.node), [list(a) for a in nc.argvs]), todo)
        shaped = {i.name: i for i in plan.shaped_interfaces()}
        touched = {(nc.node, a[4]) for nc in todo for a in nc.argvs if a[:3] == ("tc", "qdisc", "change")}
        for node, dev in touched:
            check_netem(self.host.network.get(node), dev, shaped[dev].shaping, f"after the run's events, {dev}")
        if any(ch.action in MPTCP_ONLY for ch in self.made):
            self.host.mptcp.endpoint_state.clear()


def batch_tool(argvs) -> Optional[str]:
    """`tc` or `ip` when every command is that tool's and none has an option before its object (a batch
    line cannot carry `-6`); None otherwise."""
    tools = {a[0] for a in argvs}
    if len(tools) != 1 or not argvs or next(iter(tools)) not in ("tc", "ip"):
        return None
    return None if any(a[1].startswith("-") for a in argvs) else next(iter(tools))


class BatchFeeder:
    """`tc -force -batch -` or `ip -force -batch -` in one node's namespace, fed a line per command as
    changes come (either runs each line as it arrives); close() says which lines it refused, by what they
    were for."""

    def __init__(self, node, tool: str):
        self.node = node
        self.proc = node.popen([tool, "-force", "-batch", "-"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
        self.lines: list[str] = []     # what each line was for, by its number - 1

    def send(self, argvs: list[list[str]], what: str) -> None:
        text = "".join(" ".join(a[1:]) + "\n" for a in argvs)
        self.lines += [what] * len(argvs)
        self.proc.stdin.write(text.encode())
        self.proc.stdin.flush()

    def close(self) -> list[tuple[str, str]]:
        """(what, tc's message) for every refused line."""
        try:   # communicate() closes tc's input: it ends once it has run every line
            err = self.proc.communicate(timeout=30)[1].decode(errors="replace")
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            return [("", "a -batch process did not finish")]
        out, message = [], []
        for line in err.splitlines():
            m = re.match(r"Command failed -:(\d+)", line)
            if m:
                k = int(m.group(1)) - 1
                out.append((self.lines[k] if k < len(self.lines) else "", " ".join(message) or line))
                message = []
            else:
                message.append(line.strip())
        return out


class RunEvents:
    """A run's events and the MPTCP monitors that watch them: started before the traffic (the scheduler
    waits for the traffic's clock), ended after it, the network put back in every case."""

    def __init__(self, ctx, primary: str, mptcp: bool):
        self.ctx = ctx
        traces = {name: load_trace(ctx.network.base_dir / name) for _, name in trace_files(ctx.scenario)}
        self.scheduler = EventScheduler(ctx, plan_changes(ctx.scenario, ctx.plan, primary, traces), mptcp, ctx.log)
        self.monitor = MptcpMonitor([ctx.network.get(n) for n in ctx.plan.hosts]) if mptcp else None
        ctx.events = self.scheduler
        self.applied: list[dict] = []
        self.monitor_lines: dict | None = None

    def end(self, traffic_s: float) -> None:
        """Stop the scheduler and the monitors, keep what they saw, and put every target back."""
        self.ctx.events = None
        try:
            self.applied = self.scheduler.finish(traffic_s)
            if self.monitor is not None:
                self.monitor_lines = self.monitor.stop(self.scheduler.t0 or time.monotonic())
        finally:
            self.scheduler.restore()
        for a in (a for a in self.applied if a.get("error")):
            self.ctx.log(f"warning: event {a['event']} at {a['planned_s']:g}s failed: {a['error']}")


def check_netem(node, dev: str, shaping: Shaping, what: str) -> dict:
    """Read the shaping of `dev` back (a root netem, or a TBF with netem under it); a difference from
    `shaping` stops the run."""
    got = parse_netem(run(node, ["tc", "-j", "qdisc", "show", "dev", dev]).out)   # one device: no "dev" keys
    bad = shaping_mismatches(wanted(shaping), got)
    if bad:
        raise RunFailure(f"{what}: the netem did not take: {'; '.join(bad)}")
    return got


def endpoint_line(shown: str, address: str) -> Optional[tuple[str, list[str]]]:
    """From `ip mptcp endpoint show` ("10.0.2.2 id 2 signal dev h2-eth1"), the id of `address`'s
    endpoint and the words that add it back as it was; None when it has none."""
    for line in shown.splitlines():
        words = line.split()
        if words and words[0] == address and "id" in words[:-1]:
            return words[words.index("id") + 1], words
    return None
