"""Which flow went up which uplink in a steered switched topology: the controller's report and OVS's
own flow counters, cleared before each run so a run's counters are its own."""
from __future__ import annotations

import json
import os
import re

from controller.decisions import STEER_COOKIE

from runners.errors import ControlPlaneError, ParseError
from runners.linux.nsexec import at_once
from runners.linux.openflow import BridgeChannel, OpenFlowError, mgmt_socket
from runners.linux.processes import run_command


def ofctl_dump_argv(switch: str, cookie: int) -> list[str]:
    return ["ovs-ofctl", "-O", "OpenFlow13", "--no-names", "dump-flows", switch, f"cookie={cookie:#x}/-1"]


def ofctl_clear_argv(switch: str, cookie: int) -> list[str]:
    return ["ovs-ofctl", "-O", "OpenFlow13", "del-flows", switch, f"cookie={cookie:#x}/-1"]


def ofctl(argv: list[str]) -> str:
    r = run_command(argv, timeout=20)
    if r.returncode != 0:
        raise ControlPlaneError(f"`{' '.join(argv)}` failed: {(r.stderr or r.stdout).strip()[:300]}")
    return r.stdout


def clear_steered_flows(bridge: str) -> None:
    """Delete a bridge's steered flows and return once it has; `ovs-ofctl` where its socket is elsewhere."""
    path = mgmt_socket(bridge)
    if not os.path.exists(path):   # an OVS built with another run directory: ovs-ofctl knows where
        ofctl(ofctl_clear_argv(bridge, STEER_COOKIE))
        return
    try:
        with BridgeChannel(path) as channel:
            channel.delete_flows(STEER_COOKIE)
    except (OSError, OpenFlowError) as e:
        raise ControlPlaneError(f"switch {bridge}: deleting its steered flows failed: {e}") from e


class Steering:
    """The steered switches of the runner's network (`host`, the RunContext: plan, controller, store)."""

    def __init__(self, host):
        self.host = host

    def steered_switches(self) -> list:
        cfg = self.host.plan.controller or {}
        return [w for w in self.host.plan.switches
                if w.controller and cfg.get("switches", {}).get(w.config_key, {}).get("uplinks")]

    def clear_flows(self) -> None:
        """Each run starts without steered flows, so its flow counters are its own. Over each bridge's own
        OpenFlow socket, without a process: one `ovs-ofctl` took 0.4-0.5 s in a TCG guest, before every run
        (lab 5, 2026-11-28)."""
        for w in self.steered_switches():
            clear_steered_flows(w.name)
        if self.host.controller is not None:
            self.host.controller.new_report_lines()   # skip what earlier runs reported

    def report(self, run_id: str) -> dict | None:
        """Which flow went up which uplink: the controller's report, and OVS's own flow counters."""
        switches = self.steered_switches()
        if not switches or self.host.controller is None:
            return None
        cfg = self.host.plan.controller
        decided = [e for e in self.host.controller.new_report_lines() if e.get("event") == "flow"]
        self.host.store.save_raw(run_id, "controller-flows.jsonl", "".join(json.dumps(e) + "\n" for e in decided))
        per_switch = {}
        texts = at_once(lambda w: ofctl(ofctl_dump_argv(w.name, STEER_COOKIE)), switches)   # every switch at once
        for w, text in zip(switches, texts):
            sc = cfg["switches"][w.config_key]
            names = dict(zip(sc["uplinks"], sc["uplink_names"]))
            self.host.store.save_raw(run_id, f"ofctl-flows-{w.name}.txt", text)
            flows = parse_ofctl_flows(text)
            uplinks = {n: {"bytes": 0, "packets": 0, "flows": 0} for n in sc["uplink_names"]}
            listed = []
            for f in flows:
                for port in f["outputs"]:
                    if port in names:
                        u = uplinks[names[port]]
                        u["bytes"] += f["n_bytes"]
                        u["packets"] += f["n_packets"]
                        u["flows"] += 1
                        listed.append({"src": f["src"], "sport": f["tp_src"], "dst": f["dst"], "dport": f["tp_dst"],
                                       "uplink": names[port], "bytes": f["n_bytes"], "packets": f["n_packets"]})
            per_switch[w.name] = {"uplinks": uplinks, "flows": listed}
        return {"by": cfg.get("by"), "switches": per_switch, "decisions": decided}


def parse_ofctl_flows(text: str) -> list[dict]:
    """`ovs-ofctl -O OpenFlow13 --no-names dump-flows` -> one dict per flow: match fields, counters, outputs."""
    flows = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("cookie="):
            continue
        head, _, actions = line.partition(" actions=")
        fields: dict = {}
        for tok in re.split(r"[,\s]+", head):
            if not tok:
                continue
            k, eq, v = tok.partition("=")
            fields[k] = v if eq else True
        try:
            flows.append({
                "cookie": int(str(fields.get("cookie", "0")), 16),
                "n_packets": int(fields.get("n_packets", 0)), "n_bytes": int(fields.get("n_bytes", 0)),
                "priority": int(fields.get("priority", 0)),
                "in_port": int(fields["in_port"]) if str(fields.get("in_port", "")).isdigit() else None,
                "src": fields.get("nw_src") or fields.get("ipv6_src"),
                "dst": fields.get("nw_dst") or fields.get("ipv6_dst"),
                "tp_src": int(fields["tp_src"]) if "tp_src" in fields else None,
                "tp_dst": int(fields["tp_dst"]) if "tp_dst" in fields else None,
                "outputs": [int(m) for m in re.findall(r"output:(\d+)", actions)],
            })
        except ValueError as e:
            raise ParseError(f"ovs-ofctl dump-flows: cannot read {line[:120]!r}: {e}") from None
    return flows
