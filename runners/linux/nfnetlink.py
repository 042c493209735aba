"""The per-path byte counters (nftables' table inet mptb) over netlink: no `nft` process started.

A run with per-path nft counters (routed and switched topologies, where interface counters cannot tell
paths apart) read them with `nft -j list table inet mptb`: 0.27-0.69 s of a TCG guest's CPU per call
(lab 5, 2026-11-28). The per-path sampler made one such call per receiving host per sample, beside the
traffic it measured, so that its samples came every 1.4 s instead of every 0.1 s, and the run's own
CPU went to `nft`. Here a NETLINK_NETFILTER socket, made once inside the namespace
(runners.linux.rtnetlink.NamespaceDumps), dumps the table's rules, and their counters and comments are
read from the answer.

The parsing (`parse_rule`, `counters_by_path`) is pure and tested on recorded bytes; `NftCounterReader`
touches the kernel.
"""
from __future__ import annotations

import struct

from runners.linux.rtnetlink import RTATTR, NamespaceDumps, NetlinkError, attribute_records, attributes

NFNL_SUBSYS_NFTABLES = 10
NFT_MSG_NEWRULE, NFT_MSG_GETRULE = 6, 7
NEWRULE = (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWRULE
GETRULE = (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETRULE
NFPROTO_INET = 1
NETLINK_NETFILTER = 12
NFGENMSG = struct.Struct("=BBH")        # family, version, resource id (big-endian; 0 here)
NFTA_RULE_TABLE, NFTA_RULE_CHAIN, NFTA_RULE_EXPRESSIONS, NFTA_RULE_USERDATA = 1, 2, 4, 7
NFTA_LIST_ELEM = 1
NFTA_EXPR_NAME, NFTA_EXPR_DATA = 1, 2
NFTA_COUNTER_BYTES, NFTA_COUNTER_PACKETS = 1, 2
UDATA_RULE_COMMENT = 0                  # libnftnl's NFTNL_UDATA_RULE_COMMENT: a rule's `comment "..."`
BE64 = struct.Struct(">Q")


def _string(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode()


def rule_dump_header(table: str, family: int = NFPROTO_INET) -> bytes:
    """What follows the netlink header in a dump request for one table's rules (the kernel filters)."""
    name = table.encode() + b"\0"
    attr = RTATTR.pack(RTATTR.size + len(name), NFTA_RULE_TABLE) + name
    return NFGENMSG.pack(family, 0, 0) + attr + b"\0" * (-len(attr) % 4)


def comment_of(userdata: bytes) -> str | None:
    """A rule's comment from its user data (type-length-value records of one byte each), if it has one."""
    offset = 0
    while offset + 2 <= len(userdata):
        kind, length = userdata[offset], userdata[offset + 1]
        if kind == UDATA_RULE_COMMENT:
            return _string(userdata[offset + 2:offset + 2 + length])
        offset += 2 + length
    return None


def parse_rule(payload: bytes) -> dict | None:
    """An NFT_MSG_NEWRULE payload -> {chain, comment, bytes, packets}, or None for a rule without a counter."""
    attrs = attributes(payload, NFGENMSG.size)
    counter = None
    for _, elem in attribute_records(attrs.get(NFTA_RULE_EXPRESSIONS, b"")):   # NFTA_LIST_ELEM, in order
        expr = attributes(elem)
        if _string(expr.get(NFTA_EXPR_NAME, b"")) == "counter":   # the first, as the nft listing's reader took
            data = attributes(expr.get(NFTA_EXPR_DATA, b""))
            counter = (BE64.unpack(data[NFTA_COUNTER_BYTES])[0], BE64.unpack(data[NFTA_COUNTER_PACKETS])[0])
            break
    if counter is None:
        return None
    return {"chain": _string(attrs.get(NFTA_RULE_CHAIN, b"")),
            "comment": comment_of(attrs.get(NFTA_RULE_USERDATA, b"")), "bytes": counter[0], "packets": counter[1]}


def counters_by_path(rules: list[dict]) -> dict[str, dict[str, int]]:
    """Counted rules -> {path (the rule's comment): {in_bytes, in_packets, out_bytes, out_packets}}: what
    `nft -j list table inet mptb` shows for the same table, summed by comment and chain."""
    out: dict[str, dict[str, int]] = {}
    for rule in rules:
        if rule["comment"] is None:
            continue
        d = out.setdefault(rule["comment"], {"in_bytes": 0, "in_packets": 0, "out_bytes": 0, "out_packets": 0})
        d[f"{rule['chain']}_bytes"] += rule["bytes"]
        d[f"{rule['chain']}_packets"] += rule["packets"]
    return out


class NftCounterReader(NamespaceDumps):
    """The counted rules of one nftables table (family inet) in one namespace."""

    def __init__(self, pid: int, table: str, timeout: float = 5.0):
        super().__init__(pid, NETLINK_NETFILTER, timeout)
        self.table = table

    def rules(self) -> list[dict]:
        with self.lock:
            found = self.dump(GETRULE, rule_dump_header(self.table))
        return [r for r in (parse_rule(p) for kind, p in found if kind == NEWRULE) if r is not None]

    def by_path(self) -> dict[str, dict[str, int]]:
        """The table's counters by path; NetlinkError when it has no counted rule: the kernel filters the
        dump by table, so a table that is gone answers with nothing, not with an error."""
        rules = self.rules()
        if not rules:
            raise NetlinkError(f"no counted rules in table inet {self.table}")
        return counters_by_path(rules)

