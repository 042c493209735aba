#!/bin/sh
# A passive MP_JOIN refused while the connection has out-of-order data: the
# minimal reproducer of E3 case 7 getting three of its four subflows on
# Debian's 6.12.95 (docs/kernels.md). Run as root on the kernel to check (it
# needs sch_netem): `sudo sh docs/repro/mptcp-join-ooo.sh`, or in a micro-VM
# with that kernel, as docs/kernels.md shows.
#
# Two namespaces, three veth links. The client uploads over links 1 and 2,
# whose delays differ (5 and 60 ms), so the server's MPTCP-level
# out-of-order queue is rarely empty. Three seconds in, the server adds a
# third address as a `signal` endpoint: the kernel announces it to the
# running connections (iperf3's control and data connections), and the
# client joins each over link 3.
#
# What a kernel does, read from the server's counters:
#   both joins completed (MPJoinAckRx +2):     joins are accepted (6.1.0-56)
#   one refused, the client sent MP_RST:       the data connection's join was
#                                              refused (6.12.95; MP_RST reason
#                                              3, "administratively prohibited")
#   with `one-path`, both completed on both kernels: nothing was out of order
# Exit status: 0 when both joins completed, 1 when one was refused, 2 when the
# setup failed. Nothing is left behind: the namespaces go on exit.
set -eu
# `one-path`, the control case: link 2 is not announced, so the data flows
# over one subflow, in order, when the late join arrives
MODE=${1:-two-paths}
case "$MODE" in two-paths|one-path) ;; *) echo "usage: $0 [two-paths|one-path]" >&2; exit 2;; esac

C=mjo-client
S=mjo-server
cleanup() {
    ip netns del "$C" 2>/dev/null || true
    ip netns del "$S" 2>/dev/null || true
}
trap cleanup EXIT INT TERM

for tool in ip tc nstat iperf3 mptcpize; do
    command -v "$tool" >/dev/null || { echo "missing: $tool" >&2; exit 2; }
done
cleanup
ip netns add "$C"
ip netns add "$S"
for ns in "$C" "$S"; do
    ip netns exec "$ns" sysctl -q net.mptcp.enabled=1
    ip netns exec "$ns" ip link set lo up
done
for i in 1 2 3; do
    ip netns exec "$C" ip link add name c$i type veth peer name s$i
    ip netns exec "$C" ip link set s$i netns "$S"
    ip netns exec "$C" ip addr add 10.99.$i.1/24 dev c$i
    ip netns exec "$S" ip addr add 10.99.$i.2/24 dev s$i
    ip netns exec "$C" ip link set c$i up
    ip netns exec "$S" ip link set s$i up
done
# the upload's direction: unequal delays put data out of order at the server
ip netns exec "$C" tc qdisc add dev c1 root netem rate 4mbit delay 5ms limit 100
ip netns exec "$C" tc qdisc add dev c2 root netem rate 4mbit delay 60ms limit 100
ip netns exec "$C" tc qdisc add dev c3 root netem rate 4mbit delay 5ms limit 100

ip netns exec "$S" ip mptcp limits set subflows 2 add_addr_accepted 0
[ "$MODE" = one-path ] || ip netns exec "$S" ip mptcp endpoint add 10.99.2.2 dev s2 signal
ip netns exec "$C" ip mptcp limits set subflows 2 add_addr_accepted 2

ip netns exec "$S" nstat -n >/dev/null
ip netns exec "$C" nstat -n >/dev/null
ip netns exec "$S" mptcpize run iperf3 -s -1 >/dev/null 2>&1 &
sleep 1
ip netns exec "$C" mptcpize run iperf3 -c 10.99.1.2 -t 8 >/dev/null 2>&1 &
client=$!
sleep 3
joins_before=$(ip netns exec "$S" nstat -a 2>/dev/null | awk '$1 == "MPTcpExtMPJoinAckRx" {print $2}')
ip netns exec "$S" ip mptcp endpoint add 10.99.3.2 dev s3 signal
wait "$client" || true
sleep 1

server=$(ip netns exec "$S" nstat -a 2>/dev/null)
client=$(ip netns exec "$C" nstat -a 2>/dev/null)
get() { echo "$1" | awk -v k="$2" '$1 == k {print $2; found=1} END {if (!found) print 0}'; }
syn=$(get "$server" MPTcpExtMPJoinSynRx)
ack=$(get "$server" MPTcpExtMPJoinAckRx)
rst=$(get "$client" MPTcpExtMPRstTx)
late=$((ack - ${joins_before:-0}))
echo "kernel $(uname -r)"
echo "server: MP_JOIN SYNs received $syn, joins completed $ack ($late of 2 over the late address)"
echo "client: MP_RST sent $rst"
if [ "$late" -ge 2 ]; then
    echo "both late joins completed"
    exit 0
fi
echo "a late join was refused while data was out of order"
exit 1
