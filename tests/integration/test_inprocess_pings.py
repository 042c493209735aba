"""The pings the runner sends itself (runners.linux.icmp_echo, from a host's spawner thread) against the
`ping` program, on a real kernel, over links this test makes between two namespaces: the same requests
both ways, then what each saw compared (echoes sent and answered, the exit code, the RTT)."""
import contextlib
import re
import statistics
import subprocess

import pytest

from runners.collect.pings import measured_request, parse_ping_after_warmup, warm_up_request
from runners.linux.icmp_echo import EchoRequest
from runners.linux.nsexec import echo_from
from runners.linux.nsspawn import Spawners

from .test_inprocess_changes import Holder

pytestmark = pytest.mark.integration


def sh(*argv):
    subprocess.run(argv, check=True, capture_output=True)


@contextlib.contextmanager
def linked_namespaces():
    """A client and a server namespace: a 30 ms IPv4 link, a 10 ms IPv6 link, a link that loses all.
    (Not a fixture: fixtures are also set up where the test is handed to the micro-VM, without netem.)"""
    spawners = Spawners()
    client, server = Holder("c1"), Holder("s1")
    client.spawners, client.peer = spawners, server
    for n, (delay, loss) in enumerate([("15ms", "0%"), ("5ms", "0%"), ("1ms", "100%")]):
        sh("ip", "link", "add", f"c1-eth{n}", "netns", str(client.pid), "type", "veth",
           "peer", "name", f"s1-eth{n}", "netns", str(server.pid))
        for host, side, end in ((client, "c1", 1), (server, "s1", 2)):
            dev = f"{side}-eth{n}"
            addr = f"fd09:{n}::{end}/64" if n == 1 else f"10.9.{n}.{end}/24"
            host.run("ip", "addr", "add", addr, "dev", dev, *(["nodad"] if n == 1 else []))
            host.run("ip", "link", "set", "dev", dev, "up")
            host.run("tc", "qdisc", "add", "dev", dev, "root", "netem", "delay", delay,
                     *(["loss", loss] if side == "c1" else []))
    for host in (client, server):
        host.run("ip", "link", "set", "dev", "lo", "up")
    try:
        yield client
    finally:
        spawners.close()
        client.stop()
        server.stop()


def both_ways(client, request: EchoRequest):
    """(the program's (exit code, parsed, statistics line without its time), the runner's the same, the
    runner's text)."""
    proc = subprocess.run(["nsenter", "-t", str(client.pid), "-n", "-m", *request.argv], capture_output=True,
                          text=True, timeout=30)
    outcome = echo_from(client, [request])[0]
    return ((proc.returncode, parse_ping_after_warmup(proc.stdout + proc.stderr, warmup=0), _stats(proc.stdout)),
            (outcome.rc, parse_ping_after_warmup(outcome.text(), warmup=0), _stats(outcome.text())), outcome.text())


def _stats(text: str) -> str:
    line = next(ln for ln in text.splitlines() if "packets transmitted" in ln)
    return re.sub(r", time \d+ms$", "", line)


@pytest.mark.parametrize("src,dst,rtt_ms", [("10.9.0.1", "10.9.0.2", 30), ("fd09:1::1", "fd09:1::2", 10)])
def test_measured_echoes_agree_with_ping(src, dst, rtt_ms):
    """Both at once on one path, 20 echoes each. An emulated CPU delays an echo now and then by a few
    milliseconds, which moves a mean of 20 by 1 ms (CI rehearsal of 2026-11-29 12:30, IPv6): the floors
    and the medians are compared."""
    request = measured_request(src, dst, count=20)
    with linked_namespaces() as client:
        echo_from(client, [warm_up_request(src, dst)])   # neighbours known, as before every run's pings
        proc = subprocess.Popen(["nsenter", "-t", str(client.pid), "-n", "-m", *request.argv],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        outcome = echo_from(client, [request])[0]
        ping_text = proc.communicate(timeout=30)[0]
    by_ping, text = parse_ping_after_warmup(ping_text, warmup=0), outcome.text()
    by_runner = parse_ping_after_warmup(text, warmup=0)
    assert proc.returncode == outcome.rc == 0
    assert by_ping["received"] == by_runner["received"] == 20, text
    ping_ms, runner_ms = _times(ping_text), _times(text)
    # both a little above the netem delay (the emulated CPU's share), and close to each other
    assert rtt_ms <= min(runner_ms) and abs(min(runner_ms) - min(ping_ms)) < 0.75, (ping_ms, runner_ms)
    assert abs(statistics.median(runner_ms) - statistics.median(ping_ms)) < 1.0, (ping_ms, runner_ms)


def _times(text: str) -> list[float]:
    return [float(t) for t in re.findall(r"time=([\d.]+) ms", text)]


def test_a_path_that_loses_everything_is_all_loss_both_ways():
    with linked_namespaces() as client:
        (rc_p, by_ping, line_p), (rc_r, by_runner, line_r), text = both_ways(
            client, EchoRequest("10.9.2.1", "10.9.2.2", 2, 0.02, linger=1))
    assert rc_p == rc_r == 1
    assert by_ping == by_runner == {**by_runner, "sent": 2, "received": 0, "loss_pct": 100.0}, text
    assert line_p == line_r == "2 packets transmitted, 0 received, 100% packet loss"


def test_an_unreachable_destination_counts_its_echoes_as_sent_and_prints_what_ping_prints():
    with linked_namespaces() as client:   # no route to 10.99.0.2
        (rc_p, by_ping, line_p), (rc_r, by_runner, line_r), text = both_ways(
            client, EchoRequest("10.9.0.1", "10.99.0.2", 2, 0.02, linger=1))
    assert rc_p == rc_r == 1
    assert by_ping["received"] == by_runner["received"] == 0 and by_runner["sent"] == 2, text
    assert line_p == line_r, text


def test_icmp_errors_for_the_echoes_count_as_errors_both_ways():
    with linked_namespaces() as client:
        server = client.peer
        server.run("ip", "addr", "add", "10.9.0.3/24", "dev", "s1-eth0")
        server.run("nft", "add table ip t; add chain ip t in { type filter hook input priority 0 ; } ; "
                   "add rule ip t in ip daddr 10.9.0.3 icmp type echo-request reject with icmp type admin-prohibited")
        (rc_p, by_ping, line_p), (rc_r, by_runner, line_r), text = both_ways(
            client, EchoRequest("10.9.0.1", "10.9.0.3", 2, 0.2, linger=1))
    assert rc_p == rc_r == 1
    assert line_p == line_r == "2 packets transmitted, 0 received, +2 errors, 100% packet loss", text


def test_a_warm_up_ends_at_its_first_answer():
    with linked_namespaces() as client:
        outcome = echo_from(client, [warm_up_request("10.9.0.1", "10.9.0.2")])[0]
    assert outcome.rc == 0 and len(outcome.rtts_us) == 1 and outcome.sent >= 1
    assert outcome.text().count("bytes from") == 0    # -q: the statistics only
