"""Every path's RTT before a run, all paths at once, each ping bound to its own path's addresses; and the
warm-up echoes that make a path's neighbours known before any echo is measured."""
from __future__ import annotations

import re
import subprocess
from typing import Any

from runners.errors import ParseError
from runners.linux.icmp_echo import EchoRequest
from runners.linux.nsexec import Argv, echo_from


class Pinger:
    """Pings from the runner's client (`host`, the RunContext: plan, client, procs, store).

    Where the runner has a thread in the client's namespaces, the echoes are sent and timed by the
    runner itself, as `ping` would (runners.linux.icmp_echo: a ping process cost 0.1-0.2 s to start in
    a TCG guest), and their text is ping's; elsewhere `ping` runs."""

    def __init__(self, host):
        self.host = host

    def warm_up(self) -> None:
        """Every path at once: unmeasured echoes until one is answered (warm_up_request)."""
        self._echo_all([warm_up_request(p.client_ip, p.server_ip) for p in self.host.plan.paths])

    def ping_paths(self, run_id: str, warm_up: bool = False) -> dict:
        """RTT of every path, all paths at once (each ping is bound to its own path's addresses); with
        `warm_up` (switched topologies), each after one answered echo (PING_AFTER_ONE_ECHO)."""
        paths = self.host.plan.paths
        measured = [measured_request(p.client_ip, p.server_ip) for p in paths]
        texts = self._echo_all(measured, after_one_echo=warm_up)
        out = {}
        for p, text in zip(paths, texts):
            self.host.store.save_raw(run_id, f"ping-{p.name}.txt", text)
            try:
                out[p.name] = parse_ping_after_warmup(text, warmup=0)
            except ParseError:
                out[p.name] = {"loss_pct": 100.0, "rtt_avg_ms": None}
        return out

    def _echo_all(self, requests: list[EchoRequest], after_one_echo: bool = False) -> list[str]:
        """Each request's output, all at once; `after_one_echo`: each path's first echo unmeasured."""
        client = self.host.client
        first = [one_echo_request(r.src, r.dst) for r in requests] if after_one_echo else []
        if first:
            echo_from(client, first)   # its outcome is not kept, as the process's was not (> /dev/null)
        done = echo_from(client, requests)
        if done is not None:
            return [outcome.text() for outcome in done]
        argvs = ([ping_after_one_echo_argv(r.src, r.dst, r.count) for r in requests] if after_one_echo
                 else [r.argv for r in requests])
        return self._ping_all(argvs)

    def _ping_all(self, argvs: list[list[str]], timeout: float = 30) -> list[str]:
        """Start every ping, then collect each one's output (stdout and stderr)."""
        procs = [self.host.procs.start(self.host.client, argv) for argv in argvs]
        outs = []
        for p in procs:
            try:
                out, err = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
            outs.append((out + err).decode(errors="replace"))
        return outs


# Echoes 20 ms apart (root may go below 0.2 s): each echo is timed alone, several may be in flight on a long
# path, and five of them cost 0.1 s, not 1 s, before every run. An 84-byte echo takes 0.07 ms to send at
# 10 Mbit/s, 0.7 ms at 1 Mbit/s: none waits behind the one before it. (50 ms apart until 2026-11-29: the
# pings step of a run took 0.35-0.45 s in a TCG guest.)
PING_INTERVAL_S = "0.02"


def measured_request(src: str, dst: str, count: int = 5) -> EchoRequest:
    """`count` measured echoes with per-reply lines. A path is warmed up first (warm_up_request)."""
    return EchoRequest(src, dst, count, float(PING_INTERVAL_S), linger=3)


# Neighbour resolution holds every echo sent before it ends: on a 250 ms path (ARP itself takes 500 ms)
# the echoes of one `ping -i 0.2` sent meanwhile measured 580 ms for 500. So before the first measured
# echo a path gets unmeasured ones, 0.2 s apart until one is answered (up to 10 s: a lossy path may
# lose a few). Once the neighbour is known it stays usable between runs (a stale entry is used at once
# and confirmed meanwhile), so this is done once per build or reshaping. Switched topologies also get
# one echo before every run's measured ones (PING_AFTER_ONE_ECHO).
def warm_up_request(src: str, dst: str) -> EchoRequest:
    return EchoRequest(src, dst, 1, 0.2, deadline=10, quiet=True)


def one_echo_request(src: str, dst: str) -> EchoRequest:
    """One unmeasured echo, waited for up to 10 s (`ping -c 1 -W 10`)."""
    return EchoRequest(src, dst, 1, 1.0, linger=10)


# Switched topologies: one unmeasured echo that must come back, then the measured ones, in one process
# per path, as every run did before 2026-11-25. A controller's flows are cleared before every run, and
# each unanswered echo is one more packet-in for it; lab 5's joins (their flows installed by the
# controller during the transfer) were timed with this. The addresses are positional parameters of
# the shell, never part of its script. (Where the runner sends the echoes itself, every path's one
# echo is answered or waited for before any path's measured ones go.)
PING_AFTER_ONE_ECHO = ('ping -n -c 1 -W 10 -I "$1" "$2" >/dev/null 2>&1; '
                       'exec ping -n -c "$3" -i "$4" -W 3 -I "$1" "$2"')


def ping_after_one_echo_argv(src: str, dst: str, count: int = 5) -> Argv:
    return ["sh", "-c", PING_AFTER_ONE_ECHO, "ping-path", src, dst, str(count), PING_INTERVAL_S]


_PING_LOSS = re.compile(r"(\d+) packets transmitted, (\d+) (?:packets )?received.*?([\d.]+)% packet loss")


_PING_REPLY = re.compile(r"icmp_seq=(\d+) .*?time=([\d.]+) ms")


def parse_ping_after_warmup(text: str, warmup: int = 1) -> dict[str, Any]:
    """`ping` with per-reply lines -> loss and RTT of the echoes after the first `warmup` ones.

    The first echo pays for neighbour resolution; one ping with it left out
    measures what a separate warm-up ping and a second ping did, one process sooner.
    """
    m = _PING_LOSS.search(text)
    if not m:
        raise ParseError(f"ping summary not found in {text[-300:]!r}")
    sent = int(m.group(1)) - warmup
    if sent <= 0:
        raise ParseError(f"ping sent {m.group(1)} echoes, no more than the {warmup} warm-up ones")
    rtts = [float(t) for seq, t in _PING_REPLY.findall(text) if int(seq) > warmup]
    out: dict[str, Any] = {"sent": sent, "received": len(rtts),
                           "loss_pct": round(100.0 * (sent - len(rtts)) / sent, 3),
                           "rtt_min_ms": None, "rtt_avg_ms": None, "rtt_max_ms": None, "rtt_mdev_ms": None}
    if rtts:
        avg = sum(rtts) / len(rtts)
        # mdev as ping computes it: sqrt(mean(x^2) - mean(x)^2)
        mdev = max(0.0, sum(x * x for x in rtts) / len(rtts) - avg * avg) ** 0.5
        out.update(rtt_min_ms=min(rtts), rtt_avg_ms=round(avg, 3), rtt_max_ms=max(rtts), rtt_mdev_ms=round(mdev, 3))
    return out
