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
