"""The pause between runs (runners.pipeline.drain): at least runs.pause after the traffic, then until the shaped
queues are empty on two reads in a row, never forever."""
from runners.pipeline import drain


class FakeTime:
    def __init__(self):
        self.now = 100.0
        self.slept = []

    def clock(self):
        return self.now

    def sleep(self, s):
        self.slept.append(round(s, 3))
        self.now += s


def test_the_pause_counts_from_the_end_of_the_traffic_and_stops_once_queues_are_empty_twice():
    t = FakeTime()
    reads = iter([True, True])
    drain.rest_between_runs(0.2, traffic_ended=99.95, queues_empty=lambda: next(reads), log=None,
                            clock=t.clock, sleep=t.sleep)
    assert t.slept == [0.15, drain.POLL_S]


def test_a_queue_that_fills_again_between_reads_restarts_the_count():
    t = FakeTime()
    answers = [False, True, False, True, True]
    reads = iter(answers)
    drain.rest_between_runs(0.0, traffic_ended=100.0, queues_empty=lambda: next(reads), log=None,
                            clock=t.clock, sleep=t.sleep)
    assert t.slept == [0.0] + [drain.POLL_S] * (len(answers) - 1)


def test_no_traffic_yet_means_no_pause_and_no_read():
    t = FakeTime()
    drain.rest_between_runs(5.0, traffic_ended=None, queues_empty=lambda: 1 / 0, log=None, clock=t.clock,
                            sleep=t.sleep)
    assert t.slept == []


def test_queues_that_never_drain_end_the_wait_with_a_warning():
    t, said = FakeTime(), []
    drain.rest_between_runs(1.0, traffic_ended=100.0, queues_empty=lambda: False, log=said.append,
                            clock=t.clock, sleep=t.sleep)
    assert drain.MAX_S <= sum(t.slept) <= drain.MAX_S + 1.0 + drain.POLL_S
    assert said and "still hold packets" in said[0]
