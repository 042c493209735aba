"""Probe whether this kernel and userland can run a scenario natively.

Features are detected by trying them (a netem qdisc in a throwaway
namespace, the MPTCP sysctl, the congestion control list), not by version
strings, and every missing piece is reported at once.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from scenarios.spec.kernel import satisfies
from scenarios.spec.model import Scenario
from topologies.kinds import rate_changing_links
from topologies.plan import Shaping, shaping_argvs

from runners.backends import kernel_features
from runners.backends.probe_cache import remembered
from runners.backends.programs import missing_python_modules, missing_tools
from runners.linux import procfs
from runners.linux.netns import throwaway_netns
from runners.linux.processes import run_command

PROC = Path("/proc/sys")


@dataclass
class ProbeReport:
    missing: list[str] = field(default_factory=list)
    facts: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.missing

    def render(self) -> str:
        return "this machine cannot run the scenario natively:\n" + "\n".join(f"  - {m}" for m in self.missing)


def _run(argv: list[str], timeout: float = 20) -> subprocess.CompletedProcess:
    return run_command(argv, timeout)


@remembered
def iperf3_facts(binary: str = "iperf3") -> dict:
    path = shutil.which(binary)
    if not path:
        return {"iperf3": None}
    ver = _run([path, "--version"]).stdout
    m = re.search(r"iperf (\d+\.\d+(?:\.\d+)?)", ver)
    helped = _run([path, "--help"])
    helptext = helped.stdout + helped.stderr
    return {"iperf3": path, "iperf3_version": m.group(1) if m else ver.strip()[:40],
            "iperf3_native_mptcp": "--mptcp" in helptext}


@remembered   # a kernel's answer: the warm VM asks once for all jobs; a cold VM's host keeps it (probe_cache)
def netem_works(under_tbf: bool = False) -> tuple[bool, str]:
    """Install a netem qdisc on a veth in a throwaway namespace, then remove it all. `under_tbf`: netem in
    the class of a TBF at the root, as a path whose rate changes during a run is shaped
    (topologies.plan.Shaping)."""
    ns = f"mptb-probe-{os.getpid()}"
    with throwaway_netns(ns, lambda argv, timeout: _run(argv, timeout)) as r:
        if r.returncode != 0:
            return False, f"cannot create a network namespace: {r.stderr.strip()}"
        for argv in (["ip", "-n", ns, "link", "add", "p0", "type", "veth", "peer", "name", "p1"],
                     ["ip", "-n", ns, "link", "set", "p0", "up"]):
            r = _run(argv)
            if r.returncode != 0:
                return False, f"`{' '.join(argv)}` failed: {r.stderr.strip()}"
        # the commands a run shapes with (topologies.plan.shaping_argvs), in the throwaway namespace
        shaping = Shaping(rate_mbit=1, delay_ms=1, loss_pct=1, limit_pkts=10, rate_at_dequeue=under_tbf)
        for argv in shaping_argvs("p0", shaping):
            r = _run([argv[0], "-n", ns, *argv[1:]])
            if r.returncode != 0:
                return False, (r.stderr.strip() or "tc failed")
        return True, ""


@remembered
def kernel_debug() -> list[str] | None:
    """The running kernel's debug options (kmemleak, lockdep, KASAN), from its configuration or by their
    symbols in /proc/kallsyms as the upstream MPTCP selftests find them; None when neither can be read.
    Recorded once per set (metadata's probe) and a `warn` in every run's fidelity (runners.results.fidelity).
    Memoised: the kernel does not change under a process (the warm VM's guest asks once for every job)."""
    try:
        return procfs.kernel_debug_options()
    except OSError:
        return None


def available_congestion() -> list[str]:
    try:
        return (PROC / "net/ipv4/tcp_available_congestion_control").read_text().split()
    except OSError:
        return []


def openvswitch_module() -> bool:
    """Probe: is the openvswitch datapath module there, or loadable?"""
    if Path("/sys/module/openvswitch").exists():
        return True
    if os.geteuid() == 0 and shutil.which("modprobe"):
        _run(["modprobe", "-q", "openvswitch"])
    return Path("/sys/module/openvswitch").exists()


def _counts_with_nft(scenario: Scenario) -> bool:
    """The plan says how per-path bytes are counted (a plan that cannot be laid out is reported elsewhere)."""
    from topologies.kinds import plan
    from topologies.plan import PlanError
    try:
        return plan(scenario).byte_counters == "nft"
    except PlanError:
        return False


def _can_ask_mptcp() -> bool:
    """Root on a kernel with MPTCP: what asking it about endpoint flags needs."""
    return os.geteuid() == 0 and (PROC / "net/mptcp/enabled").exists()


def missing_mptcp_sysctls(scenario: Scenario) -> list[str]:
    """`mptcp.sysctls` keys this kernel lacks (blackhole_timeout came with 6.12), found before anything
    starts; nothing when the kernel has no MPTCP at all (said once, above)."""
    if not (PROC / "net/mptcp/enabled").exists():
        return []
    lacking = [k for k in sorted(scenario.mptcp.sysctls.values()) if not (PROC / "net/mptcp" / k).exists()]
    if not lacking:
        return []
    have = sorted(p.name for p in (PROC / "net/mptcp").iterdir())
    return [f"mptcp.sysctls {', '.join(lacking)}: this kernel ({os.uname().release}) has no "
            f"{', '.join('net.mptcp.' + k for k in lacking)} (it has: {' '.join(have)})"]


def probe(scenario: Scenario) -> ProbeReport:
    # the probes that start processes run side by side: each start is 0.1-0.2 s in a TCG guest. The
    # endpoint flags' answers are cached (kernel_features) for _probe's checks and metadata's inventory.
    can_netem = os.geteuid() == 0 and shutil.which("tc") and shutil.which("ip")
    can_endpoints = _can_ask_mptcp() and shutil.which("ip")
    with ThreadPoolExecutor(max_workers=4) as pool:
        netem_answer = pool.submit(netem_works, bool(rate_changing_links(scenario))) if can_netem else None
        iperf3_answer = pool.submit(iperf3_facts)
        debug_answer = pool.submit(kernel_debug)
        if can_endpoints:
            pool.submit(kernel_features.endpoint_answers).result()
        rep = _probe(scenario, netem_answer.result() if netem_answer else None, iperf3_answer.result())
        rep.facts["kernel_debug"] = debug_answer.result()
        return rep


def _probe(scenario: Scenario, netem: tuple[bool, str] | None, iperf3: dict) -> ProbeReport:
    rep = ProbeReport()
    rep.facts["kernel"] = os.uname().release
    if os.geteuid() != 0:
        rep.missing.append("root: run-scenario's native backend must run as root (sudo)")
    rep.missing += missing_tools("native", *(["nft-counters"] if _counts_with_nft(scenario) else []))
    rep.missing += missing_python_modules("native")
    switches = getattr(scenario.topology, "switches", [])
    kinds = {w.type for w in switches}
    if kinds & {"ovs", "ovs-user"}:
        rep.missing += missing_tools("ovs")
    if "ovs" in kinds and not openvswitch_module():
        rep.missing.append("switch type ovs needs the kernel's openvswitch module, which this kernel lacks "
                           "(type ovs-user runs OVS's userspace datapath without it)")
    if "bridge" in kinds and not Path("/sys/module/bridge").exists() and os.geteuid() == 0:
        _run(["modprobe", "-q", "bridge"])
        if not Path("/sys/module/bridge").exists():
            rep.missing.append("switch type bridge needs the kernel's bridge module")
    ctl = getattr(scenario.topology, "controller", None)
    if ctl is not None and any(w.controller for w in switches):
        rep.missing += missing_python_modules("controller")
    req = scenario.requires.kernel
    if req:
        if not satisfies(os.uname().release, req):
            rep.missing.append(f"requires.kernel {req}: this kernel is {os.uname().release}")
    if not (PROC / "net/mptcp/enabled").exists():
        rep.missing.append("the kernel has no MPTCP (no net.mptcp.enabled sysctl; needs CONFIG_MPTCP)")
    if netem is not None and not netem[0]:
        changing = sorted(rate_changing_links(scenario))
        rep.missing.append(f"sch_netem does not work here ({netem[1]}): delay, loss and rate need it"
                           + (" (and sch_tbf above it, for the links whose rate changes during a run: "
                              f"{', '.join(changing)})" if changing else ""))
    ip = dict(iperf3)
    rep.facts.update(ip)
    if ip["iperf3"] and "mptcp" in scenario.runs.compare and not ip["iperf3_native_mptcp"]:
        rep.missing += [f"iperf3 {ip['iperf3_version']} has no --mptcp, so: {m}" for m in missing_tools("mptcp")]
    cc = scenario.mptcp.congestion
    if cc not in available_congestion() and os.geteuid() == 0:
        _run(["modprobe", "-q", f"tcp_{cc}"])
    if cc not in available_congestion():
        rep.missing.append(f"congestion control {cc!r} is not available "
                           f"(available: {' '.join(available_congestion()) or 'none'})")
    if _can_ask_mptcp():
        features = []
        if scenario.mptcp.signal_ports:
            features.append(("signal endpoints with a port (mptcp.signal_ports)", "port"))
        if scenario.mptcp.backup:
            features.append(("backup endpoints (mptcp.backup)", "backup"))
        for what, name in features:
            ok, why = kernel_features.endpoint_answers()[name]
            if not ok:
                flags = " ".join(kernel_features.ENDPOINT_FLAG_PROBES[name])
                rep.missing.append(f"{what}: this kernel refuses `ip mptcp endpoint add ... {flags}` ({why})")
    rep.missing += missing_mptcp_sysctls(scenario)
    rep.facts["mptcp_features"] = kernel_features.inventory(bool(ip["iperf3_native_mptcp"]))
    sched_file = PROC / "net/mptcp/scheduler"
    rep.facts["mptcp_scheduler_sysctl"] = sched_file.exists()
    if scenario.mptcp.scheduler != "default":
        avail_file = PROC / "net/mptcp/available_schedulers"
        avail = avail_file.read_text().split() if avail_file.exists() else []
        if not sched_file.exists():
            rep.missing.append(f"mptcp.scheduler {scenario.mptcp.scheduler!r}: this kernel has no "
                               "net.mptcp.scheduler (it only has the default scheduler)")
        elif scenario.mptcp.scheduler not in avail:
            rep.missing.append(f"mptcp.scheduler {scenario.mptcp.scheduler!r} is not available "
                               f"(available: {' '.join(avail) or 'none'})")
    return rep
