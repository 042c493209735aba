"""ICMP echoes sent and timed by this process as iputils' `ping` sends and times them, with its output.

The pings before every run (runners.collect.pings) cost more to start than to send: a `ping` process
took 0.1-0.2 s to start in a TCG guest, its five echoes on a 30 ms path 0.11 s. So where the runner has
a thread in the client's namespaces, that thread opens the sockets (a socket belongs to the namespace
it was made in) and this process sends and receives on them, every path at once.

What `ping -n [-q] -c COUNT -i INTERVAL (-W LINGER | -w DEADLINE) -I SRC DST` does, done the same way
(iputils' ping_common.c, the 2022-2024 releases Debian 12 and 13 ship):
- a raw ICMP socket bound to the source address; echoes of 56 bytes of data, numbered from 1;
- an echo's time: from just before it is sent to the kernel's receive timestamp of its reply
  (SO_TIMESTAMPNS), in microseconds, printed with ping's rounding;
- without a deadline, COUNT echoes INTERVAL apart; once the last is sent it waits twice the longest
  time seen (at least INTERVAL) if a reply came, else LINGER; it ends early once COUNT replies came;
- with a deadline, echoes INTERVAL apart until COUNT replies came or the deadline passed;
- an echo the kernel refuses to send (no route: a path taken down) counts as sent, and is not printed
  (iputils since 20210202); an ICMP error that comes back for an echo (unreachable, prohibited) counts as
  an error, and with the replies ends the ping once they make COUNT (with a deadline, at the first) - its
  line is the errno's words, not ping's decoding of the ICMP message;
- its statistics: `time` from the start to the last echo sent, mdev in whole microseconds as iputils
  computes it; exit 0 when a reply came (with a deadline: COUNT replies), else 1.
Each call's echoes carry identifiers from a random start and a random tag in their data, which a reply
must carry back: a late reply to an earlier call's echo is not taken for one of these.
"""
from __future__ import annotations

import os
import secrets
import select
import socket
import struct
import time
from dataclasses import dataclass, field

DATA_BYTES = 56
ICMP_ECHO, ICMP_ECHOREPLY = 8, 0
ICMP6_ECHO_REQUEST, ICMP6_ECHO_REPLY = 128, 129
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
IPV6_HOPLIMIT = getattr(socket, "IPV6_HOPLIMIT", 52)


@dataclass(frozen=True)
class EchoRequest:
    """One `ping` as its options say it."""
    src: str
    dst: str
    count: int
    interval: float
    linger: float = 10.0              # -W: with no reply yet, how long to wait after the last echo
    deadline: float | None = None     # -w: echoes until COUNT replies or this many seconds
    quiet: bool = False               # -q: the statistics only

    @property
    def argv(self) -> list[str]:
        """The `ping` this stands for (commands.log; and the process where no thread can open its socket)."""
        argv = ["ping", "-n"] + (["-q"] if self.quiet else []) + ["-c", str(self.count)]
        if self.deadline is not None:
            argv += ["-w", f"{self.deadline:g}", "-i", f"{self.interval:g}"]
        else:
            argv += ["-i", f"{self.interval:g}", "-W", f"{self.linger:g}"]
        return argv + ["-I", self.src, self.dst]

    @property
    def ipv6(self) -> bool:
        return ":" in self.dst


@dataclass
class EchoOutcome:
    """What one ping saw: its lines as ping prints them, and its exit code."""
    request: EchoRequest
    sent: int = 0
    errors: int = 0
    rtts_us: list[int] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    elapsed_ms: int = 0          # from the start to the end (commands.log)
    sending_ms: int = 0          # from the start to the last echo sent (ping's `time`)

    @property
    def rc(self) -> int:
        r = self.request
        if not self.rtts_us or (r.deadline is not None and len(self.rtts_us) < r.count):
            return 1
        return 0

    def text(self) -> str:
        """ping's output: its first line, a line per reply (unless quiet), its statistics."""
        r = self.request
        head = (f"PING {r.dst}({r.dst}) from {r.src} : {DATA_BYTES} data bytes" if r.ipv6 else
                f"PING {r.dst} ({r.dst}) from {r.src} : {DATA_BYTES}({DATA_BYTES + 28}) bytes of data.")
        received = len(self.rtts_us)
        loss = (self.sent - received) * 100.0 / self.sent if self.sent else 0.0
        stats = (f"{self.sent} packets transmitted, {received} received"
                 + (f", +{self.errors} errors" if self.errors else "") + f", {loss:g}% packet loss, "
                 f"time {self.sending_ms}ms")
        out = [head, *self.lines, "", f"--- {r.dst} ping statistics ---", stats]
        if self.rtts_us:
            out.append("rtt min/avg/max/mdev = " + "/".join(_ms(v) for v in rtt_summary_us(self.rtts_us)) + " ms")
        return "\n".join(out) + "\n"


def wait_after_last_echo(rtts_us: list[int], interval: float, linger: float) -> float:
    """Seconds ping waits once its last echo is out (its schedule_exit): twice the longest time so far,
    at least the interval, or, with no reply yet, its linger (-W)."""
    return max(2 * max(rtts_us) / 1e6, interval) if rtts_us else linger


def reply_time(triptime_us: int) -> str:
    """ping's ` time=...` of one reply: three significant digits, as iputils rounds them."""
    t = triptime_us
    if t >= 100000 - 50:
        return f"{(t + 500) // 1000}"
    if t >= 10000 - 5:
        return f"{(t + 50) // 1000}.{((t + 50) % 1000) // 100:01d}"
    if t >= 1000:
        return f"{(t + 5) // 1000}.{((t + 5) % 1000) // 10:02d}"
    return f"{t // 1000}.{t % 1000:03d}"


INT_MAX = 2 ** 31 - 1


def rtt_summary_us(rtts: list[int]) -> tuple[int, int, int, int]:
    """min, avg, max, mdev in microseconds, in iputils' integer arithmetic (ping_print_statistics)."""
    n, total, squares = len(rtts), sum(rtts), sum(x * x for x in rtts)
    avg = total // n
    variance = (squares - total * total // n) // n if total < INT_MAX else squares // n - avg * avg
    return min(rtts), avg, max(rtts), llsqrt(variance)


def llsqrt(a: int) -> int:
    """iputils' integer square root (Newton's method, as it stops)."""
    prev, x = 2 ** 63 - 1, a
    if x > 0:
        while x < prev:
            prev = x
            x = (x + a // x) // 2
    return x


def _ms(us: int) -> str:
    return f"{us // 1000}.{us % 1000:03d}"


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


TAG_BYTES = 8


def echo_packet(ipv6: bool, ident: int, seq: int, tag: bytes = bytes(TAG_BYTES)) -> bytes:
    """An echo request: ICMP header, then DATA_BYTES of data: the call's tag, then ping's pattern. An
    ICMPv6 socket fills in its own checksum."""
    data = tag + bytes(range(TAG_BYTES, DATA_BYTES))
    kind = ICMP6_ECHO_REQUEST if ipv6 else ICMP_ECHO
    header = struct.pack("!BBHHH", kind, 0, 0, ident, seq)
    if ipv6:
        return header + data
    return struct.pack("!BBHHH", kind, 0, checksum(header + data), ident, seq) + data


def parse_reply(ipv6: bool, packet: bytes) -> tuple[int, int, int | None, bytes] | None:
    """(identifier, sequence, ttl or None, the tag its data begins with) of an echo reply; None for
    anything else. An IPv4 raw socket hands over the IP header too; an IPv6 one the ICMPv6 message only
    (its hop limit comes apart)."""
    ttl = None
    if not ipv6:
        if len(packet) < 20:
            return None
        ihl = (packet[0] & 0x0F) * 4
        ttl, packet = packet[8], packet[ihl:]
    if len(packet) < 8:
        return None
    kind, _, _, ident, seq = struct.unpack("!BBHHH", packet[:8])
    if kind != (ICMP6_ECHO_REPLY if ipv6 else ICMP_ECHOREPLY):
        return None
    return ident, seq, ttl, packet[8:8 + TAG_BYTES]


def open_sockets(requests: list[EchoRequest]) -> list[socket.socket]:
    """open_socket for each request; none left open when one fails."""
    socks: list[socket.socket] = []
    try:
        for r in requests:
            socks.append(open_socket(r))
    except OSError:
        for sock in socks:
            sock.close()
        raise
    return socks


def open_socket(request: EchoRequest) -> socket.socket:
    """A raw ICMP socket bound to the request's source address and connected to its destination, with
    receive timestamps. Made by a thread in the namespace it is to send from."""
    family, proto = (socket.AF_INET6, socket.IPPROTO_ICMPV6) if request.ipv6 else (socket.AF_INET, socket.IPPROTO_ICMP)
    sock = socket.socket(family, socket.SOCK_RAW, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        if request.ipv6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVHOPLIMIT, 1)
        sock.bind((request.src, 0))
        try:
            sock.connect((request.dst, 0))   # and the kernel hands it only what comes from there
        except OSError:   # no route to it now: each echo then fails to go, as ping's do
            pass
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class _Session:
    """One ping's state: when its next echo goes, what it sent, what came back, and when it ends."""

    def __init__(self, request: EchoRequest, sock: socket.socket, ident: int, tag: bytes, now: float):
        self.request, self.sock, self.ident, self.tag = request, sock, ident, tag
        self.out = EchoOutcome(request)
        self.started = now
        self.next_send: float | None = now
        self.sent_at: dict[int, int] = {}      # unanswered sequence -> time.time_ns() just before it was sent
        try:
            self.connected = bool(sock.getpeername())
        except OSError:
            self.connected = False
        self.ends_at: float | None = now + request.deadline if request.deadline is not None else None
        self.done = False

    def due(self, now: float) -> None:
        r = self.request
        if self.next_send is None or now < self.next_send:
            return
        seq = self.out.sent + 1
        packet = echo_packet(r.ipv6, self.ident, seq & 0xFFFF, self.tag)
        # the time just before the send, as ping takes it: nothing of this process's between the two (the
        # socket is connected: no address to parse; in a TCG guest each Python step costs ~30x native)
        self.sent_at[seq] = time.time_ns()
        try:
            if self.connected:
                self.sock.send(packet)
            else:
                self.sock.sendto(packet, (r.dst, 0))
        except OSError:   # counted as sent, neither printed nor an error (iputils since 20210202)
            pass
        self.out.sent = seq
        self.out.sending_ms = int((now - self.started) * 1000 + 0.5)
        self.next_send = now + r.interval
        if r.deadline is None and seq >= r.count:   # ping's schedule_exit, once the last echo is out
            self.next_send = None
            self.ends_at = now + wait_after_last_echo(self.out.rtts_us, r.interval, r.linger)

    def receive(self, now: float) -> None:
        r = self.request
        while True:
            try:
                packet, ancillary, _, source = self.sock.recvmsg(4096, socket.CMSG_SPACE(16) + socket.CMSG_SPACE(4))
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:   # an ICMP error came back for an echo (the connected socket's error)
                self._error(now, e)
                if self.done:
                    return
                continue
            got = parse_reply(r.ipv6, packet)
            if got is None or got[0] != self.ident or got[3] != self.tag or not _same_address(source[0], r.dst):
                continue
            _, seq16, ttl, _ = got
            seq = next((s for s in self.sent_at if s & 0xFFFF == seq16), None)
            if seq is None:
                continue   # a duplicate (answered already), or not one of ours
            received_ns, hop_limit = _ancillary(ancillary)
            triptime = max(0, ((received_ns or time.time_ns()) - self.sent_at.pop(seq)) // 1000)
            self.out.rtts_us.append(triptime)
            if not r.quiet:
                ttl = ttl if ttl is not None else hop_limit
                self.out.lines.append(f"{DATA_BYTES + 8} bytes from {r.dst}: icmp_seq={seq} "
                                      f"ttl={ttl if ttl is not None else '?'} time={reply_time(triptime)} ms")
            if self._counted_all():
                self.finish(now)
                return

    def _error(self, now: float, e: OSError) -> None:
        r = self.request
        self.out.errors += 1
        if not r.quiet:
            self.out.lines.append(f"From {r.dst}: {e.strerror or e}")
        if self._counted_all() or r.deadline is not None:   # with a deadline, ping ends at any error
            self.finish(now)

    def _counted_all(self) -> bool:
        """ping's end: its replies and errors make COUNT."""
        return len(self.out.rtts_us) + self.out.errors >= self.request.count

    def finish(self, now: float) -> None:
        self.done = True
        self.out.elapsed_ms = int((now - self.started) * 1000)


def _same_address(a: str, b: str) -> bool:
    family = socket.AF_INET6 if ":" in b else socket.AF_INET
    try:
        return socket.inet_pton(family, a.split("%")[0]) == socket.inet_pton(family, b)
    except OSError:
        return False


def _ancillary(ancillary) -> tuple[int | None, int | None]:
    """(the kernel's receive time in ns, the IPv6 hop limit) from recvmsg's ancillary data."""
    received, hop_limit = None, None
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= 16:
            sec, nsec = struct.unpack("qq", data[:16])
            received = sec * 1_000_000_000 + nsec
        elif level == socket.IPPROTO_IPV6 and kind == IPV6_HOPLIMIT and len(data) >= 4:
            hop_limit = struct.unpack("i", data[:4])[0]
    return received, hop_limit


def echo_all(pairs: list[tuple[EchoRequest, socket.socket]]) -> list[EchoOutcome]:
    """Every request on its own socket, all at once; each outcome as its ping would have ended. The
    sockets are closed here."""
    now = time.monotonic()
    # an identifier per socket (a raw socket sees every echo reply of its namespace) from a random start,
    # and a random tag in the data: neither matches an earlier call's late reply
    first = secrets.randbelow(1 << 16)
    sessions = [_Session(request, sock, (first + n) & 0xFFFF, secrets.token_bytes(TAG_BYTES), now)
                for n, (request, sock) in enumerate(pairs)]
    try:
        while True:
            now = time.monotonic()
            for s in sessions:
                if not s.done and s.ends_at is not None and now >= s.ends_at:
                    s.finish(now)
                if not s.done:
                    s.due(now)
            live = [s for s in sessions if not s.done]
            if not live:
                break
            wake = min(t for s in live for t in (s.next_send, s.ends_at) if t is not None)
            ready, _, _ = select.select([s.sock for s in live], [], [], max(0.0, wake - time.monotonic()))
            now = time.monotonic()
            for s in live:
                if s.sock in ready:
                    s.receive(now)
    finally:
        for s in sessions:
            s.sock.close()
    return [s.out for s in sessions]
