"""--pause-after build|shaping|run: stop there so that someone can look around from a second terminal.

On a terminal, Enter continues; otherwise SIGUSR1 does (`kill -USR1 PID`, printed). Each host gets a
line to enter its namespace with nsenter.
"""
from __future__ import annotations

import os
import signal
import sys

POINTS = ("build", "shaping", "run")


def nsenter_lines(nodes) -> list[str]:
    return [f"  {n.name}: nsenter -t {n.pid} -n -m    # then e.g. ip -s link, tc -s qdisc, ss -tiM" for n in nodes]


def pause(where: str, nodes, log=print, stdin=None) -> None:
    stdin = stdin or sys.stdin
    log(f"paused after {where}; the hosts, from another terminal (as root):")
    for line in nsenter_lines(nodes):
        log(line)
    if stdin.isatty():
        log("press Enter to continue")
        stdin.readline()
        return
    log(f"to continue: kill -USR1 {os.getpid()}")
    old = signal.signal(signal.SIGUSR1, lambda *_: None)   # a handler: the default action would end us
    try:
        signal.sigwait({signal.SIGUSR1})
    finally:
        signal.signal(signal.SIGUSR1, old)
