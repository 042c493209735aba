"""Every path's RTT before a run, all paths at once, each ping bound to its own path's addresses; and the
warm-up echoes that make a path's neighbours known before any echo is measured."""
from __future__ import annotations

import subprocess

from .. import commands
from .. import parsers


class Pinger:
    """Pings from the runner's client (`host`: plan, client, procs, store)."""

    def __init__(self, host):
        self.host = host

    def warm_up(self) -> None:
        """Every path at once: unmeasured echoes until one is answered (commands.warm_up_ping_argv)."""
        self._ping_all([commands.warm_up_ping_argv(p.client_ip, p.server_ip) for p in self.host.plan.paths])

    def ping_paths(self, run_id: str, warm_up: bool = False) -> dict:
        """RTT of every path, all paths at once (each ping is bound to its own path's addresses); with
        `warm_up` (switched topologies), each after one answered echo (commands.ping_after_one_echo_argv)."""
        paths = self.host.plan.paths
        argv = commands.ping_after_one_echo_argv if warm_up else commands.ping_argv
        texts = self._ping_all([argv(p.client_ip, p.server_ip) for p in paths])
        out = {}
        for p, text in zip(paths, texts):
            self.host.store.save_raw(run_id, f"ping-{p.name}.txt", text)
            try:
                out[p.name] = parsers.parse_ping_after_warmup(text, warmup=0)
            except parsers.ParseError:
                out[p.name] = {"loss_pct": 100.0, "rtt_avg_ms": None}
        return out

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
