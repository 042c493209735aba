"""A build that stops part-way is still torn down, even when a signal landed inside a node's command; the
hosts' shells are waited for all at once, and none is left unreaped."""
import subprocess
import sys
import time

from topologies.net import _stop_after_a_failed_build, stop_network


class ExitedShell:
    pid = 0

    def poll(self):
        return 0

    def wait(self, timeout=None):
        return 0


class Node:
    def __init__(self, waiting: bool):
        self.waiting, self.shell, self.calls = waiting, ExitedShell(), []

    def waitOutput(self):
        self.calls.append("waitOutput")
        self.waiting = False


class Net:
    def __init__(self, hosts, switches):
        self.hosts, self.switches, self.stopped_with_waiting = hosts, switches, None

    def stop(self):
        # Mininet's stop runs a command on every node; a node still waiting asserts in sendCmd
        self.stopped_with_waiting = [n.waiting for n in (*self.hosts, *self.switches)]


def test_a_command_cut_by_a_signal_is_read_to_its_end_before_the_network_is_stopped():
    busy, idle, switch = Node(True), Node(False), Node(True)
    net = Net([busy, idle], [switch])
    _stop_after_a_failed_build(net)
    assert busy.calls == ["waitOutput"] and switch.calls == ["waitOutput"] and idle.calls == []
    assert net.stopped_with_waiting == [False, False, False]


def shell() -> subprocess.Popen:
    """A process in a session of its own, as Mininet starts a node's shell (mnexec -cd), that exits when its
    input ends, as a shell does when Mininet closes its terminal. It ignores SIGHUP, as shells started
    under nohup do (CI's): the hangup Mininet also sends must not be what ends it."""
    code = "import signal, sys\nsignal.signal(signal.SIGHUP, signal.SIG_IGN)\nsys.stdin.read()"
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, start_new_session=True)


class HostOf:
    def __init__(self, proc):
        self.shell, self.waiting = proc, False


class EndingNet(Net):
    """Mininet's stop as far as the shells go: each node's terminal closed and its shell cleared, one after
    another, without waiting (PlannedHost's waitExited=False); `stubborn` shells are cleared, not ended."""

    def __init__(self, hosts, stubborn=()):
        super().__init__(hosts, [])
        self.stubborn = set(stubborn)

    def stop(self):
        for host in self.hosts:
            if host.shell not in self.stubborn:
                host.shell.stdin.close()
            host.shell = None


def test_the_shells_are_waited_for_together_once_the_stop_ended_them():
    shells = [shell() for _ in range(4)]
    started = time.monotonic()
    stop_network(EndingNet([HostOf(p) for p in shells]))
    assert [p.returncode for p in shells] == [0, 0, 0, 0]     # they ended by themselves, and were reaped
    assert time.monotonic() - started < 5


def test_the_shells_a_stop_did_not_reach_are_killed_and_reaped():
    """net.stop() failed before the hosts (it raised, the nodes' shells not cleared): their shells are
    killed here at once, not waited for, and the error still reaches the caller."""
    shells = [shell() for _ in range(4)]

    class FailingNet(Net):
        def stop(self):
            raise RuntimeError("a switch would not go")

    started = time.monotonic()
    try:
        stop_network(FailingNet([HostOf(p) for p in shells], []))
    except RuntimeError as e:
        assert str(e) == "a switch would not go"
    else:
        raise AssertionError("the stop's error was swallowed")
    assert [p.returncode for p in shells] == [-9] * 4
    assert time.monotonic() - started < 5


def test_a_shell_that_does_not_end_is_killed_after_the_grace():
    stubborn, plain = shell(), shell()
    started = time.monotonic()
    stop_network(EndingNet([HostOf(stubborn), HostOf(plain)], stubborn=[stubborn]), grace=1.0)
    assert plain.returncode == 0 and stubborn.returncode == -9
    assert 1.0 <= time.monotonic() - started < 5


def _plan(name: str):
    from pathlib import Path
    from scenarios.spec.loader import load_scenario
    from topologies.kinds import plan
    return plan(load_scenario(Path(__file__).resolve().parents[2] / "scenarios" / name))


def test_every_veth_pair_is_one_line_of_one_batch_with_each_end_in_its_nodes_namespace():
    """Hosts' and routers' ends are made in their namespaces (their shells' pids); switches' ends stay in
    the runner's namespace and are brought up there, as nothing in the plan's setup does."""
    from topologies.net import veth_pair_lines
    p = _plan("e5-exp2.yaml")
    pids = {n: 1000 + k for k, n in enumerate([*p.hosts, *p.routers])}
    netns_of = {**pids, **{w.name: None for w in p.switches}}
    lines, here = veth_pair_lines(p, netns_of)
    adds = [line for line in lines if line.startswith("link add ")]
    assert len(adds) == len(p.links) and lines[len(adds):] == [f"link set dev {n} up" for n in here]
    for (a, b, a_if, b_if, _, _), (mac_a, mac_b), line in zip(p.link_ports(), p.link_macs(), adds):
        first, peer = line.removeprefix("link add ").split(" type veth peer ")
        for node, ifname, mac, words in ((a, a_if, mac_a, first), (b, b_if, mac_b, peer)):
            expected = f"name {ifname} address {mac}" + (f" netns {pids[node]}" if node in pids else "")
            assert words == expected, line
    switch_ends = sorted(i for a, b, ai, bi, _, _ in p.link_ports() for n, i in ((a, ai), (b, bi)) if n not in pids)
    assert sorted(here) == switch_ends and switch_ends


def test_an_end_that_exists_already_is_never_touched_and_a_failed_batch_says_what_ip_said(monkeypatch):
    """An end in the runner's namespace that exists is another run's switch port, or a leftover: the build
    stops before its batch and deletes nothing. A batch that fails says what `ip` said (build_network's
    cleanup deletes the ends it made)."""
    import subprocess
    import pytest
    from topologies import net
    calls = []

    def fake(lines, force=False):
        calls.append((lines, force))
        return subprocess.CompletedProcess([], 1, "", "Command failed -:1\nRTNETLINK answers: Operation not permitted\n")
    monkeypatch.setattr(net, "_ip_batch", fake)
    monkeypatch.setattr(net, "interfaces_here", lambda: {"lo", "eth0", "s1-eth1"})
    lines = ["link add name s1-eth1 type veth peer name s2-eth1"]
    with pytest.raises(RuntimeError, match=r"s1-eth1 exist already.*run-scenario clean"):
        net.make_veth_pairs(lines, ["s1-eth1", "s2-eth1"])
    assert calls == []
    monkeypatch.setattr(net, "interfaces_here", lambda: {"lo", "eth0"})
    with pytest.raises(RuntimeError, match="(?s)veth pairs.*Operation not permitted"):
        net.make_veth_pairs(lines, ["s1-eth1", "s2-eth1"])
    assert calls == [(lines, False)]


def test_this_namespaces_interfaces_are_listed():
    from topologies.net import interfaces_here
    assert "lo" in interfaces_here()
