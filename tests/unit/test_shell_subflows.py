"""The shell's `subflows` command on recorded `ss` output: one block per MPTCP connection, each subflow's
addresses, bytes, RTT and cwnd, and with `ss -m` the send buffers lab 4 asks students to watch."""
from pathlib import Path

from runners.pipeline.shell import grouped_subflows
from runners.linux import ss

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def test_subflows_show_cwnd_and_the_send_buffers_of_subflow_and_connection():
    # recorded: iperf3 under mptcpize over loopback in a namespace, `ss -tinMOm`, kernel 6.18
    text = (FIX / "ss-subflows-skmem.txt").read_text()
    sockets = ss.parse_ss_mptcp_sockets(text)
    subflows = ss.parse_ss_subflows(text, windows=True)
    assert "cwnd" not in ss.parse_ss_subflows(text)[0]     # a run's records keep their fields
    assert len(sockets) == 4 and len(subflows) == 4
    assert {s["token"] for s in subflows} == set(sockets)      # each subflow's connection is listed
    data = max(subflows, key=lambda s: s.get("bytes_sent", 0))
    assert data["bytes_sent"] == 9437221 and data["cwnd"] == 12 and data["sndbuf_bytes"] == 3939840
    assert sockets[data["token"]]["sndbuf_bytes"] == 3943936
    shown = grouped_subflows(text)
    assert f"connection token {data['token']}: 1 subflow(s); send buffer 3943936 B (0 B queued)" in shown
    assert "sent 9437221 B, received 0 B, rtt 0.105 ms, cwnd 12, send buffer 3939840 B (0 B queued)" in shown


def test_without_socket_memory_the_lines_stay_as_they_were():
    shown = grouped_subflows((FIX / "ss-subflows.txt").read_text())
    assert "send buffer" not in shown and "cwnd 139" in shown


def test_only_the_shell_asks_ss_for_socket_memory():
    assert "-m" in ss.ss_argv(memory=True) and "-m" not in ss.ss_argv()
