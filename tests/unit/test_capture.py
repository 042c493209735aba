"""--capture: the subflow table read from recorded tshark output (and tshark run on a recorded pcap),
and the capture options checked before anything starts."""
import csv
import io
import shutil
import time
import subprocess
import sys
from pathlib import Path

import pytest

from runners.collect.capture import CaptureSpec, _tcpdump_counts, capture_nodes, parse_roles
from runners.analysis.pcap_subflows import SubflowTable, data_connection, read_packets, render_csv
from runners.linux.netns import netns_mounts

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "tests" / "fixtures" / "capture"
PATHS = {"10.0.1.1": "A", "10.0.2.1": "B"}


def table() -> list[dict]:
    t = SubflowTable()
    for i in (0, 1):
        t.add((FIX / f"h1-h1-eth{i}.tshark.tsv").read_text(), f"h1-eth{i}")
    return t.rows(PATHS)


def test_one_row_per_subflow_grouped_by_connection():
    rows = table()
    # iperf3 under mptcpize: a control connection and a data connection, each with an initial subflow
    # on path A and a join on path B
    assert [(r["connection"], r["kind"], r["path"]) for r in rows] == [
        ("0", "MP_CAPABLE", "A"), ("0", "MP_JOIN", "B"), ("1", "MP_CAPABLE", "A"), ("1", "MP_JOIN", "B")]
    assert all(r["client_port"] != 5299 and r["server_port"] == 5299 and r["family"] == "ipv4" for r in rows)


def test_the_data_connection_its_bytes_backup_flag_and_retransmissions():
    data = data_connection(table())
    first, join = data
    assert first["bytes_client_to_server"] > 4_000_000 and first["bytes_server_to_client"] == 0   # an upload
    assert join["backup"] == 1 and join["bytes_client_to_server"] == 0     # a backup path stays idle
    assert first["backup"] == 0
    assert first["retransmissions"] > 0                                    # tbf dropped some
    assert 1.9 < first["last_s"] - first["first_s"] < 2.2                  # a 2 s transfer
    assert first["interface"] == "h1-eth0" and join["interface"] == "h1-eth1"


def test_the_csv_has_its_columns_in_order():
    text = render_csv(table())
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0])[:3] == ["connection", "kind", "family"] and len(rows) == 4


def test_a_subflow_whose_syn_was_not_captured_is_marked_unknown():
    lines = [ln for ln in (FIX / "h1-h1-eth1.tshark.tsv").read_text().splitlines() if "\t1\t0\t" not in ln]
    t = SubflowTable()
    t.add("\n".join(lines[2:]), "h1-eth1")
    assert {r["kind"] for r in t.rows()} <= {"unknown", "MP_JOIN"}


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is installed by setup.sh")
def test_tshark_reads_a_recorded_pcap_as_recorded():
    """What this machine's tshark reads means what the recorded output meant. Not the same text: tshark
    4.0 (Debian 12) prints flags as 1/0, 4.4 (Debian 13) as True/False, and the parser takes both."""
    live = read_packets(FIX / "h1-h1-eth1.pcap")
    recorded = (FIX / "h1-h1-eth1.tshark.tsv").read_text()
    assert len(live.splitlines()) == len(recorded.splitlines())
    tables = []
    for text in (live, recorded):
        t = SubflowTable()
        t.add(text, "h1-eth1")
        tables.append(t.rows(PATHS))
    assert tables[0] == tables[1] and tables[0]


@pytest.mark.parametrize("true,false", [("1", "0"), ("True", "False")])
def test_both_spellings_of_tsharks_flags_read_alike(true, false):
    from runners.analysis.pcap_subflows import FIELDS
    flags = {FIELDS.index(f) for f in ("tcp.flags.syn", "tcp.flags.ack", "tcp.options.mptcp.backup.flag")}

    def spell(i: int, value: str) -> str:
        return ",".join({"1": true, "0": false}.get(v, v) for v in value.split(",")) if i in flags else value
    recorded = (FIX / "h1-h1-eth1.tshark.tsv").read_text()
    spelled = "\n".join("\t".join(spell(i, f) for i, f in enumerate(line.split("\t")))
                        for line in recorded.splitlines())
    t = SubflowTable()
    t.add(spelled, "h1-eth1")
    rows = t.rows(PATHS)
    assert [r["kind"] for r in rows] == ["MP_JOIN", "MP_JOIN"] and rows[0]["backup"] == 1


def test_tcpdump_counts():
    text = "tcpdump: listening on c-eth0\n1402 packets captured\n1402 packets received by filter\n3 packets dropped by kernel\n"
    assert _tcpdump_counts(text) == {"packets": 1402, "received_by_filter": 1402, "dropped_by_kernel": 3,
                                     "not_written": 0}
    # stopped while it lagged behind (TCG): the kernel had passed it more than it wrote
    lagging = "2154 packets captured\n3873 packets received by filter\n0 packets dropped by kernel\n"
    assert _tcpdump_counts(lagging)["not_written"] == 1719


def test_a_pcap_is_incomplete_when_packets_were_dropped_or_more_than_the_last_few_never_written():
    from runners.collect.capture import STRAGGLERS_ALLOWED, incomplete
    assert not incomplete(_tcpdump_counts("2969 packets captured\n2971 packets received by filter\n"
                                          "0 packets dropped by kernel\n"))
    assert incomplete(_tcpdump_counts("4870 packets captured\n5575 packets received by filter\n"
                                      "0 packets dropped by kernel\n"))
    assert incomplete({"packets": 10, "received_by_filter": 10, "dropped_by_kernel": 1, "not_written": 0})
    assert not incomplete({"packets": 10, "not_written": STRAGGLERS_ALLOWED})


def test_a_plain_tcp_runs_connections_are_each_one_tcp_row_without_an_mptcp_connection():
    """A TCP baseline's capture (iperf3's control and data connections, no MPTCP option on any SYN)."""
    t = SubflowTable()
    t.add((FIX / "tcp-h1-h1-eth0.tshark.tsv").read_text(), "h1-eth0")
    rows = t.rows(PATHS)
    assert [(r["kind"], r["connection"], r["client_port"], r["path"]) for r in rows] == [
        ("TCP", "", 36257, "A"), ("TCP", "", 45507, "A")]
    assert rows[1]["bytes_client_to_server"] > rows[0]["bytes_client_to_server"]   # the data connection


def captured_set(tmp_path: Path) -> tuple[Path, dict]:
    """A result set whose MPTCP run captured h1-eth1 (the recorded pcap), a TCP run that captured nothing,
    and two runs that shared one capture whose pcap is not a pcap."""
    pcap = tmp_path / "raw" / "r001-mptcp-A" / "pcap" / "h1-h1-eth1.pcap"
    pcap.parent.mkdir(parents=True)
    shutil.copy(FIX / "h1-h1-eth1.pcap", pcap)
    broken = tmp_path / "raw" / "r002-tcp-A" / "pcap" / "h1-h1-eth0.pcap"
    broken.parent.mkdir(parents=True)
    broken.write_text("not a pcap")
    files = lambda name: [{"node": "h1", "interface": name.split("-", 1)[1].removesuffix(".pcap"), "file": f"pcap/{name}"}]
    captured = {"files": files("h1-h1-eth1.pcap"), "client_nodes": ["h1"], "paths_by_address": PATHS}
    broken_capture = {"files": files("h1-h1-eth0.pcap"), "client_nodes": ["h1"], "paths_by_address": PATHS}
    return tmp_path, {"runs": [{"id": "r001-mptcp-A", "capture": captured}, {"id": "r001-tcp-A"},
                               {"id": "r002-tcp-A", "capture": broken_capture, "shared_raw": "raw/r002-tcp-A"},
                               {"id": "r002-tcp-B", "capture": broken_capture, "shared_raw": "raw/r002-tcp-A"}],
                      "metadata": {}}


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is installed by setup.sh")
def test_the_report_writes_each_captured_runs_subflow_table_once(tmp_path, monkeypatch):
    from runners.analysis import pcap_subflows
    run_dir, doc = captured_set(tmp_path)
    warnings = pcap_subflows.write_subflow_tables(run_dir, doc)
    written = run_dir / "raw" / "r001-mptcp-A" / "subflows-pcap.csv"
    t = SubflowTable()
    t.add((FIX / "h1-h1-eth1.tshark.tsv").read_text(), "h1-eth1")
    assert list(csv.DictReader(written.open())) == list(csv.DictReader(io.StringIO(render_csv(t.rows(PATHS)))))
    assert len(warnings) == 1 and warnings[0].startswith("run r002-tcp-A: subflows-pcap.csv not written: tshark"), \
        warnings                                           # one warning for the capture the two runs shared
    assert sorted(p.name for p in run_dir.rglob("subflows-pcap.csv")) == ["subflows-pcap.csv"]

    def no_tshark(*_):
        raise AssertionError("a table that exists is not read again")
    monkeypatch.setattr(pcap_subflows, "read_packets", no_tshark)
    doc["runs"] = [r for r in doc["runs"] if r["id"] not in ("r002-tcp-A", "r002-tcp-B")]
    assert pcap_subflows.write_subflow_tables(run_dir, doc) == []


def test_a_set_recorded_before_the_report_wrote_the_tables_takes_its_clients_from_the_address_plan():
    """Its capture records name no client nodes; its metadata's address plan does. Without either, the
    table is not guessed (every node's pcaps would count each subflow twice)."""
    from runners.analysis.pcap_subflows import capture_sides
    plan = {"client": "h1", "clients": ["h1"],
            "paths": [{"name": "A", "client": "10.0.1.1 (h1-eth0)"}, {"name": "B", "client": "10.0.2.1 (h1-eth1)"}]}
    assert capture_sides({"files": []}, plan) == (["h1"], PATHS)
    assert capture_sides({"files": [], "client_nodes": ["h3"], "paths_by_address": {"10.0.3.1": "C"}}, plan) == (
        ["h3"], {"10.0.3.1": "C"})
    assert capture_sides({"files": []}, {}) == ([], {})


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is installed by setup.sh")
def test_a_set_that_names_no_clients_gets_a_warning_not_a_table(tmp_path):
    from runners.analysis import pcap_subflows
    run_dir, doc = captured_set(tmp_path)
    doc["runs"] = doc["runs"][:1]
    del doc["runs"][0]["capture"]["client_nodes"]
    assert pcap_subflows.write_subflow_tables(run_dir, doc) == [
        "run r001-mptcp-A: subflows-pcap.csv not written: the set does not say which nodes were clients"]
    assert not list(run_dir.rglob("subflows-pcap.csv"))


def test_without_tshark_the_report_says_which_tables_it_could_not_write(tmp_path, monkeypatch):
    from runners.analysis import pcap_subflows
    run_dir, doc = captured_set(tmp_path)
    monkeypatch.setattr(pcap_subflows.shutil, "which", lambda name: None)
    assert pcap_subflows.write_subflow_tables(run_dir, doc) == [
        f"2 captured run(s) without subflows-pcap.csv: tshark is not installed (setup.sh installs it; then "
        f"`run-scenario report {run_dir}`)"]
    assert not list(run_dir.rglob("subflows-pcap.csv"))


def test_capture_asks_libpcap_for_every_packet_at_once(tmp_path):
    """Without --immediate-mode, libpcap hands tcpdump whole ring blocks and CI lost a run's last 12 %."""
    from runners.collect import capture as cap

    class Procs:
        def start(self, node, argv, stdout=None, stderr=None):
            self.argv = argv
            stdout.write(b"listening on x\n")
            stdout.flush()
            return type("P", (), {"poll": lambda self: None})()

    class Node:
        name = "h1"

        def intfNames(self):
            return ["h1-eth0"]
    procs = Procs()
    cap.Capture(CaptureSpec(("client",)), procs).start([Node()], tmp_path)
    assert "--immediate-mode" in procs.argv and "-U" in procs.argv


def test_capture_stops_only_once_every_file_has_stopped_growing(tmp_path, monkeypatch):
    import threading
    from runners.collect import capture as cap
    monkeypatch.setattr(cap, "DRAIN_QUIET_S", 0.3)
    f = tmp_path / "x.part.pcap"
    f.write_bytes(b"")
    c = cap.Capture(CaptureSpec(("client",)), procs=None)
    c.dumps = [cap._Dump("h1", "h1-eth0", f, tmp_path / "x.log", None)]

    def writer():
        for _ in range(8):
            with f.open("ab") as out:
                out.write(b"p" * 100)
            time.sleep(0.1)
    t = threading.Thread(target=writer)
    t.start()
    c._drain()
    t.join()
    assert f.stat().st_size == 800      # it waited for the last write


FAKE_TCPDUMP = """
import signal, sys, time
asked = 0
def counts(*_):
    global asked
    asked += 1
    written = 100 if asked >= {caught_up_at} else 60   # behind until asked {caught_up_at} times
    sys.stderr.write(f"tcpdump: {{written}} packets captured, 100 packets received by filter, 0 packets dropped by kernel\\n")
    sys.stderr.flush()
signal.signal(signal.SIGUSR1, counts if {answers} else signal.SIG_IGN)
sys.stderr.write("tcpdump: listening on h1-eth0\\n"); sys.stderr.flush()
while True:
    time.sleep(0.02)
"""


def fake_dump(tmp_path, caught_up_at: int, answers: bool = True):
    from runners.collect import capture as cap
    log, pcap = tmp_path / "h1-h1-eth0.tcpdump.log", tmp_path / "h1-h1-eth0.part.pcap"
    pcap.write_bytes(b"")
    with log.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", FAKE_TCPDUMP.format(caught_up_at=caught_up_at, answers=answers)],
                                stderr=err)
    while b"listening on" not in log.read_bytes():
        time.sleep(0.02)
    return cap._Dump("h1", "h1-eth0", pcap, log, proc)


def test_a_quiet_file_is_not_enough_the_drain_waits_until_tcpdump_has_written_all_it_was_passed(tmp_path,
                                                                                                monkeypatch):
    """A tcpdump the emulated CPU left unscheduled writes nothing for seconds and still holds packets: the
    drain asks it for its counts and ends only once it wrote all the kernel passed it."""
    from runners.collect import capture as cap
    monkeypatch.setattr(cap, "DRAIN_QUIET_S", 0.1)
    d = fake_dump(tmp_path, caught_up_at=3)
    c = cap.Capture(CaptureSpec(("client",)), procs=None)
    c.dumps = [d]
    try:
        c._drain()
        text = d.log.read_text()
        assert cap._answers(d.log) == 3, text
        assert cap._tcpdump_counts(text) == {"packets": 100, "received_by_filter": 100, "dropped_by_kernel": 0,
                                             "not_written": 0}
    finally:
        d.proc.kill()
        d.proc.wait()


def test_a_tcpdump_that_never_catches_up_is_stopped_at_the_drain_limit(tmp_path, monkeypatch):
    from runners.collect import capture as cap
    monkeypatch.setattr(cap, "DRAIN_QUIET_S", 0.1)
    monkeypatch.setattr(cap, "COUNTS_ANSWER_S", 0.2)
    monkeypatch.setattr(cap, "DRAIN_LIMIT_S", 1.5)
    d = fake_dump(tmp_path, caught_up_at=10**6, answers=False)
    c = cap.Capture(CaptureSpec(("client",)), procs=None)
    c.dumps = [d]
    t0 = time.monotonic()
    try:
        c._drain()
        assert 1.5 <= time.monotonic() - t0 < 4, "it waited for the limit, and not much beyond it"
        assert cap._answers(d.log) == 0
    finally:
        d.proc.kill()
        d.proc.wait()


FAKE_TCPDUMP_LATE_PACKETS = """
import signal, sys, time
def say(written, received):
    sys.stderr.write(f"tcpdump: {written} packets captured, {received} packets received by filter, 0 packets dropped by kernel\\n")
    sys.stderr.flush()
signal.signal(signal.SIGUSR1, lambda *_: say(100, 100))      # caught up with the run
def stop(*_):
    say(100, 108)     # 8 more passed by the kernel as it stopped, none written
    sys.exit(0)
signal.signal(signal.SIGINT, stop)
sys.stderr.write("tcpdump: listening on h1-eth0\\n"); sys.stderr.flush()
while True:
    time.sleep(0.02)
"""


def test_packets_that_arrive_after_the_drain_found_tcpdump_caught_up_are_not_the_runs(tmp_path, monkeypatch):
    """What the kernel passes a tcpdump after it has written every packet of the run (its file quiet, its
    counts caught up) are packets after the run: counted, not held against the capture. Without a drain
    that found it caught up, the same counts are an incomplete capture."""
    from runners.collect import capture as cap
    monkeypatch.setattr(cap, "DRAIN_QUIET_S", 0.1)
    log, pcap = tmp_path / "h1-h1-eth0.tcpdump.log", tmp_path / "h1-h1-eth0.part.pcap"
    pcap.write_bytes(b"")
    with log.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", FAKE_TCPDUMP_LATE_PACKETS], stderr=err)
    while b"listening on" not in log.read_bytes():
        time.sleep(0.02)
    c = cap.Capture(CaptureSpec(("client",)), procs=None)
    c.dumps = [cap._Dump("h1", "h1-eth0", pcap, log, proc)]
    try:
        (record,) = c.stop()
    finally:
        proc.kill()
        proc.wait()
    assert record["not_written"] == 8 > cap.STRAGGLERS_ALLOWED and record["received_after_drain"] == 8, record
    assert not cap.incomplete(record)
    assert cap.incomplete({k: v for k, v in record.items() if k != "received_after_drain"})
    assert record["file"] == "pcap/h1-h1-eth0.pcap" and (tmp_path / "h1-h1-eth0.pcap").exists()


class Plan:
    all_clients, server, routers = ("h1",), "h2", ("r1", "r2")


def test_roles_and_nodes():
    assert parse_roles("client, server,client") == ("client", "server")
    with pytest.raises(ValueError, match="client, server, routers"):
        parse_roles("client;reboot")
    assert capture_nodes(CaptureSpec(("routers", "client")), Plan()) == ["h1", "r1", "r2"]


def cli(*args):
    return subprocess.run([sys.executable, "-m", "runners.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("args,message", [
    (["--capture", "switches"], "--capture takes a comma-separated list"),
    (["--capture", "client", "--snaplen", "20"], "--snaplen must be between 64 and 65535"),
    (["--snaplen", "200"], "--snaplen needs --capture"),
])
def test_bad_capture_options_are_usage_errors(tmp_path, args, message):
    r = cli("scenarios/two-paths.yaml", *args, "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "o").exists()


def test_capture_before_the_scenario_does_not_swallow_it(tmp_path):
    # as root, the dry run's probe makes throwaway namespaces (`ip netns add`): the first one on a machine
    # bind-mounts /run/netns on itself, which `ip netns del` leaves behind (issue 32); the probe undoes it
    before = netns_mounts()
    r = cli("--capture", "scenarios/two-paths.yaml", "--dry-run")
    assert r.returncode == 0 and "two-paths" in r.stdout
    assert netns_mounts() == before


def test_the_session_fails_when_its_tests_leave_a_network_namespace_mount(tmp_path, monkeypatch):
    from tests import conftest

    line = "42 27 254:0 {0} {0} rw,relatime shared:1 - ext4 /dev/vda rw\n"
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(line.format("/"))
    monkeypatch.setattr(conftest, "MOUNTINFO", mountinfo)
    monkeypatch.setattr(conftest, "_netns_at_start", [])
    session = type("Session", (), {"exitstatus": 0})()
    conftest.pytest_sessionstart(session)
    conftest.pytest_sessionfinish(session, 0)
    assert session.exitstatus == 0
    mountinfo.write_text(line.format("/") + line.format("/run/netns"))
    conftest.pytest_sessionfinish(session, 0)
    assert session.exitstatus == 1


class FakeTcpdumpNode:
    """A node whose every process is FAKE_TCPDUMP_LATE_PACKETS, whatever command it was asked to run."""
    name = "h1"

    def intfNames(self):
        return ["h1-eth0"]

    def popen(self, argv, stdin=None, stdout=None, stderr=None):
        if "-w" in argv:
            Path(argv[argv.index("-w") + 1]).write_bytes(b"")
        return subprocess.Popen([sys.executable, "-c", FAKE_TCPDUMP_LATE_PACKETS], stdin=stdin, stdout=stdout,
                                stderr=stderr)


def test_the_traffic_tools_end_of_run_stop_leaves_the_tcpdumps_to_the_drain(tmp_path, monkeypatch):
    """The traffic tool stops every process of the run's registry when its traffic ends. The tcpdumps are
    not in it: they run on until the drain has found them caught up (until 2026-11-27 they were in it, got
    SIGTERM there, and never reached the drain)."""
    from runners.collect import capture as cap
    from runners.linux.nsexec import ProcessRegistry
    monkeypatch.setattr(cap, "DRAIN_QUIET_S", 0.1)
    run_procs = ProcessRegistry()
    c = cap.Capture(CaptureSpec(("client",)))
    c.start([FakeTcpdumpNode()], tmp_path)
    tool_proc = run_procs.start(FakeTcpdumpNode(), ["iperf3"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        run_procs.stop_all()               # what iperf3.py and command.py do at the traffic's end
        assert tool_proc.poll() is not None and all(d.proc.poll() is None for d in c.dumps)
        (record,) = c.stop()
    finally:
        c.close()
    assert record["received_after_drain"] == 8 and not cap.incomplete(record), record


def test_close_ends_the_tcpdumps_of_a_failed_run_at_once_and_keeps_their_pcaps(tmp_path, monkeypatch):
    from runners.collect import capture as cap
    monkeypatch.setattr(cap, "DRAIN_QUIET_S", 30.0)      # close must not wait for a drain
    c = cap.Capture(CaptureSpec(("client",)))
    c.start([FakeTcpdumpNode()], tmp_path)
    (proc,) = [d.proc for d in c.dumps]
    t0 = time.monotonic()
    c.close()
    assert proc.poll() is not None and time.monotonic() - t0 < 5
    assert not c.dumps and [p.name for p in tmp_path.iterdir()] == ["h1-h1-eth0.pcap"]
    c.close()                                             # again, or after stop: nothing to do


def test_a_start_that_fails_halfway_ends_the_tcpdumps_it_had_started(tmp_path):
    from runners.collect import capture as cap

    class SecondFails(FakeTcpdumpNode):
        def intfNames(self):
            return ["h1-eth0", "h1-eth1"]

        def popen(self, argv, **kw):
            if "h1-eth1" in argv:
                raise OSError("mnexec: no such process")
            return super().popen(argv, **kw)
    c = cap.Capture(CaptureSpec(("client",)))
    with pytest.raises(OSError):
        c.start([SecondFails()], tmp_path)
    assert not c.dumps and not list(tmp_path.glob("*.tcpdump.log"))
    assert all(p.poll() is not None for p in c.procs._procs)
