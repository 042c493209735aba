"""The idle time between two runs: `runs.pause` at least, then until every shaped queue is empty.

A fixed pause was too long for fast paths (the default scenario's queues are
empty 0.15 s after its traffic, and a second was spent waiting) and too short
for slow ones with deep queues (1 Mbit/s behind 1000 packets takes 12 s to
drain, and the next run's pings would have read the backlog as RTT).
"""
from __future__ import annotations

import time
from typing import Callable

POLL_S = 0.05     # between two reads of the shaped queues
MAX_S = 60.0      # a queue still not empty by then holds traffic that is not the testbed's


def rest_between_runs(pause_s: float, traffic_ended: float | None, queues_empty: Callable[[], bool],
                      log: Callable[[str], None], clock: Callable[[], float] = time.monotonic,
                      sleep: Callable[[float], None] = time.sleep) -> None:
    """Sleep until `pause_s` after `traffic_ended` (a monotonic time; None: no traffic yet, no pause),
    then until `queues_empty()` holds on two reads in a row (a packet between two hops is in no queue
    at the moment of one read), for at most MAX_S more."""
    if traffic_ended is None:
        return
    sleep(max(0.0, pause_s - (clock() - traffic_ended)))
    deadline, empty_reads = clock() + MAX_S, 0
    while True:
        empty_reads = empty_reads + 1 if queues_empty() else 0
        if empty_reads == 2:
            return
        if clock() > deadline:
            log(f"warning: the shaped queues still hold packets {MAX_S:g} s after the pause; "
                "the next run starts anyway")
            return
        sleep(POLL_S)
