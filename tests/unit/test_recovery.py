"""Recovery metrics around a path change (issue 30), on per-path samples made to a known shape."""
import pytest

from runners.results.recovery import recovery

MBIT_PER_100MS = 12_500   # bytes in 100 ms at 1 Mbit/s


def samples(rate_a, rate_b, until_s=8.0):
    """Samples every 100 ms of cumulative bytes, each path's rate (Mbit/s) a function of the interval's end.
    The counters start at an arbitrary value, as an interface's do."""
    out, a, b = [], 7_000, 9_000
    for k in range(int(until_s * 10) + 1):
        t = round(k * 0.1, 4)
        if k:
            a += int(rate_a(t) * MBIT_PER_100MS)
            b += int(rate_b(t) * MBIT_PER_100MS)
        out.append({"t": t, "read_ms": 0.1, "A": a, "B": b})
    return out


def a_fails(t):
    return 10 if t <= 5.0 + 1e-9 else 0


def b_takes_over(t):
    """B idle until 6 s, 5 Mbit/s for 0.3 s, then 10 Mbit/s."""
    return 0 if t <= 6.0 + 1e-9 else 5 if t <= 6.3 + 1e-9 else 10


def test_failover_to_a_backup_path():
    r = recovery(samples(a_fails, b_takes_over), ["A", "B"], event_s=5.0, capacity_mbps=10, backup=("B",))
    assert r.stall_s == pytest.approx(1.0) and not r.stall_open
    # windows of 0.5 s after the event: 1, ..., 5 (5.9-6.4), 7 (6.0-6.5), 8 Mbit/s (6.1-6.6): 80 % of 10
    assert r.recovery_s == pytest.approx(1.6) and r.no_recovery is None
    assert r.bytes_before == {"A": 50 * 10 * MBIT_PER_100MS, "B": 0}
    assert r.bytes_after == {"A": 0, "B": 3 * 5 * MBIT_PER_100MS + 17 * 10 * MBIT_PER_100MS}
    assert r.backup_share == 1.0


def test_the_fraction_is_a_parameter():
    r = recovery(samples(a_fails, b_takes_over), ["A", "B"], event_s=5.0, capacity_mbps=10, fraction=0.5)
    assert r.recovery_s == pytest.approx(1.4)   # 5.9-6.4: 5 Mbit/s
    assert r.backup_share is None               # no backup path named


def test_a_tcp_baseline_on_the_failing_path_has_no_recovery():
    r = recovery(samples(a_fails, lambda t: 0), ["A"], event_s=5.0, capacity_mbps=0)
    assert r.recovery_s is None and r.no_recovery == "no path is live after the event"
    assert r.stall_s == pytest.approx(3.0) and r.stall_open


def test_goodput_that_never_comes_back_is_no_recovery():
    r = recovery(samples(a_fails, lambda t: 0 if t <= 6 else 5), ["A", "B"], event_s=5.0, capacity_mbps=10)
    assert r.recovery_s is None and r.no_recovery.startswith("goodput stayed below 80% of 10 Mbit/s for the 3.00 s")


def test_an_event_that_stops_nothing_recovers_within_a_sample():
    r = recovery(samples(lambda t: 10, lambda t: 10), ["A", "B"], event_s=4.0, capacity_mbps=20)
    assert r.stall_s == 0.0 and r.recovery_s == pytest.approx(0.1)   # the first interval after it: one sample


def test_a_stall_that_began_before_the_event_counts_from_it():
    r = recovery(samples(lambda t: 0 if 4.5 < t <= 6 else 10, lambda t: 0), ["A"], event_s=5.05, capacity_mbps=10)
    assert r.stall_s == pytest.approx(0.95)   # not 1.0 (from the sample before) nor 1.5 (from the stall's start)


def test_no_samples_after_the_event():
    r = recovery(samples(lambda t: 10, lambda t: 0, until_s=3.0), ["A"], event_s=5.0, capacity_mbps=10)
    assert r.recovery_s is None and r.no_recovery == "no samples after the event" and r.stall_s is None


def test_a_counter_that_goes_back_is_no_growth():
    s = samples(lambda t: 10, lambda t: 0, until_s=1.0)
    s[5]["A"] = 0
    r = recovery(s, ["A"], event_s=0.5, capacity_mbps=10)
    assert min(r.bytes_before.values()) >= 0 and r.bytes_after["A"] >= 0


def test_packets_in_flight_after_a_failure_are_no_recovery():
    """A keeps delivering for 0.5 s after it failed (its queue drains), then nothing until B takes over
    at 7 s: the goodput right after the event reaches the mark but does not hold for a second."""
    r = recovery(samples(lambda t: 10 if t <= 5.5 + 1e-9 else 0, lambda t: 10 if t > 7 + 1e-9 else 0), ["A", "B"],
                 event_s=5.0, capacity_mbps=10)
    assert r.recovery_s == pytest.approx(2.4)   # B is back after 7 s: the 0.5 s window reaches 8 Mbit/s at 7.4 s
    assert r.stall_s == pytest.approx(1.5)


def test_a_few_retransmitted_segments_do_not_end_a_stall():
    r = recovery(samples(a_fails, lambda t: 0.4 if abs(t - 5.5) < 0.05 else b_takes_over(t)), ["A", "B"],
                 event_s=5.0, capacity_mbps=10)
    assert r.stall_s == pytest.approx(1.0)   # 0.4 Mbit/s for 100 ms is under 10 % of 10 Mbit/s
