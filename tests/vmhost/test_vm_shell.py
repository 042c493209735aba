"""`run-scenario shell` through the VM backend, in a real terminal (tmux): the keys reach the guest's
pty raw (a typo corrected with Backspace), Mininet's commands work, `exit` leaves nothing behind, and the
session's folder is apart from the run sets (`latest` does not move)."""
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest


pytestmark = pytest.mark.vm_host
REPO = Path(__file__).resolve().parents[2]


def screen(name: str) -> str:
    return subprocess.run(["tmux", "capture-pane", "-p", "-J", "-t", name, "-S", "-500"], capture_output=True,
                          text=True).stdout


def wait_for(name: str, text: str, within: float, after: int = 0) -> str:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        s = screen(name)
        if s.count(text) > after:
            return s
        time.sleep(0.5)
    raise AssertionError(f"{text!r} did not appear:\n{screen(name)}")


def test_the_shell_through_the_vm_in_a_real_terminal(tmp_path, new_leftovers):
    name = f"testbed-vmshell-{os.getpid()}"
    cmd = shlex.join([sys.executable, "-m", "runners.cli", "shell", "scenarios/two-paths.yaml", "--backend", "vm",
                      "--out", str(tmp_path / "o")])
    env = f"TESTBED_WARM_DIR={shlex.quote(str(tmp_path / 'no-warm-vm'))}"
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "160", "-y", "50",
                    f"cd {shlex.quote(str(REPO))} && env {env} {cmd}; echo SHELL-EXITED $?; sleep 300"], check=True)
    try:
        s = wait_for(name, "mininet>", within=300)
        assert "10.0.2.1" in s and "10 Mbit/s" in s
        subprocess.run(["tmux", "send-keys", "-t", name, "pathz", "BSpace", "s", "Enter"], check=True)
        wait_for(name, "h1-eth1", within=30, after=s.count("h1-eth1"))
        prompts = screen(name).count("mininet>")
        subprocess.run(["tmux", "send-keys", "-t", name, "h1 ping -c 1 10.0.2.2", "Enter"], check=True)
        wait_for(name, "1 received", within=60)
        # keys typed while a command runs go to that command's host (Mininet's CLI): wait for the prompt
        wait_for(name, "mininet>", within=60, after=prompts)
        subprocess.run(["tmux", "send-keys", "-t", name, "exit", "Enter"], check=True)
        s = wait_for(name, "SHELL-EXITED", within=120)
        assert "SHELL-EXITED 0" in s and "Traceback" not in s, s
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], check=False)
    time.sleep(2)
    assert new_leftovers() == []
    # the session's set is made by the host, in a folder of its own, and takes no `latest` (issue 28)
    assert len(list((tmp_path / "o" / "two-paths" / "shell").glob("2*/scenario.yaml"))) == 1
    assert not os.path.lexists(tmp_path / "o" / "two-paths" / "latest")
