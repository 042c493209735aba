"""The runner's own pings (runners.linux.icmp_echo) print what `ping` prints, by ping's rules: its
rounding, its statistics, its exit code, its argument list. The sockets themselves are tested on a real
kernel (tests/integration/test_inprocess_pings.py)."""
import struct

from runners.collect import pings
from runners.linux import icmp_echo as ie


def test_reply_times_round_as_ping_rounds_them():
    # iputils: under 1 ms three decimals, under 10 ms two, under 100 ms one, then whole milliseconds
    assert [ie.reply_time(us) for us in (87, 999, 1000, 1234, 9994, 9995, 30449, 30450, 99949, 99950, 250400)] == [
        "0.087", "0.999", "1.00", "1.23", "9.99", "10.0", "30.4", "30.5", "99.9", "100", "250"]


def test_the_statistics_parse_back_to_the_replies_times():
    out = ie.EchoOutcome(pings.measured_request("10.0.1.1", "10.0.1.2"), sent=5,
                         rtts_us=[30412, 30377, 30501, 30466, 30390], sending_ms=81, elapsed_ms=112)
    out.lines = [f"64 bytes from 10.0.1.2: icmp_seq={n + 1} ttl=64 time={ie.reply_time(t)} ms"
                 for n, t in enumerate(out.rtts_us)]
    text = out.text()
    assert text.splitlines()[0] == "PING 10.0.1.2 (10.0.1.2) from 10.0.1.1 : 56(84) bytes of data."
    assert "5 packets transmitted, 5 received, 0% packet loss, time 81ms" in text
    assert "rtt min/avg/max/mdev = 30.377/30.429/30.501/0.047 ms" in text
    got = pings.parse_ping_after_warmup(text, warmup=0)
    assert got["received"] == 5 and got["rtt_min_ms"] == 30.4 and got["rtt_max_ms"] == 30.5
    assert out.rc == 0


def test_no_reply_is_exit_1_and_all_loss_and_icmp_errors_are_counted():
    out = ie.EchoOutcome(ie.EchoRequest("fd00::1", "fd00::2", 2, 0.02, linger=1), sent=2, errors=2,
                         lines=["From fd00::2: No route to host"] * 2, sending_ms=20)
    text = out.text()
    assert text.splitlines()[0] == "PING fd00::2(fd00::2) from fd00::1 : 56 data bytes"
    assert "2 packets transmitted, 0 received, +2 errors, 100% packet loss, time 20ms" in text
    assert "rtt" not in text and out.rc == 1
    assert pings.parse_ping_after_warmup(text, warmup=0)["loss_pct"] == 100.0


def test_with_a_deadline_fewer_replies_than_asked_is_exit_1():
    req = ie.EchoRequest("10.0.1.1", "10.0.1.2", 3, 0.2, deadline=10, quiet=True)
    assert ie.EchoOutcome(req, sent=9, rtts_us=[1000, 1000]).rc == 1
    assert ie.EchoOutcome(req, sent=9, rtts_us=[1000, 1000, 1000]).rc == 0


def test_the_requests_stand_for_the_pings_the_runner_ran_before():
    assert pings.measured_request("10.0.1.1", "10.0.1.2").argv == ["ping", "-n", "-c", "5", "-i", "0.02", "-W", "3", "-I",
                                                        "10.0.1.1", "10.0.1.2"]
    assert pings.warm_up_request("10.0.1.1", "10.0.1.2").argv == ["ping", "-n", "-q", "-c", "1", "-w", "10", "-i",
                                                                "0.2", "-I", "10.0.1.1", "10.0.1.2"]
    assert pings.one_echo_request("a", "b").argv == ["ping", "-n", "-c", "1", "-i", "1", "-W", "10", "-I", "a", "b"]


def test_an_echo_request_is_well_formed_and_its_reply_is_recognised():
    packet = ie.echo_packet(False, 0x1234, 7)
    assert len(packet) == 8 + ie.DATA_BYTES and packet[0] == ie.ICMP_ECHO
    assert ie.checksum(packet) == 0          # a correct checksum sums to zero
    reply = bytes([ie.ICMP_ECHOREPLY]) + packet[1:]
    ip_header = bytes([0x45, 0, 0, 84, 0, 0, 0, 0, 63, 1, 0, 0]) + bytes(8)
    assert ie.parse_reply(False, ip_header + reply) == (0x1234, 7, 63, bytes(ie.TAG_BYTES))
    tagged = ie.echo_packet(True, 0x1234, 9, b"12345678")
    assert ie.parse_reply(True, bytes([ie.ICMP6_ECHO_REPLY]) + tagged[1:])[3] == b"12345678"
    assert ie.parse_reply(False, ip_header + packet) is None          # a request, not a reply
    v6 = struct.pack("!BBHHH", ie.ICMP6_ECHO_REPLY, 0, 0, 0x1234, 9) + bytes(56)
    assert ie.parse_reply(True, v6) == (0x1234, 9, None, bytes(8))
    assert ie.parse_reply(True, b"\x81\0") is None


def test_after_the_last_echo_ping_waits_twice_the_longest_time_or_its_linger():
    assert ie.wait_after_last_echo([30000, 45000], interval=0.02, linger=3) == 0.09
    assert ie.wait_after_last_echo([1000], interval=0.02, linger=3) == 0.02     # at least the interval
    assert ie.wait_after_last_echo([], interval=0.02, linger=3) == 3             # no reply yet


def test_rtt_summary_is_ping_s_integer_arithmetic():
    assert ie.rtt_summary_us([30000]) == (30000, 30000, 30000, 0)
    assert ie.rtt_summary_us([1000, 3000]) == (1000, 2000, 3000, 1000)
    # what iputils 20221126 printed for these RTTs (mdev 0.268 and 0.108 ms)
    assert ie.rtt_summary_us([30137, 30582, 30867, 30821, 30782])[3] == 268
    assert ie.rtt_summary_us([314, 42, 42, 41, 44])[3] == 108
    # its square root: the floor, except just below a perfect square, where it gives that square's root
    assert [ie.llsqrt(a) for a in (0, 1, 3, 4, 15, 16, 24, 10 ** 12)] == [0, 1, 2, 2, 4, 4, 5, 10 ** 6]
