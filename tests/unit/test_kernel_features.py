"""The per-kernel MPTCP inventory's pure parts, on sysctl folders laid out as each kernel has them."""
from pathlib import Path

from runners.backends import kernel_features as kf


def folder(tmp_path: Path, files: dict[str, str]) -> Path:
    d = tmp_path / "mptcp"
    d.mkdir()
    for name, text in files.items():
        (d / name).write_text(text)
    return d


def test_a_6_1_kernel_has_one_scheduler_and_both_path_managers(tmp_path):
    d = folder(tmp_path, {"enabled": "1\n", "pm_type": "0\n", "add_addr_timeout": "120\n"})
    assert kf.schedulers(d) == ["default"]
    assert kf.path_managers(d) == ["kernel", "userspace"]
    assert kf.sysctl_names(d) == ["add_addr_timeout", "enabled", "pm_type"]


def test_newer_kernels_list_schedulers_and_path_managers_by_name(tmp_path):
    d = folder(tmp_path, {"available_schedulers": "default bpf_rr\n", "available_path_managers": "kernel userspace\n",
                          "pm_type": "0\n"})
    assert kf.schedulers(d) == ["default", "bpf_rr"]
    assert kf.path_managers(d) == ["kernel", "userspace"]


def test_before_pm_type_only_the_in_kernel_path_manager(tmp_path):
    assert kf.path_managers(folder(tmp_path, {"enabled": "1\n"})) == ["kernel"]
    assert kf.sysctl_names(tmp_path / "absent") == []


def test_each_flag_is_tried_on_its_own_address():
    batch = kf.setup_batch(len(kf.ENDPOINT_FLAG_PROBES)).splitlines()
    addresses = [line.split()[2] for line in batch if line.startswith("addr add")]
    assert len(addresses) == len(set(addresses)) == len(kf.ENDPOINT_FLAG_PROBES)
    argvs = [kf.endpoint_argv("ns", i, flags) for i, flags in enumerate(kf.ENDPOINT_FLAG_PROBES.values())]
    used = [a[6] for a in argvs]
    assert [a + "/24" for a in used] == addresses
    assert all(a[:6] == ["ip", "-n", "ns", "mptcp", "endpoint", "add"] and a[7:9] == ["dev", "p0"] for a in argvs)
    assert kf.ENDPOINT_FLAG_PROBES["port"] == ("signal", "port", "5300")


def test_the_native_probe_refuses_endpoints_from_the_same_answers_metadata_records(monkeypatch):
    """One throwaway namespace answers both: what metadata records, and what a scenario needs."""
    import pytest
    from runners.backends import probe
    from scenarios.spec.loader import load_scenario

    if not probe.PROC.joinpath("net/mptcp/enabled").exists():
        pytest.skip("this kernel has no MPTCP: the probe stops before endpoints")
    monkeypatch.setattr(probe.os, "geteuid", lambda: 0)
    answers = {name: (True, "") for name in kf.ENDPOINT_FLAG_PROBES}
    answers["port"] = (False, "Error: invalid flag.")
    monkeypatch.setattr(kf, "endpoint_answers", lambda: answers)
    scenario = load_scenario(Path(__file__).resolve().parents[2] / "labs" / "lab5-steering.yaml")
    rep = probe._probe(scenario, (True, ""), {"iperf3": "/usr/bin/iperf3", "iperf3_version": "3.12",
                                               "iperf3_native_mptcp": False})
    refused = [m for m in rep.missing if "endpoint" in m]
    assert refused == ["signal endpoints with a port (mptcp.signal_ports): this kernel refuses "
                       "`ip mptcp endpoint add ... signal port 5300` (Error: invalid flag.)"]
    assert rep.facts["mptcp_features"]["endpoint_flags"]["port"] is False


def test_the_probe_names_mptcp_sysctls_the_kernel_lacks_before_anything_starts(tmp_path, monkeypatch):
    """A 6.1 kernel has no net.mptcp.blackhole_timeout (6.12 does): the probe says so, naming the key, the
    kernel and what it has, instead of the run failing once its network is built."""
    from runners.backends import probe
    from scenarios.spec.loader import parse_scenario

    mptcp = tmp_path / "net" / "mptcp"
    mptcp.mkdir(parents=True)
    for name in ("enabled", "stale_loss_cnt", "close_timeout"):
        (mptcp / name).write_text("1\n")
    monkeypatch.setattr(probe, "PROC", tmp_path)
    text = ("name: t\ntopology:\n  kind: dual-homed\n  paths: [{name: A, bw: 10}, {name: B, bw: 10}]\ntraffic: {duration: 5}\n"
            "mptcp: {sysctls: %s}\n")
    assert probe.missing_mptcp_sysctls(parse_scenario(text % "{stale_loss_cnt: 2, close_timeout: 10s}")) == []
    (msg,) = probe.missing_mptcp_sysctls(parse_scenario(text % "{stale_loss_cnt: 2, blackhole_timeout: 0s}"))
    assert msg.startswith("mptcp.sysctls blackhole_timeout: this kernel (") and \
        "has no net.mptcp.blackhole_timeout (it has: close_timeout enabled stale_loss_cnt)" in msg, msg
    (mptcp / "enabled").unlink()      # no MPTCP at all: said once elsewhere, not once per key
    assert probe.missing_mptcp_sysctls(parse_scenario(text % "{blackhole_timeout: 0s}")) == []
