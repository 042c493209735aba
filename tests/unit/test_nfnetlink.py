"""Per-path nft counters over netlink (runners.linux.nfnetlink), parsed from a recorded dump.

The fixtures were recorded together in one namespace (2026-11-28, kernel 6.18, nftables
1.0.6): table inet mptb as runners.collect.counters.nft_counter_argvs makes it (an IPv4 path "A" and an
IPv6 path "v6 path", a counted rule per direction) plus a rule without a counter, after pings on both;
then `nft -j list table inet mptb` and the netlink dump of the table's rules. The dump must give nft's
counters for every path.
"""
import json
import struct
from pathlib import Path

from runners.linux import nfnetlink as nf, rtnetlink as nl

FIX = Path(__file__).resolve().parent.parent / "fixtures"


def dumped() -> list[tuple[int, bytes]]:
    return nl.messages((FIX / "nfnetlink-rule-dump.bin").read_bytes())


def nft_json_counters() -> dict:
    """What `nft -j` said, per comment and chain: the reference."""
    out: dict = {}
    for item in json.loads((FIX / "nfnetlink-nft-j.json").read_text())["nftables"]:
        rule = item.get("rule") or {}
        counter = next((e["counter"] for e in rule.get("expr", []) if "counter" in e), None)
        if counter is None or "comment" not in rule:
            continue
        d = out.setdefault(rule["comment"], {"in_bytes": 0, "in_packets": 0, "out_bytes": 0, "out_packets": 0})
        d[f"{rule['chain']}_bytes"] += counter["bytes"]
        d[f"{rule['chain']}_packets"] += counter["packets"]
    return out


def test_the_dump_gives_nfts_counters_for_every_path():
    rules = [nf.parse_rule(p) for kind, p in dumped() if kind == nf.NEWRULE]
    assert len(rules) == 5 and rules.count(None) == 1          # the drop rule counts nothing
    ours = nf.counters_by_path([r for r in rules if r is not None])
    assert ours == nft_json_counters()
    assert ours["A"]["in_packets"] == 3 and ours["v6 path"]["out_packets"] == 5   # the pings, really counted


def test_the_request_names_the_table_for_the_kernel_to_filter():
    header = nf.rule_dump_header("mptb")
    assert nf.NFGENMSG.unpack_from(header) == (nf.NFPROTO_INET, 0, 0) and len(header) % 4 == 0
    assert nl.attributes(header, nf.NFGENMSG.size) == {nf.NFTA_RULE_TABLE: b"mptb\0"}


def test_a_comment_is_read_from_the_rules_user_data_among_other_records():
    assert nf.comment_of(bytes([7, 2, 1, 2, 0, 3]) + b"A\0\0") == "A"
    assert nf.comment_of(bytes([7, 1, 9])) is None and nf.comment_of(b"") is None


class RecordedNftReader(nf.NftCounterReader):
    def __init__(self, found):
        super().__init__(pid=0, table="mptb")
        self.found = found

    def dump(self, kind, header):
        assert kind == nf.GETRULE and header == nf.rule_dump_header("mptb")
        return self.found


def test_the_reader_gives_counters_by_path_and_refuses_a_table_without_counted_rules():
    import pytest

    assert RecordedNftReader(dumped()).by_path() == nft_json_counters()
    with pytest.raises(nl.NetlinkError, match="no counted rules in table inet mptb"):
        RecordedNftReader([]).by_path()     # the kernel's filter: a table that is gone dumps nothing


def test_a_truncated_rule_is_refused_not_misread():
    import pytest

    payload = next(p for kind, p in dumped() if kind == nf.NEWRULE)
    bad = bytearray(payload)
    struct.pack_into("=H", bad, nf.NFGENMSG.size, 0xFFF0)      # the first attribute's length
    with pytest.raises(nl.NetlinkError, match="runs past"):
        nf.parse_rule(bytes(bad))


def test_a_path_without_counted_rules_fails_the_read_instead_of_reading_zero():
    import pytest
    from types import SimpleNamespace

    from runners.collect.counters import Counters
    from runners.errors import RunFailure

    reader = RecordedNftReader(dumped())
    host = SimpleNamespace(network=SimpleNamespace(nft_reader=lambda name: reader),
                           plan=SimpleNamespace(paths=[SimpleNamespace(name="A"), SimpleNamespace(name="v6 path")]))
    assert Counters(host).nft_counters(SimpleNamespace(name="h1")) == nft_json_counters()
    host.plan.paths.append(SimpleNamespace(name="B"))
    with pytest.raises(RunFailure, match=r"h1: its nft table has no counted rule for path\(s\) B \(it has A, v6 path\)"):
        Counters(host).nft_counters(SimpleNamespace(name="h1"))
