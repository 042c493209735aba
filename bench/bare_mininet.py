"""The overhead baseline: a bare, hand-written Mininet script, as a researcher would write it.

It builds the same one-path topology as the benchmark's overhead scenario
(two hosts, one veth, netem both ways), runs the same iperf3 for the same
time, and tears down. The benchmark times it against `run-scenario`: the
whole script, and its run alone (from the server's start to the client's
end), which it prints on stderr as `run_wall_s=SECONDS`.

Usage (as root, on a kernel with netem): python3 bench/bare_mininet.py RATE_MBIT DELAY_MS SECONDS
"""
import subprocess
import sys
import time

from mininet.link import Link
from mininet.net import Mininet
from mininet.node import Host


def main() -> int:
    rate, delay, seconds = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
    net = Mininet(topo=None, build=False, controller=None, host=Host, link=Link, waitConnected=False)
    h1, h2 = net.addHost("h1", ip=None), net.addHost("h2", ip=None)
    net.addLink(h1, h2, intfName1="h1-eth0", intfName2="h2-eth0")
    net.build()
    try:
        for h, ip in ((h1, "10.0.1.1/24"), (h2, "10.0.1.2/24")):
            ifn = f"{h.name}-eth0"
            for argv in (["ip", "addr", "flush", "dev", ifn], ["ip", "addr", "add", ip, "dev", ifn],
                         ["ethtool", "-K", ifn, "tso", "off", "gso", "off", "gro", "off"],
                         ["tc", "qdisc", "replace", "dev", ifn, "root", "netem", "rate", f"{rate:g}mbit",
                          "delay", f"{delay:g}ms", "limit", "1000"]):
                h.popen(argv).communicate()
        t0 = time.monotonic()
        server = h2.popen(["iperf3", "-s", "-1", "-J"], stdout=subprocess.PIPE)
        out, _ = h1.popen(["sh", "-c", "sleep 0.5; iperf3 -c 10.0.1.2 -J -t %g" % seconds],
                          stdout=subprocess.PIPE).communicate()
        server.communicate(timeout=20)
        sys.stderr.write(f"run_wall_s={time.monotonic() - t0:.3f}\n")
        sys.stdout.write(out.decode())
    finally:
        net.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
