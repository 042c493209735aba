"""Every path's RTT before a run, all paths at once, each ping bound to its own path's addresses."""
from __future__ import annotations

import subprocess

from .. import commands
from .. import parsers


class Pinger:
    """Pings from the runner's client (`host`: plan, client, procs, store)."""

    def __init__(self, host):
        self.host = host

    def ping_paths(self, run_id: str) -> dict:
        """RTT of every path, all paths at once (each ping is bound to its own path's addresses)."""
        paths = self.host.plan.paths
        # each path's warm-up echo is answered before its measured ones start (commands.ping_argv)
        texts = self._ping_all([commands.ping_argv(p.client_ip, p.server_ip) for p in paths])
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
