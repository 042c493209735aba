"""The spawners' way out when they cannot enter a host's namespaces (the kernel part runs in
tests/integration/test_nsspawn.py)."""
import subprocess
from types import SimpleNamespace

from runners.linux.nsspawn import Spawners


def test_a_host_whose_shell_is_gone_gets_no_spawner_and_the_caller_falls_back():
    gone = subprocess.Popen(["true"])
    gone.wait()
    host = SimpleNamespace(name="h1", pid=gone.pid, inNamespace=True, shell=gone)
    spawners = Spawners()
    assert spawners.popen(host, ["true"]) is None
    assert spawners._by_pid == {}
    spawners.close()
