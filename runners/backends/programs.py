"""Every external program a backend runs, and the Debian/Ubuntu package that provides it.

One table, so that the probes, the error messages and setup.sh agree: a
missing program is named with the package to install before anything
starts, and a unit test checks that setup.sh installs every package named
here (a fresh machine once failed at boot because busybox was missing).
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Tool:
    program: str          # a name looked up on PATH, or an absolute path
    package: str          # the Debian/Ubuntu package that installs it
    why: str              # what the testbed uses it for (shown when it is missing)
    needed_for: str       # "native", "mptcp", "nft-counters", "ovs", "capture", "vm" or "tests"

    def found(self) -> str | None:
        if os.path.isabs(self.program):
            return self.program if os.access(self.program, os.X_OK) else None
        return shutil.which(self.program)

    def missing_message(self) -> str:
        return f"`{self.program}` is not installed (package {self.package}; run ./setup.sh): {self.why}"


TOOLS: tuple[Tool, ...] = (
    # native backend: any scenario
    Tool("ip", "iproute2", "addresses, routes, MPTCP endpoints", "native"),
    Tool("tc", "iproute2", "netem shaping and its read-back", "native"),
    Tool("ss", "iproute2", "MPTCP subflows of a connection", "native"),
    Tool("nstat", "iproute2", "TCP and MPTCP counters (OFO, retransmissions, joins)", "native"),
    Tool("ping", "iputils-ping", "per-path RTT before each run", "native"),
    Tool("ethtool", "ethtool", "segmentation offloads off on shaped links", "native"),
    Tool("sysctl", "procps", "MPTCP and socket-buffer settings in the hosts' namespaces", "native"),
    Tool("modprobe", "kmod", "loading congestion-control, bridge and tun modules", "native"),
    Tool("mnexec", "mininet", "Mininet's namespace helper", "native"),
    Tool("iperf3", "iperf3", "the traffic generator", "native"),
    # MPTCP runs with an iperf3 without --mptcp (Debian 12's 3.12)
    Tool("mptcpize", "mptcpize", "runs iperf3 over MPTCP when it has no --mptcp", "mptcp"),
    # plans whose byte_counters is "nft" (routed, switched) count bytes per path with nftables
    Tool("nft", "nftables", "per-path byte counters", "nft-counters"),
    # Open vSwitch (switch types ovs and ovs-user; plain bridges need none of it)
    Tool("ovs-vsctl", "openvswitch-switch", "Open vSwitch bridges", "ovs"),
    Tool("ovs-ofctl", "openvswitch-switch", "OpenFlow rules and flow counters", "ovs"),
    Tool("ovs-vswitchd", "openvswitch-switch", "the Open vSwitch daemon", "ovs"),
    Tool("ovsdb-server", "openvswitch-switch", "the Open vSwitch database", "ovs"),
    Tool("/usr/share/openvswitch/scripts/ovs-ctl", "openvswitch-switch", "starts and stops Open vSwitch",
         "ovs"),
    # --capture: one pcap per interface, and each run's subflows read from them
    Tool("tcpdump", "tcpdump", "packet capture (--capture)", "capture"),
    Tool("tshark", "tshark", "subflows-pcap.csv from the captures (--capture)", "capture"),
    # the test suite opens report.html in a headless browser, as a person would see it
    Tool("chromium", "chromium", "the test suite's check of report.html", "tests"),
    Tool("tmux", "tmux", "the test suite's check of `run-scenario shell` in a real terminal", "tests"),
    Tool("script", "util-linux", "a pty for `run-scenario shell` in the micro-VM", "vm"),
    Tool("setpriv", "util-linux", "the micro-VM's processes die with the run that started them", "vm"),
    # VM backend: what run-scenario and virtme-ng call on the host
    Tool("qemu-system-x86_64", "qemu-system-x86", "runs the micro-VM", "vm"),
    Tool("busybox", "busybox-static", "virtme-ng builds the guest's initramfs with it", "vm"),
    Tool("depmod", "kmod", "virtme-ng indexes the guest kernel's modules", "vm"),
    Tool("/bin/sh", "dash", "runs the guest's command script", "vm"),
    Tool("file", "file", "virtme-ng reads the kernel image's version and checks busybox with it", "vm"),
    Tool("strings", "binutils", "virtme-ng's fallback for the kernel image's version", "vm"),
)

# Python packages that come from the distribution (the venv sees them through --system-site-packages).
PYTHON_MODULES: dict[str, tuple[str, str, str]] = {
    # module: (package, why, needed_for)
    "mininet.net": ("mininet", "builds the network", "native"),
    "os_ken.base.app_manager": ("python3-os-ken", "runs the OpenFlow controller apps", "controller"),
}

# The guest kernel: a distribution kernel image in /boot.
KERNEL_PACKAGE = {"debian": "linux-image-amd64", "ubuntu": "linux-image-generic"}


def tools_for(*needs: str) -> list[Tool]:
    """The tools needed for these purposes, each program once."""
    seen, out = set(), []
    for t in TOOLS:
        if t.needed_for in needs and t.program not in seen:
            seen.add(t.program)
            out.append(t)
    return out


def missing_tools(*needs: str) -> list[str]:
    """One message per missing program, naming its package."""
    return [t.missing_message() for t in tools_for(*needs) if t.found() is None]


# The needs whose modules run in a process of their own (the controller's): the probe looks for their
# modules (importing only the parent packages, as find_spec does) but does not import them. Importing
# os-ken here took 9 s of a switched run's preparation in a TCG guest (2026-11-27), in a process that
# never uses it; an os-ken that is there but cannot import stops the controller at its start, whose
# error quotes its log.
NEEDS_LOOKED_FOR_ONLY = {"controller"}


def missing_python_modules(*needs: str) -> list[str]:
    import importlib
    import importlib.util

    out = []
    for module, (package, why, need) in PYTHON_MODULES.items():
        if need not in needs:
            continue
        try:
            if need in NEEDS_LOOKED_FOR_ONLY:
                if importlib.util.find_spec(module) is None:
                    raise ImportError(module)
            else:
                importlib.import_module(module)
        except ImportError:
            out.append(f"the Python module {module.split('.')[0]} is not importable (package {package}; "
                       f"run ./setup.sh): {why}")
    return out


def all_packages() -> set[str]:
    """Every distribution package named above (the guest kernel's is distribution-specific)."""
    return ({t.package for t in TOOLS} | {p for p, _, _ in PYTHON_MODULES.values()}
            | set(KERNEL_PACKAGE.values()))


def kernels_installed(boot: Path = Path("/boot")) -> bool:
    return any(p.is_file() for p in boot.glob("vmlinuz-*"))
