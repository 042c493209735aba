"""The table of external programs (runners/backends/programs.py) and setup.sh agree, and missing programs are named."""
import re
from pathlib import Path

from runners.backends import programs as tools
from runners.backends.programs import Tool

REPO = Path(__file__).resolve().parents[2]


def setup_sh_packages() -> set[str]:
    """Every word inside setup.sh's pkgs=(...) and pkgs+=(...) lists (multi-line lists included)."""
    text = (REPO / "setup.sh").read_text()
    words = set()
    for body in re.findall(r"pkgs\+?=\(([^)]*)\)", text):
        words |= {w.strip('"') for w in body.split() if not w.startswith("#")}
    return words


def test_setup_sh_installs_every_package_the_backends_need():
    installed = setup_sh_packages()
    assert "busybox-static" in installed          # the fresh-machine failure this table exists for
    missing = sorted(tools.all_packages() - installed)
    assert not missing, f"setup.sh does not install {missing} (named in runners/backends/programs.py)"


def test_every_backend_need_is_covered():
    needs = {t.needed_for for t in tools.TOOLS}
    assert {"native", "mptcp", "nft-counters", "ovs", "vm"} <= needs
    vm = {t.program for t in tools.tools_for("vm")}
    assert {"qemu-system-x86_64", "busybox", "depmod"} <= vm


def test_a_missing_program_is_named_with_its_package(monkeypatch):
    monkeypatch.setattr(tools, "TOOLS", (Tool("no-such-program-xyz", "pkg-xyz", "for a test", "vm"),
                                         Tool("sh", "dash", "a shell", "vm")))
    msgs = tools.missing_tools("vm")
    assert len(msgs) == 1
    assert "no-such-program-xyz" in msgs[0] and "package pkg-xyz" in msgs[0] and "setup.sh" in msgs[0]


def test_the_controllers_module_is_looked_for_not_run_and_a_missing_one_is_named(monkeypatch):
    """os-ken runs in the controller's own process: the probe finds it without importing it (9 s of a
    switched run's preparation in a TCG guest)."""
    import sys
    monkeypatch.delitem(sys.modules, "os_ken.base.app_manager", raising=False)
    assert tools.missing_python_modules("controller") == []
    assert "os_ken.base.app_manager" not in sys.modules
    monkeypatch.setattr(tools, "PYTHON_MODULES", {
        "no_such_pkg_xyz.app": ("python3-xyz", "runs apps", "controller"),
        "os_ken.no_such_module": ("python3-os-ken", "runs apps", "controller")})
    msgs = tools.missing_python_modules("controller")
    assert len(msgs) == 2 and "no_such_pkg_xyz" in msgs[0] and "package python3-xyz" in msgs[0], msgs


def test_vm_backend_reports_every_missing_piece_before_booting(monkeypatch):
    from runners.backends.vm import boot as vm

    monkeypatch.setattr(tools, "TOOLS", (Tool("no-busybox-here", "busybox-static", "initramfs", "vm"),
                                         Tool("no-qemu-here", "qemu-system-x86", "the VM", "vm")))
    monkeypatch.setattr(vm, "missing_tools", tools.missing_tools)
    try:
        vm.plan_vm(["true"], [])
    except vm.VmError as e:
        text = str(e)
    else:
        raise AssertionError("plan_vm did not refuse")
    assert "busybox-static" in text and "qemu-system-x86" in text


def fake_iperf3(folder: Path, version: str, mptcp_line: str) -> Path:
    """An iperf3 that answers --version and --help only. `mptcp_line` stands for the option line that
    iperf3 3.19 and later print when built with MPTCP (Ubuntu 26.04's 3.20); 3.12 (Debian 12) and 3.18
    (Debian 13) print none."""
    path = folder / f"iperf3-{version}"
    path.write_text("#!/bin/sh\n"
                    f"[ \"$1\" = --version ] && {{ echo 'iperf {version} (cJSON 1.7.15)'; exit 0; }}\n"
                    "echo 'Usage: iperf3 [-s|-c host] [options]'\n"
                    "echo '  -p, --port      #         server port to listen on/connect to'\n"
                    + (f"echo '{mptcp_line}'\n" if mptcp_line else "")
                    + "exit 1\n")
    path.chmod(0o755)
    return path


def test_the_probe_prefers_iperf3s_own_mptcp_over_mptcpize(tmp_path):
    """iperf3 with --mptcp (3.19+, e.g. Ubuntu 26.04's 3.20) runs MPTCP itself: no mptcpize needed or used."""
    from runners.backends import probe
    from runners.traffic.iperf3 import Iperf, iperf_server_argv

    native = probe.iperf3_facts(str(fake_iperf3(tmp_path, "3.20", "  -m, --mptcp               use MPTCP")))
    assert native["iperf3_version"] == "3.20" and native["iperf3_native_mptcp"] is True
    older = probe.iperf3_facts(str(fake_iperf3(tmp_path, "3.18", "")))
    assert older["iperf3_version"] == "3.18" and older["iperf3_native_mptcp"] is False
    assert iperf_server_argv(Iperf(native_mptcp=native["iperf3_native_mptcp"]), 5201, True)[:2] == ["iperf3", "--mptcp"]
    assert iperf_server_argv(Iperf(native_mptcp=older["iperf3_native_mptcp"]), 5201, True)[:2] == ["mptcpize", "run"]
