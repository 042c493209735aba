"""The changes a batch makes in the runner's own process (`sysctl -q -w`, `ethtool -K`, `ip` link and
address changes, `nft -f`: runners.linux.nsexec) against the programs themselves, on a real kernel: the
same batch in two namespaces this test makes, one through a host's spawner, one through the programs
(the batch's shell), then the results per command and the namespaces' state compared. And a planned
host: its namespaces held by a small process that ends with the runner, its bash started by the first
command sent to it."""
import difflib
import os
import re
import subprocess
import sys
import time

import pytest

from runners.linux.nsexec import run_batch
from runners.linux.nsspawn import Spawners

from .helpers import REPO

pytestmark = pytest.mark.integration


class Holder:
    """A namespace pair (network, mount) held as a planned host's is."""

    def __init__(self, name: str):
        from topologies.planned_host import start_holder, wait_in_own_namespaces

        self.name = name
        self.shell, self.lifeline = start_holder(name)
        self.pid = self.shell.pid
        wait_in_own_namespaces(self.shell, name)

    def popen(self, argv, **kw):
        return subprocess.Popen(["nsenter", "-t", str(self.pid), "-n", "-m", *argv], **kw)

    def run(self, *argv) -> str:
        return subprocess.run(["nsenter", "-t", str(self.pid), "-n", "-m", *argv], capture_output=True,
                              text=True, check=True).stdout

    def stop(self):
        os.close(self.lifeline)   # the holder reads end-of-file and exits
        assert self.shell.wait(timeout=10) == 0


@pytest.fixture
def pair():
    """Two namespaces with the same links: one reached through a spawner, one only through programs."""
    spawners = Spawners()
    here, there = Holder("h1"), Holder("h1")
    here.spawners = spawners
    for h in (here, there):
        h.run("ip", "link", "add", "h1-eth0", "type", "veth", "peer", "name", "h1-eth1")
    yield here, there
    spawners.close()
    here.stop()
    there.stop()


BATCH = [
    ["sysctl", "-q", "-w", "net.ipv4.conf.all.arp_ignore=1"],
    ["sysctl", "-q", "-w", "net.ipv4.no_such_key=1"],                      # refused
    ["ip", "addr", "flush", "dev", "h1-eth0", "scope", "global"],
    ["ip", "addr", "add", "10.0.1.1/24", "dev", "h1-eth0"],
    ["ip", "addr", "add", "10.0.1.1/24", "dev", "h1-eth0"],                # refused: assigned already
    ["ip", "addr", "add", "fd00::1/64", "dev", "h1-eth0", "nodad"],
    ["ip", "link", "set", "dev", "h1-eth0", "up"],
    ["ip", "link", "set", "dev", "lo", "up"],
    ["ip", "link", "set", "dev", "h1-eth0", "gso_max_segs", "1"],
    ["ip", "link", "set", "dev", "no-such0", "up"],                         # refused: no such device
    ["ethtool", "-K", "h1-eth0", "tso", "off", "gso", "off", "gro", "off"],
    ["ethtool", "-K", "h1-eth1", "tx", "off", "tso", "off", "gso", "off"],
    ["ethtool", "-K", "no-such0", "tso", "off"],                             # refused
    ["nft", "add", "table", "inet", "mptb"],
    ["nft", "add", "chain", "inet", "mptb", "in", "{ type filter hook input priority 0 ; policy accept ; }"],
    ["nft", "add", "rule", "inet", "mptb", "in", "ip", "daddr", "10.0.1.1", "counter", "comment", '"A"'],
    ["ip", "addr", "replace", "10.0.2.1/24", "dev", "h1-eth1"],
    ["ip", "link", "set", "dev", "h1-eth1", "down"],
]


def _words(text: str) -> str:
    """A message without the batch's temporary file and the process's own prefix."""
    return re.sub(r"/tmp/testbed-batch-\w+/\d+\.\w+", "FILE", text).strip()


def _state(h: Holder) -> dict:
    """The namespace's links and addresses (without what the kernel picks at random: MACs and the link-local
    addresses made from them), offloads, nft ruleset and the sysctl written."""
    addr = re.sub(r"([0-9a-f]{2}:){5}[0-9a-f]{2}", "MAC", h.run("ip", "-d", "addr", "show"))
    return {
        "addr": re.sub(r"fe80::[0-9a-f:]+", "LINK-LOCAL", addr),
        "features": {dev: h.run("ethtool", "-k", dev) for dev in ("h1-eth0", "h1-eth1")},
        "nft": h.run("nft", "list", "ruleset"),
        "sysctl": h.run("sysctl", "-n", "net.ipv4.conf.all.arp_ignore"),
    }


def test_a_batch_done_in_process_leaves_what_the_programs_leave_and_says_what_they_say(pair):
    here, there = pair
    done_here = run_batch(here, BATCH, check=False)
    done_there = run_batch(there, BATCH, check=False)
    assert [r.rc != 0 for r in done_here] == [r.rc != 0 for r in done_there]
    assert [i for i, r in enumerate(done_here) if r.rc] == [1, 4, 9, 12]
    for mine, theirs in zip(done_here, done_there):
        if mine.argv[0] in ("ip", "nft"):   # the same words; sysctl's and ethtool's are the testbed's own
            assert _words(mine.err) == _words(theirs.err), mine.argv
    state_here, state_there = _state(here), _state(there)
    assert state_here == state_there, "\n".join(difflib.unified_diff(
        str(state_there).split("\\n"), str(state_here).split("\\n"), "the programs", "in process", lineterm=""))
    assert "gso_max_segs 1" in state_here["addr"] and "inet 10.0.1.1/24" in state_here["addr"]
    assert re.search(r"^tcp-segmentation-offload: off", state_here["features"]["h1-eth0"], re.M)
    assert 'comment "A"' in state_here["nft"]


def test_a_failed_nft_batch_applies_nothing_in_process_either(pair):
    here, there = pair
    batch = [["nft", "add", "table", "inet", "x"], ["nft", "add", "rule", "inet", "x", "nochain", "counter"]]
    done_here, done_there = run_batch(here, batch, check=False), run_batch(there, batch, check=False)
    assert [r.rc for r in done_here] == [r.rc for r in done_there] == [1, 1]
    assert _words(done_here[1].err) == _words(done_there[1].err)
    assert here.run("nft", "list", "ruleset") == there.run("nft", "list", "ruleset") == ""


def test_a_planned_hosts_namespaces_are_held_by_a_holder_and_its_bash_starts_on_the_first_command():
    from topologies.planned_host import HOLDER_MARK, planned_host_class

    host = planned_host_class()("h9")
    try:
        assert host.bash is None
        assert open(f"/proc/{host.pid}/comm").read().strip() == "cat"
        # (the environment shows once exec has set up the new stack, a moment after its name changed)
        deadline = time.monotonic() + 5
        while not open(f"/proc/{host.pid}/environ", "rb").read() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert f"{HOLDER_MARK}=h9".encode() in open(f"/proc/{host.pid}/environ", "rb").read().split(b"\0")
        assert os.stat(f"/proc/{host.pid}/ns/net").st_ino != os.stat("/proc/self/ns/net").st_ino
        out = host.cmd("readlink /proc/self/ns/net; echo $1")
        assert host.bash is not None and host.bash.poll() is None
        assert out.split() == [os.readlink(f"/proc/{host.pid}/ns/net"), "mininet:h9"]   # in the holder's
    finally:
        holder, bash = host.shell, host.bash
        host.terminate()
    assert holder.wait(timeout=10) is not None and bash.wait(timeout=10) is not None


def test_a_holder_ends_with_the_process_that_made_it_even_when_that_is_killed():
    """As Mininet's bash ends when its terminal closes: a runner killed with SIGKILL leaves no host."""
    maker = subprocess.Popen(
        [sys.executable, "-c", "from topologies.planned_host import start_holder, wait_in_own_namespaces\n"
                               "proc, _ = start_holder('h1'); wait_in_own_namespaces(proc, 'h1')\n"
                               "print(proc.pid, flush=True)\nimport time; time.sleep(600)"],
        stdout=subprocess.PIPE, text=True, cwd=REPO)
    holder = int(maker.stdout.readline())
    assert open(f"/proc/{holder}/comm").read().strip() == "cat"
    maker.kill()
    maker.wait()
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{holder}") and time.monotonic() < deadline:
        time.sleep(0.05)   # (reparented to init, which reaps it)
    assert not os.path.exists(f"/proc/{holder}")


MPTCP_BATCH = [
    ["ip", "addr", "add", "10.0.1.1/24", "dev", "h1-eth0"],
    ["ip", "addr", "add", "fd00:2::1/64", "dev", "h1-eth1", "nodad"],
    ["ip", "mptcp", "endpoint", "flush"],
    ["ip", "mptcp", "limits", "set", "subflows", "3", "add_addr_accepted", "2"],
    ["ip", "mptcp", "endpoint", "add", "10.0.1.1", "dev", "h1-eth0", "signal", "port", "5300"],
    ["ip", "mptcp", "endpoint", "add", "10.0.1.1", "dev", "h1-eth0", "signal", "port", "5300"],   # refused: there
    ["ip", "mptcp", "endpoint", "add", "fd00:2::1", "dev", "h1-eth1", "subflow", "backup"],
    ["ip", "mptcp", "endpoint", "add", "10.0.3.1", "subflow", "fullmesh"],
    ["ip", "mptcp", "endpoint", "change", "fd00:2::1", "nobackup"],
    ["ip", "mptcp", "endpoint", "change", "10.9.9.9", "backup"],                                 # refused: none
    ["ip", "mptcp", "limits", "set", "subflows", "9"],                                           # refused: > 8
]


def test_mptcp_endpoints_set_in_process_read_and_say_what_ip_reads_and_says(pair):
    here, there = pair
    done_here, done_there = run_batch(here, MPTCP_BATCH, check=False), run_batch(there, MPTCP_BATCH, check=False)
    assert [r.rc != 0 for r in done_here] == [r.rc != 0 for r in done_there]
    assert [i for i, r in enumerate(done_here) if r.rc] == [5, 9, 10]
    for mine, theirs in zip(done_here, done_there):
        assert _words(mine.err) == _words(theirs.err), mine.argv
    shown_here = run_batch(here, [["ip", "mptcp", "endpoint", "show"]])[0].out
    assert shown_here == run_batch(there, [["ip", "mptcp", "endpoint", "show"]])[0].out
    assert shown_here == here.run("ip", "mptcp", "endpoint", "show") == there.run("ip", "mptcp", "endpoint", "show")
    assert "10.0.1.1 port 5300 id 1 signal dev h1-eth0 \n" in shown_here and "fullmesh" in shown_here
    assert here.run("ip", "mptcp", "limits", "show") == there.run("ip", "mptcp", "limits", "show")
    # a device this namespace lacks: ip itself runs the batch and says so
    gone = run_batch(here, [["ip", "mptcp", "endpoint", "add", "10.0.5.1", "dev", "nosuch0"]], check=False)[0]
    assert gone.rc != 0 and "nosuch0" in gone.err
