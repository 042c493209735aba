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
    """A close that lands while a caller is queueing its request: the request is served (it came first) or
    refused, never left behind the thread's last answer."""
    spawner = _spawner(monkeypatch)
    queue_put = spawner._requests.put

    def slow_put(item):
        if item is not None:
            time.sleep(0.3)   # the close comes meanwhile
        queue_put(item)

    spawner._requests.put = slow_put
    answers = []
    caller = threading.Thread(target=lambda: answers.append(spawner.call(lambda: "served")))
    caller.start()
    time.sleep(0.1)
    spawner.close()
    caller.join(timeout=5)
    assert not caller.is_alive() and answers == ["served"]
    with pytest.raises(nsspawn.SpawnerGone):
        spawner.call(lambda: 1)


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


class FakeShell:
    def __init__(self, ended=False):
        self.ended = ended

    def poll(self):
        return 0 if self.ended else None


def test_a_host_that_cannot_be_entered_is_tried_once(monkeypatch):
    tries = []

    def refuse(pid):
        tries.append(pid)
        raise OSError("no namespace")

    monkeypatch.setattr(nsspawn, "enter_namespaces_of", refuse)
    host = SimpleNamespace(name="h1", pid=4242, inNamespace=True, shell=FakeShell())
    spawners = Spawners()
    assert spawners.popen(host, ["true"]) is None
    assert spawners.popen(host, ["true"]) is None
    assert tries == [4242]
    spawners.close()


def test_a_missing_program_falls_back_to_mnexec(monkeypatch):
    monkeypatch.setattr(nsspawn, "enter_namespaces_of", lambda pid: None)
    host = SimpleNamespace(name="h1", pid=4242, inNamespace=True, shell=FakeShell())
    spawners = Spawners()
    try:
        assert spawners.popen(host, ["no-such-program-here"]) is None
        proc = spawners.popen(host, ["true"])
        assert proc.wait(timeout=10) == 0
    finally:
        spawners.close()


def test_sysctls_go_by_process_where_a_node_has_no_spawner(monkeypatch):
    from runners.linux import nsexec

    ran = []

    def by_process(node, argv, *a, **k):
        ran.append(argv)
        return nsexec.Result(argv, 0, "4096 16384 4194304\n1\n", "")

    monkeypatch.setattr(nsexec, "run", by_process)
    monkeypatch.setattr(nsexec, "run_batch", lambda node, argvs, **k: ran.extend(argvs))
    node = SimpleNamespace(name="h1", pid=1)
    assert nsexec.read_sysctls(node, ["net.ipv4.tcp_wmem", "net.mptcp.enabled"]) == ["4096 16384 4194304", "1"]
    nsexec.write_sysctls(node, [("net.mptcp.enabled", "1")])
    assert ran == [["sysctl", "-n", "net.ipv4.tcp_wmem", "net.mptcp.enabled"], ["sysctl", "-q", "-w", "net.mptcp.enabled=1"]]


def test_processes_start_with_no_signal_blocked_even_from_a_spawner_made_in_the_cleanup(monkeypatch):
    from runners.pipeline.runner import signals_blocked

    with signals_blocked():
        spawner = _spawner(monkeypatch)
    try:
        proc = spawner.popen(["grep", "^SigBlk", "/proc/self/status"], stdout=subprocess.PIPE, text=True)
        out, _ = proc.communicate(timeout=10)
    finally:
        spawner.close()
    assert int(out.split()[1], 16) == 0
