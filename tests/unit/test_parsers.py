"""Parsers, on tool output recorded from real runs in the micro-VM (tests/fixtures)."""
import json
from pathlib import Path

import pytest
from topologies.plan import Shaping

from runners import errors
from runners.collect import pings, record
from runners.linux import procfs, rtnetlink, ss
from runners.pipeline import shaping
from runners.traffic import iperf3

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def fx(name: str) -> str:
    return (FIX / name).read_text()


def test_iperf3_mptcp_client_report():
    r = iperf3.parse_iperf3(fx("iperf3-mptcp-client.json"))
    assert r["version"].startswith("iperf 3.")
    assert 17 < r["throughput_mbps"] < 20          # two 10 Mbit/s paths
    assert r["bytes_received"] > 20_000_000 and r["seconds"] > 9.9
    assert len(r["intervals"]) == 10 and all(iv["mbps"] > 0 for iv in r["intervals"])
    assert r["connected"][0]["local"] == "10.0.1.1" and r["connected"][0]["remote"] == "10.0.1.2"


def test_iperf3_tcp_client_report():
    r = iperf3.parse_iperf3(fx("iperf3-tcp-client.json"))
    assert 9 < r["throughput_mbps"] < 10
    assert r["retransmits"] == 0 and r["sender_mean_rtt_ms"] > 30


def test_fixed_size_completion_from_the_receivers_intervals():
    # E3 case 7, MPTCP, 6 MB asked, 7.05 MB written (6 MB + 1 MiB extra): the server received, every 0.1 s
    text = fx("iperf3-mptcp-server-6MB.json")
    seconds, got = iperf3.completion_time(text, 6_000_000)
    assert 8.70 < seconds < 8.80 and got >= 6_000_000      # inside the interval that crossed 6 MB
    early, _ = iperf3.completion_time(text, 3_000_000)
    assert 0 < early < seconds
    assert iperf3.completion_time(text, 7_000_000) == (None, 6_860_016)   # iperf3 ended first: all it got
    with pytest.raises(errors.ParseError, match="receiver's iperf3 did not print JSON"):
        iperf3.completion_time("iperf3: error", 1)


@pytest.mark.parametrize("text,match", [
    ("not json", "did not print JSON"),
    ('{"error": "unable to connect to server: Connection refused"}', "Connection refused"),
    ('{"start": {}, "end": {}}', "no end.sum_received"),
])
def test_iperf3_errors(text, match):
    with pytest.raises(errors.ParseError, match=match):
        iperf3.parse_iperf3(text)


def test_nstat_absolute_counters_and_delta():
    after = procfs.parse_nstat(fx("nstat-receiver-after.txt"))
    before = procfs.parse_nstat(fx("nstat-receiver-before.txt"))
    d = procfs.counter_delta(before, after, ["MPTcpExtOFOQueue", "TcpExtTCPOFOQueue", "MPTcpExtMPJoinAckRx", "Nope"])
    assert d["MPTcpExtOFOQueue"] > 0 and d["MPTcpExtMPJoinAckRx"] >= 1 and d["Nope"] == 0
    assert all(isinstance(v, int) for v in after.values())


def test_nstat_garbage_is_an_error():
    with pytest.raises(errors.ParseError):
        procfs.parse_nstat("#kernel\nTcpExtFoo notanumber 0.0\n")


def test_interface_counters_from_proc_net_dev():
    stats = procfs.parse_net_dev(fx("proc-net-dev.txt"))
    assert "lo" in stats and stats["lo"]["rx_bytes"] == stats["lo"]["tx_bytes"] > 0
    assert set(stats["lo"]) == {"rx_bytes", "rx_packets", "rx_dropped", "tx_bytes", "tx_packets", "tx_dropped"}


def test_nstat_counters_from_proc_tables():
    lines = procfs.counters_lines(fx("proc-net-snmp.txt")) + procfs.counters_lines(fx("proc-net-netstat.txt"))
    counters = procfs.parse_nstat("\n".join(lines))
    # the names nstat prints: table prefix + field
    for name in ("TcpRetransSegs", "TcpExtTCPOFOQueue", "MPTcpExtOFOQueue", "MPTcpExtMPJoinAckRx", "IpInReceives"):
        assert name in counters, name
    assert all(isinstance(v, int) for v in counters.values())


def test_qdisc_counters_of_every_device():
    text = ('[{"kind":"netem","handle":"8001:","root":true,"dev":"h1-eth0","bytes":100,"packets":7,"drops":2},'
            '{"kind":"noqueue","handle":"0:","root":true,"dev":"lo","packets":0,"drops":0},'
            '{"kind":"pfifo","handle":"1:","parent":"8001:1","dev":"h1-eth0","packets":5,"drops":9}]')
    by_dev = rtnetlink.parse_qdisc_stats_by_dev(text)
    assert by_dev["h1-eth0"] == {"packets": 7, "drops": 2} and by_dev["lo"]["packets"] == 0


def test_netem_readback_and_mismatch():
    got = shaping.parse_netem(fx("tc-netem.json"))
    want = {"limit": got["limit"], "rate_mbit": got["rate_mbit"], "delay_ms": got["delay_ms"], "loss_pct": got["loss_pct"]}
    assert shaping.shaping_mismatches(want, got) == []
    assert got["rate_mbit"] == pytest.approx(10.0) and got["delay_ms"] == pytest.approx(250.0)
    assert shaping.shaping_mismatches({**want, "delay_ms": 15.0}, got) == ["delay_ms 250 != 15"]
    assert shaping.shaping_mismatches(want, None) == ["no netem qdisc is installed"]
    assert shaping.parse_netem('[{"kind":"noqueue","handle":"0:","root":true,"refcnt":2,"options":{}}]') is None


def test_a_rate_taken_at_dequeue_is_read_from_the_tbf_above_netem():
    """`tc -s -j qdisc show dev va` in the TCG VM (kernel 6.1, 2026-11-26) after `tc qdisc change ... root
    handle 1: tbf rate 2mbit` under traffic: netem (10:, in TBF's class 1:1) kept its queue."""
    got = shaping.parse_netem(fx("tc-tbf-netem.json"))
    assert got == {"limit": 200, "delay_ms": pytest.approx(10.0), "loss_pct": 0.0, "rate_mbit": pytest.approx(2.0),
                   "rate_by": "tbf"}
    want = shaping.wanted(Shaping(rate_mbit=2, delay_ms=10, loss_pct=0, limit_pkts=200, rate_at_dequeue=True))
    assert shaping.shaping_mismatches(want, got) == []
    # a plan that wants one netem finds a TBF: the layout is a mismatch of its own
    netem_only = shaping.wanted(Shaping(rate_mbit=2, delay_ms=10, loss_pct=0, limit_pkts=200))
    assert shaping.shaping_mismatches(netem_only, got) == ["the rate is tbf's, not netem's"]
    # the root's counters are netem's (TBF counts its child's backlog and drops): what the fidelity reads
    qdiscs = [{**q, "dev": "va"} for q in json.loads(fx("tc-tbf-netem.json"))]
    assert rtnetlink.root_qdisc_counts(qdiscs)["va"]["drops"] == qdiscs[1]["drops"] == 36


def test_ss_subflows_grouped_by_token():
    subs = ss.parse_ss_subflows(fx("ss-subflows.txt"))
    assert {s["local"] for s in subs} >= {"10.0.1.1", "10.0.2.1"}
    assert all(s["family"] == "ipv4" and s["token"] for s in subs)
    data = [s for s in subs if s["remote_port"] == 5201]
    assert len({s["token"] for s in data}) >= 1


def test_ss_dual_stack_subflows_report_their_family():
    subs = ss.parse_ss_subflows(fx("ss-subflows-dualstack.txt"))
    fams = {s["family"] for s in subs}
    assert fams == {"ipv4", "ipv6"}, subs
    v4 = next(s for s in subs if s["family"] == "ipv4")
    assert v4["local"].startswith("10.") and not v4["local"].startswith("::ffff:")


def test_loss_from_qdisc_drops_along_a_path():
    q = rtnetlink.parse_qdisc_stats_by_dev('[{"kind":"netem","handle":"8001:","root":true,"refcnt":3,"dev":"h1-eth0",'
                                   '"options":{"limit":100},"bytes":1500000,"packets":950,"drops":50,'
                                   '"overlimits":0,"requeues":0,"backlog":0,"qlen":0}]')
    assert q == {"h1-eth0": {"packets": 950, "drops": 50}}
    zero = {"packets": 0, "drops": 0}
    before = {("h1", "a"): zero, ("r1", "b"): zero}
    after = {("h1", "a"): {"packets": 950, "drops": 50}, ("r1", "b"): {"packets": 900, "drops": 50}}
    # 5 % then 50/950 = 5.26 %: 1 - 0.95 * 0.947 = 10 %
    assert record.path_loss_pct(before, after, [("h1", "a"), ("r1", "b")]) == pytest.approx(10.0)
    assert record.path_loss_pct(before, {("h1", "a"): {"packets": 9, "drops": 1}}, [("h1", "a")]) is None


def test_ping_leaves_out_the_warm_up_echo():
    r = pings.parse_ping_after_warmup(fx("ping-replies.txt"))
    # echo 1 (95.2 ms, neighbour resolution) is not measured; echo 4 was lost
    assert r["sent"] == 5 and r["received"] == 4 and r["loss_pct"] == 20.0
    assert r["rtt_min_ms"] == 30.9 and r["rtt_max_ms"] == 31.05
    assert r["rtt_avg_ms"] == pytest.approx(30.975)


def test_ping_with_no_reply_after_the_warm_up_has_no_rtt():
    text = ("64 bytes from 10.0.1.2: icmp_seq=1 ttl=64 time=5.0 ms\n"
            "3 packets transmitted, 1 received, 66.6667% packet loss, time 400ms\n")
    r = pings.parse_ping_after_warmup(text)
    assert r["loss_pct"] == 100.0 and r["rtt_avg_ms"] is None


def test_listening_socket_found_in_proc(tmp_path, monkeypatch):
    net = tmp_path / "42" / "net"
    net.mkdir(parents=True)
    head = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    (net / "tcp").write_text(head + "   0: 00000000:1451 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 1\n"
                                    "   1: 0100007F:1452 0100007F:D3A0 01 00000000:00000000 00:00000000 00000000 0 0 2\n")
    (net / "tcp6").write_text(head)
    monkeypatch.setattr(procfs, "Path", lambda p: tmp_path / p.removeprefix("/proc/"))
    assert procfs.listening(42, 5201)            # 0x1451, state 0A
    assert not procfs.listening(42, 5202)        # 0x1452 is an established connection, not a listener
    assert procfs.listening(42, 5201, udp=True)       # a tool's ready_port may be TCP or UDP
    (net / "udp").write_text(head + "   0: 00000000:1453 00000000:0000 07 00000000:00000000 00:00000000 00000000 0 0 3\n")
    assert procfs.listening(42, 5203, udp=True) and not procfs.listening(42, 5203)


def test_the_sender_rtt_comes_from_the_side_that_sent():
    """In a download the client only receives ("sender": false, mean_rtt 0): its 0 is not an RTT;
    the server's JSON (the sender) holds the real one."""
    sent = json.loads((FIX / "iperf3-tcp-client.json").read_text())
    received = json.loads(json.dumps(sent))
    for s in received["end"]["streams"]:
        s["sender"].update(sender=False, mean_rtt=0)
    assert iperf3.parse_iperf3(json.dumps(received))["sender_mean_rtt_ms"] is None
    assert iperf3.sender_mean_rtt_ms(json.dumps(received)) is None
    assert iperf3.sender_mean_rtt_ms(json.dumps(sent)) == pytest.approx(188.886)
    assert iperf3.sender_mean_rtt_ms("not json") is None


def test_read_back_tolerates_the_clocks_rounding_of_small_delays_but_not_a_lost_rate():
    want = {"limit": 100, "rate_mbit": 10.0, "delay_ms": 0.025, "loss_pct": 0.0}
    got = {"limit": 100, "rate_mbit": 10.0, "delay_ms": 0.024, "loss_pct": 0.0}
    assert shaping.shaping_mismatches(want, got) == []                       # 25 us reads back as 24 us
    assert shaping.shaping_mismatches(want, {**got, "delay_ms": 0.020}) == ["delay_ms 0.02 != 0.025"]
    tiny = {**want, "rate_mbit": 0.000001}
    assert shaping.shaping_mismatches(tiny, {**got, "rate_mbit": 0.0}) == ["rate_mbit 0 != 1e-06"]


def test_one_qdisc_listing_of_every_device_gives_each_device_its_own():
    """Shaping reads every device's qdiscs with one `tc -j qdisc show` (one process, not one per device)."""
    every = ('[{"kind":"noqueue","handle":"0:","dev":"lo","root":true,"refcnt":2,"options":{}},'
             '{"kind":"netem","handle":"8002:","dev":"h1-eth0","root":true,"refcnt":3,"options":{"limit":309,'
             '"delay":{"delay":0.25,"jitter":0,"correlation":0},"rate":{"rate":1250000,"packetoverhead":0,'
             '"cellsize":0,"celloverhead":0},"ecn":false,"gap":0}},'
             '{"kind":"netem","handle":"8003:","dev":"h1-eth1","root":true,"refcnt":3,"options":{"limit":100,'
             '"delay":{"delay":0.015,"jitter":0,"correlation":0},"ecn":false,"gap":0}}]')
    eth0 = shaping.parse_netem(shaping.qdiscs_of_dev(every, "h1-eth0"))
    assert eth0 == shaping.parse_netem(fx("tc-netem.json"))
    assert shaping.parse_netem(shaping.qdiscs_of_dev(every, "h1-eth1"))["limit"] == 100
    assert shaping.parse_netem(shaping.qdiscs_of_dev(every, "h1-eth9")) is None
    with pytest.raises(errors.ParseError):
        shaping.qdiscs_of_dev("not json", "h1-eth0")
