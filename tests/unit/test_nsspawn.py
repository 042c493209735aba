"""The spawners' way out when they cannot enter a host's namespaces (the kernel part runs in
tests/integration/test_nsspawn.py)."""
import signal
import subprocess
import threading
import time
from types import SimpleNamespace

import pytest

from runners.linux import nsspawn
from runners.linux.nsspawn import Spawners


def test_a_host_whose_shell_is_gone_gets_no_spawner_and_the_caller_falls_back():
    gone = subprocess.Popen(["true"])
    gone.wait()
    host = SimpleNamespace(name="h1", pid=gone.pid, inNamespace=True, shell=gone)
    spawners = Spawners()
    assert spawners.popen(host, ["true"]) is None
    assert spawners._by_pid == {}
    spawners.close()


def _spawner(monkeypatch, alive=lambda: True):
    """A spawner whose thread stays in this namespace (entering another needs root: the integration test)."""
    monkeypatch.setattr(nsspawn, "enter_namespaces_of", lambda pid: None)
    monkeypatch.setattr(nsspawn, "_POLL_S", 0.05)
    return nsspawn.NamespaceSpawner(1, alive=alive)


def test_no_caller_waits_for_ever_when_the_spawner_closes_under_it(monkeypatch):
    spawner = _spawner(monkeypatch)
    answers = []

    def ask():
        for _ in range(200):
            try:
                answers.append(spawner.call(lambda: "served"))
            except nsspawn.SpawnerGone:
                answers.append("refused")

    callers = [threading.Thread(target=ask) for _ in range(4)]
    for t in callers:
        t.start()
    time.sleep(0.01)
    spawner.close()
    for t in callers:
        t.join(timeout=10)
    assert not any(t.is_alive() for t in callers)
    assert len(answers) == 800 and set(answers) <= {"served", "refused"}
    assert not spawner._thread.is_alive()


def test_a_spawner_whose_host_is_gone_leaves_and_refuses(monkeypatch):
    alive = {"shell": True}
    spawner = _spawner(monkeypatch, alive=lambda: alive["shell"])
    assert spawner.call(lambda: 42) == 42
    alive["shell"] = False
    spawner._thread.join(timeout=5)
    assert not spawner._thread.is_alive()
    with pytest.raises(nsspawn.SpawnerGone):
        spawner.call(lambda: 1)


def test_a_process_started_as_its_caller_is_interrupted_is_ended(monkeypatch):
    spawner = _spawner(monkeypatch)
    started = {}

    def slow_start():
        time.sleep(0.3)
        started["proc"] = subprocess.Popen(["sleep", "30"])
        return started["proc"]

    def interrupt(*_):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.1)
    try:
        with pytest.raises(KeyboardInterrupt):
            spawner.call(slow_start)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        spawner.close()
    assert started["proc"].poll() is not None   # killed and reaped, not left running
