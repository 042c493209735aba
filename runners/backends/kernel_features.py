"""What this kernel's MPTCP offers, found by asking it: schedulers, path managers, the endpoint flags it
accepts, and its net.mptcp sysctls. Recorded in every result set's metadata (probe.mptcp_features), so
that sets made on different kernels can be told apart and compared.

Endpoint flags are tried, one `ip mptcp endpoint add` each, in a throwaway namespace: `ip -batch` would
be one process, but iproute2 exits the whole batch on a flag it does not know itself (an older ip and
`laminar`), and that must read as "not accepted" for that flag alone.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from runners.backends.probe_cache import NO_NAMESPACE, remembered
from runners.linux.netns import throwaway_netns
from runners.linux.processes import run_command

MPTCP_SYSCTLS = Path("/proc/sys/net/mptcp")
# name -> the flags tried; each on its own address
ENDPOINT_FLAG_PROBES: dict[str, tuple[str, ...]] = {
    "signal": ("signal",),
    "subflow": ("subflow",),
    "backup": ("signal", "backup"),
    "fullmesh": ("subflow", "fullmesh"),
    "port": ("signal", "port", "5300"),
    "laminar": ("laminar",),
}


def schedulers(sysctl_dir: Path = MPTCP_SYSCTLS) -> list[str]:
    """The packet schedulers a connection may use; a kernel without the sysctl (before 6.6) has one."""
    avail = sysctl_dir / "available_schedulers"
    return avail.read_text().split() if avail.exists() else ["default"]


def path_managers(sysctl_dir: Path = MPTCP_SYSCTLS) -> list[str]:
    """In-kernel always; userspace from the pm_type sysctl on (5.19); 6.15 lists them by name."""
    avail = sysctl_dir / "available_path_managers"
    if avail.exists():
        return avail.read_text().split()
    return ["kernel", "userspace"] if (sysctl_dir / "pm_type").exists() else ["kernel"]


def sysctl_names(sysctl_dir: Path = MPTCP_SYSCTLS) -> list[str]:
    return sorted(p.name for p in sysctl_dir.iterdir()) if sysctl_dir.is_dir() else []


def setup_batch(n_addresses: int) -> str:
    """ip -batch lines for a veth end with one address per flag probe (veth: the developers' host kernel
    has no dummy module)."""
    lines = ["link add name p0 type veth peer name p1", "link set p0 up"]
    lines += [f"addr add 10.99.0.{i + 1}/24 dev p0" for i in range(n_addresses)]
    return "\n".join(lines) + "\n"


def endpoint_argv(ns: str, index: int, flags: tuple[str, ...]) -> list[str]:
    return ["ip", "-n", ns, "mptcp", "endpoint", "add", f"10.99.0.{index + 1}", "dev", "p0", *flags]


@remembered   # one kernel's answer: the warm VM asks once for every job; a cold VM's host keeps it (probe_cache)
def endpoint_answers() -> dict[str, tuple[bool, str]]:
    """{flag probe: (accepted, why not)}, from one throwaway namespace. The native probe refuses a
    scenario whose endpoints the kernel refuses from the same answers that metadata records."""
    ns = f"mptb-features-{os.getpid()}"
    with throwaway_netns(ns) as made:
        if made.returncode == 0:
            made = run_command(["ip", "netns", "exec", ns, "ip", "-batch", "-"], 20,
                               input=setup_batch(len(ENDPOINT_FLAG_PROBES)))
        if made.returncode != 0:
            why = f"{NO_NAMESPACE}: {made.stderr.strip() or 'ip failed'}"
            return {name: (False, why) for name in ENDPOINT_FLAG_PROBES}
        probes = list(ENDPOINT_FLAG_PROBES.items())

        def answer(item: tuple[int, tuple[str, ...]]) -> tuple[bool, str]:
            r = run_command(endpoint_argv(ns, *item), 20)
            ok = r.returncode == 0
            return ok, "" if ok else (r.stderr.strip() or "refused")
        with ThreadPoolExecutor(max_workers=len(probes)) as pool:
            answers = pool.map(answer, [(i, flags) for i, (_, flags) in enumerate(probes)])
            return {name: result for (name, _), result in zip(probes, answers)}


def endpoint_flags() -> dict[str, bool]:
    return {name: ok for name, (ok, _) in endpoint_answers().items()}


def inventory(iperf3_native_mptcp: bool) -> dict:
    """Everything above, for metadata.json; endpoint flags only as root (they need a namespace)."""
    if not MPTCP_SYSCTLS.is_dir():
        return {"mptcp": False}
    return {"mptcp": True, "schedulers": schedulers(), "path_managers": path_managers(),
            "endpoint_flags": endpoint_flags() if os.geteuid() == 0 else None,
            "sysctls": sysctl_names(), "iperf3_native_mptcp": iperf3_native_mptcp}
