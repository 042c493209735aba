"""The start barrier of several clients: nobody starts before the release, everybody after it."""
import subprocess
import time

from runners.traffic.barrier import StartBarrier


def _start(barrier, tmp_path, name):
    out = tmp_path / name
    return subprocess.Popen(barrier.wrap(["sh", "-c", f'date +%s.%N > "{out}"']))


def test_clients_wait_for_the_release_then_start_together(tmp_path):
    barrier = StartBarrier(3)
    procs = [_start(barrier, tmp_path, f"c{i}") for i in range(3)]
    try:
        time.sleep(0.3)
        assert all(p.poll() is None for p in procs)          # all still waiting
        assert not list(tmp_path.glob("c*"))
        waited = barrier.release(procs)
        assert waited < barrier.grace_s                      # it saw them all waiting, no time-out
        for p in procs:
            assert p.wait(timeout=5) == 0
    finally:
        barrier.close()
    starts = [float((tmp_path / f"c{i}").read_text()) for i in range(3)]
    assert max(starts) - min(starts) < 0.5
    assert not barrier.fifo.exists()


def test_a_client_that_opens_the_fifo_late_still_starts(tmp_path):
    barrier = StartBarrier(2)
    first = _start(barrier, tmp_path, "early")
    barrier.release([first])
    late = _start(barrier, tmp_path, "late")                   # after the release, before the close
    try:
        assert first.wait(timeout=5) == 0
        assert late.wait(timeout=5) == 0
    finally:
        barrier.close()
    assert (tmp_path / "late").exists()


def test_release_does_not_wait_for_ever_on_a_client_that_never_reads(tmp_path):
    barrier = StartBarrier(1, grace_s=0.3)
    stuck = subprocess.Popen(["sleep", "5"])
    try:
        assert 0.3 <= barrier.release([stuck]) < 2
    finally:
        stuck.kill()
        stuck.wait()
        barrier.close()
