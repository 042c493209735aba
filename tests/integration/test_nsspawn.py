"""The spawners start a host's commands in its namespaces, as `mnexec -da` did, without that program: a
real network and mount namespace (the one a Mininet host gets from `mnexec -n`), a real kernel."""
import os
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from runners.linux.nsexec import CommandError, read_sysctls, write_sysctls
from runners.linux.nsspawn import Spawners

pytestmark = pytest.mark.integration

# what `mnexec -cdn bash` makes for a host: new network and mount namespaces, /sys remounted for the former
HOST_SHELL = "mount --make-rprivate / && mount -t sysfs sysfs /sys && ip link add t-veth0 type veth peer name t-veth1 && exec sleep 120"


@pytest.fixture
def host():
    shell = subprocess.Popen(["unshare", "--net", "--mount", "sh", "-c", HOST_SHELL], start_new_session=True)
    deadline = time.monotonic() + 30
    while os.readlink(f"/proc/{shell.pid}/ns/net") == os.readlink("/proc/self/ns/net") or \
            subprocess.run(["nsenter", "-t", str(shell.pid), "-n", "ip", "link", "show", "t-veth0"],
                           capture_output=True).returncode != 0:
        assert shell.poll() is None and time.monotonic() < deadline, "the host's namespaces were not made"
        time.sleep(0.05)
    yield SimpleNamespace(name="t", pid=shell.pid, inNamespace=True, shell=shell)
    shell.kill()
    shell.wait()


def _out(proc: subprocess.Popen) -> str:
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return out.decode()


def test_a_command_runs_in_the_hosts_namespaces_in_a_session_of_its_own(host, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spawners = Spawners()
    try:
        script = 'readlink /proc/self/ns/net /proc/self/ns/mnt; echo $(ls /sys/class/net); pwd; ps -o sid= -p $$'
        proc = spawners.popen(host, ["sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        lines = [line.strip() for line in _out(proc).splitlines()]
    finally:
        spawners.close()
    assert lines[0] == os.readlink(f"/proc/{host.pid}/ns/net") != os.readlink("/proc/self/ns/net")
    assert lines[1] == os.readlink(f"/proc/{host.pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
    assert lines[2] == "lo t-veth0 t-veth1"            # the host's /sys, not this namespace's
    assert lines[3] == str(tmp_path)                    # the caller's folder, as mnexec -a kept it
    assert lines[4] == str(proc.pid)                    # its own session, as mnexec -d made
    # this thread stayed where it was
    assert os.readlink("/proc/self/ns/net") != lines[0]


def test_a_closed_or_orphaned_spawner_lets_go_of_the_namespace(host):
    spawners = Spawners()
    assert _out(spawners.popen(host, ["true"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)) == ""
    spawner = next(iter(spawners._by_pid.values()))
    host.shell.kill()
    host.shell.wait()
    spawner._thread.join(timeout=5)   # its host's shell is gone: it ends by itself, within a second or so
    assert not spawner._thread.is_alive()
    assert spawners.popen(host, ["true"]) is None   # the caller falls back to mnexec, which fails as before
    spawners.close()
    assert spawners.popen(host, ["true"]) is None


def test_a_missing_program_is_left_to_mnexec_whose_exit_1_callers_know(host):
    spawners = Spawners()
    try:
        assert spawners.popen(host, ["no-such-program-here"]) is None
        assert _out(spawners.popen(host, ["true"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)) == ""
    finally:
        spawners.close()


def test_sysctls_are_read_and_written_in_the_hosts_namespace_and_the_roots_stay(host):
    key = "net.ipv4.tcp_no_metrics_save"
    root_before = Path(f"/proc/sys/{key.replace('.', '/')}").read_text()
    host.spawners = Spawners()
    try:
        start = read_sysctls(host, [key, "net.ipv4.tcp_wmem"])
        flipped = "0" if start[0] == "1" else "1"
        write_sysctls(host, [(key, flipped), ("net.ipv4.tcp_wmem", "4096 65536 4194304")])
        assert read_sysctls(host, [key, "net.ipv4.tcp_wmem"]) == [flipped, "4096 65536 4194304"]
        with pytest.raises(CommandError, match="net.mptcp.enabled=7"):
            write_sysctls(host, [("net.mptcp.enabled", "7")])
    finally:
        host.spawners.close()
    seen = subprocess.run(["nsenter", "-t", str(host.pid), "-n", "sysctl", "-n", key], capture_output=True, text=True)
    assert seen.stdout.strip() == flipped
    assert Path(f"/proc/sys/{key.replace('.', '/')}").read_text() == root_before
