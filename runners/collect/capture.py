"""--capture: tcpdump on every interface of the chosen nodes, from before the handshake to after the last
byte, one pcap per interface (raw/<run>/pcap/<node>-<interface>.pcap). The run's subflows
(subflows-pcap.csv) are read from them with tshark when the set is reported (runners.analysis.pcap_subflows):
on the host, for a VM's set. In the TCG guest, tshark took 13.8 s to read one run's two pcaps (4.4 s of
it to start), 0.8 s on the host (2026-11-27).

Headers only by default (--snaplen 128 holds Ethernet, IP, TCP and its MPTCP options). Capture costs CPU:
under TCG each packet is copied once more, so throughput can drop.
"""
from __future__ import annotations

import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from runners.errors import RunFailure
from runners.linux.nsexec import ProcessRegistry

ROLES = ("client", "server", "routers")
DEFAULT_SNAPLEN = 128
READY_TIMEOUT_S = 15.0
# Under TCG a tcpdump falls seconds behind the traffic, and on SIGINT it drops what the kernel still holds
# for it: a 5 s transfer's pcaps ended at 2.4 s (2026-11-23). Each is stopped once its file has not grown
# for DRAIN_QUIET_S, within DRAIN_LIMIT_S in all. -U writes each packet as tcpdump gets it, and
# --immediate-mode asks libpcap for every packet as it comes (else Linux hands over a ring block only when
# it is full or after its timeout). A quiet file is not enough either: a tcpdump the emulated CPU left
# unscheduled for a while writes nothing, yet holds packets. So once the files are quiet each tcpdump is
# asked for its counts (SIGUSR1, as `kill -USR1` does by hand), and the drain ends only when every one has
# written all the kernel passed it.
# The tcpdumps are started through a process registry of their own: the traffic tool stops every process
# of the run's registry when its traffic ends, and until 2026-11-27 that ended them with SIGTERM before the
# drain began (6 and 10 packets never written in CI runs of that day).
DRAIN_QUIET_S = 2.5
DRAIN_LIMIT_S = 60.0
COUNTS_ANSWER_S = 2.0


@dataclass(frozen=True)
class CaptureSpec:
    roles: tuple[str, ...]
    snaplen: int = DEFAULT_SNAPLEN

    def to_dict(self) -> dict:
        return {"roles": list(self.roles), "snaplen": self.snaplen}


def parse_roles(text: str) -> tuple[str, ...]:
    """'client,server' -> ('client', 'server'); ValueError naming what is allowed."""
    roles = tuple(dict.fromkeys(r.strip() for r in text.split(",") if r.strip()))
    bad = [r for r in roles if r not in ROLES]
    if bad or not roles:
        raise ValueError(f"--capture takes a comma-separated list of {', '.join(ROLES)} (got {text!r})")
    return roles


def capture_nodes(spec: CaptureSpec, plan) -> list[str]:
    """The node names to capture on, in the plan's order."""
    names: list[str] = []
    if "client" in spec.roles:
        names += list(plan.all_clients)
    if "server" in spec.roles:
        names.append(plan.server)
    if "routers" in spec.roles:
        names += list(plan.routers)
    return list(dict.fromkeys(names))


@dataclass
class _Dump:
    node: str
    interface: str
    pcap: Path
    log: Path
    proc: object
    drained: dict | None = None     # its counts when the drain found it caught up (None: it never was)


class Capture:
    """One run's tcpdumps: `start` waits until each listens, `stop` lets them catch up, ends them and keeps
    the files; `close` ends any still running at once (a run that failed or was stopped)."""

    def __init__(self, spec: CaptureSpec, procs: ProcessRegistry | None = None, log=print):
        # never the registry of the run's traffic (see the comment above DRAIN_QUIET_S): the runner's
        # capture_procs, which its cleanup stops too, or one of its own
        self.spec, self.procs, self.log = spec, procs if procs is not None else ProcessRegistry(), log
        self.dumps: list[_Dump] = []

    def start(self, nodes: list, out_dir: Path) -> None:
        """A tcpdump on every interface of `nodes`, each listening when this returns; on any failure (or
        Ctrl-C) here, those already started are ended."""
        try:
            self._start(nodes, out_dir)
        except BaseException:
            self.close()
            raise

    def _start(self, nodes: list, out_dir: Path) -> None:
        out_dir.mkdir(parents=True, exist_ok=True)
        for node in nodes:
            for intf in node.intfNames():
                if intf == "lo":
                    continue
                name = f"{node.name}-{intf}"
                # "*.part.pcap", not "*.pcap.part": Ubuntu's AppArmor profile lets tcpdump write *.pcap only
                pcap, log = out_dir / f"{name}.part.pcap", out_dir / f"{name}.tcpdump.log"
                # -Z root: Debian's tcpdump would drop to its own user, which cannot write root's results
                argv = ["tcpdump", "-i", intf, "-s", str(self.spec.snaplen), "-n", "-U", "--immediate-mode", "-Z", "root",
                        "-w", str(pcap)]
                try:
                    with open(log, "wb") as err:
                        proc = self.procs.start(node, argv, stdout=err, stderr=err)
                except BaseException:
                    log.unlink(missing_ok=True)
                    raise
                self.dumps.append(_Dump(node.name, intf, pcap, log, proc))
        self._wait_listening()

    def _wait_listening(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        for d in self.dumps:
            while b"listening on" not in d.log.read_bytes():
                if d.proc.poll() is not None or time.monotonic() > deadline:
                    raise RunFailure(f"tcpdump on {d.node} {d.interface} did not start: "
                                     f"{d.log.read_text(errors='replace').strip()[-300:]}")
                time.sleep(0.02)

    def stop(self) -> list[dict]:
        """Let every tcpdump catch up, end it (SIGINT: it flushes and reports), keep its pcap; one record
        per file, with what it captured, what the kernel dropped, and what it received but never wrote."""
        self._drain()
        return self._end()

    def close(self) -> None:
        """End the tcpdumps still running without waiting for them to catch up; their pcaps are kept.
        Nothing to do after `stop`."""
        if self.dumps:
            # SIGTERM: a tcpdump cut short may not have set its handlers yet, and a shell that started the
            # testbed in the background left SIGINT ignored (CI's run: 10 s until the kill below);
            # tcpdump's handler for SIGTERM is its handler for SIGINT
            self._end(signal.SIGTERM)

    def _end(self, sig: int = signal.SIGINT) -> list[dict]:
        for d in self.dumps:
            if d.proc.poll() is None:
                d.proc.send_signal(sig)
        records = []
        for d in self.dumps:
            try:
                d.proc.wait(timeout=10)
            except Exception:   # noqa: BLE001 -- a tcpdump that will not end is killed; its file is kept
                d.proc.kill()
                d.proc.wait()
            final = d.pcap.with_name(d.pcap.name.replace(".part.pcap", ".pcap"))
            if d.pcap.exists():
                d.pcap.replace(final)
            counts = _tcpdump_counts(d.log.read_text(errors="replace"))
            if d.drained is not None and "received_by_filter" in counts:
                counts["received_after_drain"] = max(
                    0, counts["received_by_filter"] - d.drained.get("received_by_filter", 0))
            records.append({"node": d.node, "interface": d.interface, "file": f"pcap/{final.name}", **counts})
            d.log.unlink(missing_ok=True)
        self.dumps = []
        return records

    def _drain(self) -> None:
        sizes = {d.pcap: -1 for d in self.dumps}
        quiet_since = time.monotonic()
        deadline = quiet_since + DRAIN_LIMIT_S
        while time.monotonic() < deadline:
            now = {p: (p.stat().st_size if p.exists() else 0) for p in sizes}
            if now != sizes:
                sizes, quiet_since = now, time.monotonic()
            elif time.monotonic() - quiet_since >= DRAIN_QUIET_S:
                if self._caught_up():
                    return
                quiet_since = time.monotonic()
            time.sleep(0.1)

    def _caught_up(self) -> bool:
        """True when every running tcpdump answers SIGUSR1 with counts saying it wrote (or the kernel
        dropped) every packet the kernel passed it; a tcpdump too busy to answer has not caught up."""
        running = [d for d in self.dumps if d.proc is not None and d.proc.poll() is None]
        asked = {id(d): _answers(d.log) for d in running}
        for d in running:
            d.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + COUNTS_ANSWER_S
        waiting = list(running)
        while waiting and time.monotonic() < deadline:
            waiting = [d for d in waiting if _answers(d.log) <= asked[id(d)] and d.proc.poll() is None]
            if waiting:
                time.sleep(0.05)
        if waiting:
            return False
        counts = {id(d): _tcpdump_counts(d.log.read_text(errors="replace")) for d in running}
        if any(c.get("packets", 0) + c.get("dropped_by_kernel", 0) < c.get("received_by_filter", 0)
               for c in counts.values()):
            return False
        for d in running:
            d.drained = counts[id(d)]
        return True


def _answers(log: Path) -> int:
    """How many times tcpdump has printed all its counts into `log` (the kernel's drops come last)."""
    return log.read_text(errors="replace").count("dropped by kernel") if log.exists() else 0


# Packets the kernel handed tcpdump in the instant it was told to stop (the closing segments of connections
# the run's end tears down) are counted as received but never written: 0-2 per file with --immediate-mode
# (CI, 2026-11-23, when the traffic's end still stopped the tcpdumps). More than this many, when the drain
# gave up, is a capture that lost part of its run.
STRAGGLERS_ALLOWED = 5


def incomplete(record: dict) -> bool:
    """A pcap that lacks packets of the run: the kernel dropped some, or tcpdump never wrote more than the
    few that arrive as it stops. Packets the kernel passed it after the drain had found it caught up
    (`received_after_drain`: the run's traffic had ended and every packet before them was written) are
    not the run's: teardown segments can come then, and in the TCG guest none did in four runs (2026-11-27).
    So for a tcpdump the drain found caught up, only the kernel's drops make it incomplete; the
    STRAGGLERS_ALLOWED bound judges one the drain gave up on (DRAIN_LIMIT_S)."""
    after = record.get("received_after_drain") or 0
    return bool(record.get("dropped_by_kernel")) or (record.get("not_written") or 0) - after > STRAGGLERS_ALLOWED


def _tcpdump_counts(text: str) -> dict:
    out = {}
    for key, pattern in (("packets", r"(\d+) packets? captured"),
                         ("received_by_filter", r"(\d+) packets? received by filter"),
                         ("dropped_by_kernel", r"(\d+) packets? dropped by kernel")):
        found = re.findall(pattern, text)   # the last counts: SIGUSR1 may have printed earlier ones
        if found:
            out[key] = int(found[-1])
    if "packets" in out and "received_by_filter" in out:
        out["not_written"] = max(0, out["received_by_filter"] - out["packets"])
    return out
