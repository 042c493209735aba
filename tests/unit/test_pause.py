"""--pause-after: Enter continues on a terminal, SIGUSR1 elsewhere; each host gets an nsenter line."""
import io
import os
import signal
import threading
import time

from runners.pipeline.pause import pause


class Node:
    def __init__(self, name, pid):
        self.name, self.pid = name, pid


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_enter_continues_on_a_terminal():
    said = []
    pause("build", [Node("h1", 11), Node("h2", 12)], log=said.append, stdin=Tty("\n"))
    assert said[0] == "paused after build; the hosts, from another terminal (as root):"
    assert any("h1: nsenter -t 11 -n -m" in s for s in said) and said[-1] == "press Enter to continue"


def test_sigusr1_continues_elsewhere():
    said = []
    threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGUSR1)).start()
    t0 = time.monotonic()
    pause("run", [Node("h1", 11)], log=said.append, stdin=io.StringIO(""))
    assert 0.2 < time.monotonic() - t0 < 5
    assert said[-1] == f"to continue: kill -USR1 {os.getpid()}"
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
