"""Qdisc counters over rtnetlink (runners.linux.rtnetlink), parsed from recorded dumps.

The fixtures were recorded together in one namespace (2026-11-25, kernel 6.18): a
tbf qdisc at 100 bit/s overrun by 400 UDP datagrams (drops; its backlog stays put,
so both reads see the same numbers), an htb root with a pfifo child, `tc -s -j qdisc
show`, then the rtnetlink dumps of the qdiscs and links. The reader must give tc's
counters for every qdisc.
"""
import json
import struct

import pytest

from runners.linux import rtnetlink, rtnetlink as nl

FIX = __import__("pathlib").Path(__file__).resolve().parent.parent / "fixtures"
COUNTERS = ("kind", "handle", "dev", "root", "parent", "bytes", "packets", "drops", "overlimits", "requeues",
            "backlog", "qlen")


def recorded() -> list[dict]:
    names = dict(filter(None, (nl.parse_link(p) for k, p in nl.messages((FIX / "rtnetlink-link-dump.bin").read_bytes())
                               if k == nl.RTM_NEWLINK)))
    return [nl.parse_qdisc(p, names) for k, p in nl.messages((FIX / "rtnetlink-qdisc-dump.bin").read_bytes())
            if k == nl.RTM_NEWQDISC]


def test_every_qdisc_has_the_counters_tc_gives():
    tc = json.loads((FIX / "rtnetlink-tc-s-j.json").read_text())
    ours = recorded()
    assert [{k: q[k] for k in COUNTERS if k in q} for q in ours] == \
        [{k: q[k] for k in COUNTERS if k in q} for q in tc]
    tbf = next(q for q in ours if q["kind"] == "tbf")
    assert (tbf["drops"], tbf["backlog"], tbf["qlen"]) == (370, 29176, 28)   # an overrun queue, really read


def test_the_loss_parser_reads_both_alike():
    tc = (FIX / "rtnetlink-tc-s-j.json").read_text()
    assert rtnetlink.parse_qdisc_stats_by_dev(json.dumps(recorded())) == rtnetlink.parse_qdisc_stats_by_dev(tc)


def test_the_dump_ends_with_done_and_names_every_device():
    kinds = [k for k, _ in nl.messages((FIX / "rtnetlink-qdisc-dump.bin").read_bytes())]
    assert kinds[-1] == nl.NLMSG_DONE and kinds.count(nl.RTM_NEWQDISC) == 3
    assert {q["dev"] for q in recorded()} == {"h1-eth0", "h1-eth1"}


class RecordedReader(nl.QdiscReader):
    """The reader's own filtering, on the recorded dumps instead of a socket; counts its dumps."""

    def __init__(self):
        super().__init__(pid=0)
        self.dumps = []

    def _dump(self, kind, header):
        self.dumps.append(kind)
        name = "rtnetlink-qdisc-dump.bin" if kind == nl.RTM_GETQDISC else "rtnetlink-link-dump.bin"
        return [(k, p) for k, p in nl.messages((FIX / name).read_bytes()) if k != nl.NLMSG_DONE]


def test_asked_for_some_devices_the_reader_gives_their_root_qdiscs_only():
    """The fidelity sampler's read: the other devices' and the child qdiscs are skipped, not parsed."""
    every = RecordedReader().qdiscs()
    reader = RecordedReader()
    some = reader.qdiscs({"h1-eth1"})
    assert some == [q for q in every if q["dev"] == "h1-eth1" and q.get("root")] and len(some) == 1
    assert reader.qdiscs({"h1-eth0", "h1-eth1"}) == [q for q in every if q.get("root")]
    assert reader.qdiscs({"nosuch0"}) == []
    # the device names are dumped once, when a device is first seen
    assert reader.dumps == [nl.RTM_GETQDISC, nl.RTM_GETLINK, nl.RTM_GETQDISC, nl.RTM_GETQDISC]


def test_nodes_in_one_namespace_are_read_once():
    """Open vSwitch switches share the root namespace: one read covers all their ports."""
    from runners.collect.counters import by_namespace

    ns = {"s1": 1, "s2": 1, "h1": 7}
    groups = by_namespace([("s1", "s1-eth2"), ("s2", "s2-eth1"), ("h1", "h1-eth0"), ("s1", "s1-eth3")], ns.get)
    assert groups == [("s1", {"s1-eth2": "s1", "s2-eth1": "s2", "s1-eth3": "s1"}), ("h1", {"h1-eth0": "h1"})]


def test_an_error_answer_raises_with_the_kernels_errno():
    payload = struct.pack("=i", -1) + nl.NLMSGHDR.pack(16, nl.RTM_GETQDISC, 0, 1, 0)
    msg = nl.NLMSGHDR.pack(nl.NLMSGHDR.size + len(payload), nl.NLMSG_ERROR, 0, 1, 0) + payload
    with pytest.raises(nl.NetlinkError) as e:
        nl.messages(msg)
    assert e.value.errno == 1


def test_a_truncated_message_is_refused_not_misread():
    data = (FIX / "rtnetlink-qdisc-dump.bin").read_bytes()
    length = nl.NLMSGHDR.unpack_from(data)[0]
    with pytest.raises(nl.NetlinkError, match="runs past"):
        nl.messages(data[:length - 4])
    with pytest.raises(nl.NetlinkError, match="runs past"):
        bad = bytearray(data[:length])
        struct.pack_into("=H", bad, nl.NLMSGHDR.size + nl.TCMSG.size, 0xFFF0)   # first rtattr's length
        nl.parse_qdisc(bytes(bad[nl.NLMSGHDR.size:]), {})


def test_a_device_the_link_dump_did_not_name_keeps_its_index():
    payload = nl.messages((FIX / "rtnetlink-qdisc-dump.bin").read_bytes())[0][1]
    assert nl.parse_qdisc(payload, {})["dev"].startswith("if")


def test_a_namespace_that_is_gone_is_a_clear_run_failure():
    """A node whose shell died has no namespace left to read: the run fails naming the node, no traceback."""
    from types import SimpleNamespace

    from runners.collect.counters import Counters
    from runners.errors import RunFailure

    dead = nl.QdiscReader(pid=2 ** 22 + 7)   # above pid_max: no such process
    host = SimpleNamespace(network=SimpleNamespace(qdisc_reader=lambda name: dead))
    with pytest.raises(RunFailure, match=r"h2: its qdisc counters could not be read over netlink"):
        Counters(host).qdiscs("h2")


def test_this_process_namespace_is_read_like_tc_reads_it():
    """The reader on a live namespace (this process's own: no root needed) gives what `tc -s -j` gives."""
    import os
    import shutil
    import subprocess

    if not shutil.which("tc"):
        pytest.skip("no tc here")
    reader = nl.QdiscReader(os.getpid())
    try:
        ours = reader.qdiscs()
    except OSError as e:   # setns needs CAP_SYS_ADMIN, even into one's own namespace
        pytest.skip(f"setns not allowed here: {e}")
    finally:
        reader.close()
    tc = json.loads(subprocess.run(["tc", "-j", "qdisc", "show"], capture_output=True, text=True).stdout or "[]")
    assert [(q["kind"], q["dev"], q["handle"]) for q in ours] == [(q["kind"], q["dev"], q["handle"]) for q in tc]


def test_an_interrupted_dump_or_one_that_failed_part_way_is_not_read_as_whole():
    done_failed = nl.NLMSGHDR.pack(20, nl.NLMSG_DONE, 0x2, 1, 0) + struct.pack("=i", -16)
    with pytest.raises(nl.NetlinkError) as e:
        nl.messages(done_failed)
    assert e.value.errno == 16
    assert nl.messages(nl.NLMSGHDR.pack(20, nl.NLMSG_DONE, 0x2, 1, 0) + struct.pack("=i", 0))[0][0] == nl.NLMSG_DONE
    interrupted = nl.NLMSGHDR.pack(16, nl.RTM_NEWQDISC, 0x2 | nl.NLM_F_DUMP_INTR, 1, 0)
    with pytest.raises(nl.DumpInterrupted):
        nl.messages(interrupted)


def test_an_interrupted_dump_is_made_again_once_and_a_closed_reader_reads_nothing():
    class Flaky(nl.QdiscReader):
        def __init__(self, fails):
            super().__init__(pid=0)
            self.fails, self.tries = fails, 0

        def _dump(self, kind, header):
            self.tries += 1
            if self.tries <= self.fails:
                raise nl.DumpInterrupted("changed")
            return []

    once = Flaky(fails=1)
    assert once.qdiscs() == [] and once.tries == 2
    twice = Flaky(fails=2)
    with pytest.raises(nl.DumpInterrupted):
        twice.qdiscs()
    once.close()
    with pytest.raises(nl.NetlinkError, match="closed"):
        once.qdiscs()
    assert once.tries == 2                     # nothing was asked of the kernel


def test_a_network_going_down_hands_out_no_new_reader():
    """A sampler thread that outlived its run must not open a namespace again (nothing would close it)."""
    from pathlib import Path

    from runners.pipeline.network import Network

    net = Network(Path("/nonexistent"), Path("/nonexistent"), log=lambda line: None)
    net._delete_links = lambda: None
    net.ovs.revive_for_teardown = lambda: None
    net.mininet = type("M", (), {"stop": lambda self: None})()
    net.stop()
    with pytest.raises(nl.NetlinkError, match="taken down"):
        net.qdisc_reader("h1")
    with pytest.raises(nl.NetlinkError, match="taken down"):
        net.nft_reader("h1")
