"""--capture on a real run: a pcap per client interface from before the handshake to after the last
byte, and subflows-pcap.csv that agrees with the subflow samples (the subflow count) and the per-path counters (each
path's share of the bytes) of the same run. A TCP baseline's table is checked on a recorded one
(tests/unit/test_capture.py): a second captured run here cost 23 s in the TCG micro-VM."""
import csv
import json
import subprocess

import pytest

from runners.collect.capture import incomplete as capture_incomplete

from .helpers import leftovers, run_cli, write_scenario

pytestmark = pytest.mark.integration

SHORT = """\
name: capture
topology:
  kind: dual-homed
  paths:
    - {name: A, bw: 8, delay: 5ms}
    - {name: B, bw: 4, delay: 5ms}
traffic: {duration: 5}
runs: {compare: [mptcp], pause: 200ms}
"""


def test_capture_gives_pcaps_and_a_subflow_table_that_agrees_with_the_samples_and_counters(tmp_path):
    scen = write_scenario(tmp_path / "c.yaml", SHORT)
    r = run_cli(str(scen), "--backend", "native", "--capture", "client", "--out", str(tmp_path / "o"))
    assert r.returncode == 0, r.stdout + r.stderr
    d = next((tmp_path / "o" / "capture").glob("2*"))
    meta = json.loads((d / "metadata.json").read_text())
    assert meta["capture"] == {"roles": ["client"], "snaplen": 128}
    runs = {x["mode"]: x for x in json.loads((d / "results.json").read_text())["runs"]}

    mptcp = runs["mptcp"]
    files = {f["file"]: f for f in mptcp["capture"]["files"]}
    assert set(files) == {"pcap/h1-h1-eth0.pcap", "pcap/h1-h1-eth1.pcap"}
    # every tcpdump ran until the drain found it caught up (received_after_drain: what the kernel passed it
    # after that); complete: nothing dropped, nothing else unwritten
    assert all("received_after_drain" in f and f["packets"] > 100 and not capture_incomplete(f)
               for f in files.values()), files
    raw = d / "raw" / mptcp["id"]
    # headers only: no captured frame is longer than the snaplen
    lens = subprocess.run(["tshark", "-r", str(raw / "pcap" / "h1-h1-eth0.pcap"), "-T", "fields", "-e",
                           "frame.cap_len"], capture_output=True, text=True).stdout.split()
    assert lens and max(map(int, lens)) <= 128

    rows = list(csv.DictReader((raw / "subflows-pcap.csv").open()))
    by_conn: dict[str, list] = {}
    for row in rows:
        by_conn.setdefault(row["connection"], []).append(row)
    def payload(x):
        return int(x["bytes_server_to_client"]) + int(x["bytes_client_to_server"])
    data = max(by_conn.values(), key=lambda rs: sum(payload(x) for x in rs))
    assert len(data) == mptcp["metrics"]["subflows"] == 2                   # what the subflow samples saw
    # the samples (sock_diag) name the same subflows as the capture: its client ports, each with a window
    samples = json.loads((raw / "subflows.json").read_text())
    seen = {s["local_port"]: s for sample in samples for s in sample["subflows"]}
    assert samples and all(sample["t"] > 0 for sample in samples), samples
    assert all(int(x["client_port"]) in seen and seen[int(x["client_port"])]["snd_wnd"] > 0 for x in data), (data, seen)
    assert sorted(x["kind"] for x in data) == ["MP_CAPABLE", "MP_JOIN"]       # the handshake was captured
    assert {x["path"] for x in data} == {"A", "B"}
    total = sum(payload(x) for x in data)
    for x in data:
        share = payload(x) / total
        assert abs(share - mptcp["paths"][x["path"]]["share"]) < 0.03, (x, mptcp["paths"])

    assert "tcpdump" not in subprocess.run(["ps", "-eo", "comm"], capture_output=True, text=True).stdout
    assert leftovers() == []
