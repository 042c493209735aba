"""What a run can leave behind on a machine (or in a guest), found and removed by one helper.

A run's Mininet hosts are processes in network namespaces of their own; its
links are veth pairs named `<node>-eth<N>` (and `cli`/`srv` style names);
its traffic is iperf3 (or a user's tool under mptcpize); switched topologies
add Open vSwitch bridges, OVS daemons it started, and an os-ken controller
(`python -m controller.launch`). The warm VM checks for these between jobs,
and the integration tests after every run.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import tempfile
from pathlib import Path

from runners.linux.openflow import ovsdb_socket
from runners.linux.processes import run_quietly

OUR_LINK = re.compile(r"^(?:h\d+|s\d+|r\d+|cli|srv|[A-Za-z][A-Za-z0-9_]*-eth\d+)(?:-eth\d+)?$")
OUR_COMMANDS = ("iperf3", "mnexec")
OVS_DAEMONS = ("ovs-vswitchd", "ovsdb-server")
VM_SCRIPT_PREFIX = "testbed-vm-cmd-"   # runners.backends.vm.boot's temporary folder for the guest's command
VM_SCRIPT_FILE = "guest.sh"            # in it: the guest's command line, which names the result folder
BARRIER_PREFIX = "testbed-barrier-"    # runners.traffic.barrier's FIFO of several clients' start
OWN_OVS_PREFIX = "testbed-ovs-"        # the folder of OVS daemons a run started (runners.pipeline.controlplane)
OWN_OVS_PARENT = Path("/run")
# in the environment of a host's namespace holder (topologies.planned_host.HOLDER_MARK, which this room
# may not import; tests/unit/test_leftovers.py holds the two equal)
HOLDER_MARK = "TESTBED_NAMESPACES_OF"


def _process_table() -> list[tuple[int, str, str, str]]:
    """(pid, network namespace, comm, command line) of every other process."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            netns = os.readlink(f"/proc/{name}/ns/net")
            comm = Path(f"/proc/{name}/comm").read_text().strip()
            cmd = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        out.append((int(name), netns, comm, cmd))
    return out


def leftover_processes(ovs_was_running: bool = True) -> list[tuple[int, str]]:
    """Processes in a Mininet host's network namespace (one where a Mininet shell, iperf3 or --capture's
    tcpdump runs: other namespaces, such as containers', are not ours), iperf3, mnexec, a controller, OVS daemons when they
    were not running before, and micro-VMs of a cold boot (their command names our script folder)."""
    # our own namespace, not init's: /proc/1 may be unreadable (a container), and a run's
    # processes start in the namespace run-scenario runs in
    root_ns = os.readlink("/proc/self/ns/net")
    table = _process_table()
    ours_ns = {netns for pid, netns, comm, cmd in table
               if netns != root_ns and ("mininet:" in cmd or comm in OUR_COMMANDS or _our_tcpdump(comm, cmd)
                                        or _holds_a_host(pid, comm))}
    found = []
    for pid, netns, comm, cmd in table:
        if netns in ours_ns:
            found.append((pid, f"{comm} in a Mininet host's network namespace"))
        elif netns != root_ns:
            continue
        elif comm in OUR_COMMANDS or (comm in OVS_DAEMONS and (not ovs_was_running or _our_ovs(cmd))):
            found.append((pid, comm))
        elif "controller.launch" in cmd:
            found.append((pid, f"controller: {cmd[:80]}"))
        elif VM_SCRIPT_PREFIX in cmd:
            found.append((pid, f"micro-VM of a run: {comm}"))
    return found


def _holds_a_host(pid: int, comm: str) -> bool:
    """A host's namespace holder (topologies.planned_host): `cat` with HOLDER_MARK in its environment."""
    if comm != "cat":
        return False
    return any(entry.startswith(HOLDER_MARK.encode() + b"=") for entry in _environ(pid).split(b"\0"))


def _environ(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def _our_ovs(cmd: str) -> bool:
    """An OVS daemon a run started on a database of its own: its command line names the run's folder."""
    return f"{OWN_OVS_PARENT}/{OWN_OVS_PREFIX}" in cmd


def _our_tcpdump(comm: str, cmd: str) -> bool:
    """--capture's tcpdump (runners.collect.capture writes *.part.pcap): after a SIGKILL it can be the last
    process of a host's namespace, and keeps it and its links alive."""
    return comm == "tcpdump" and ".part.pcap" in cmd


def processes_naming(path: Path) -> list[tuple[int, str]]:
    """Processes whose command line names `path`: a SIGKILLed run's orphaned micro-VM names its result
    folder (--rwdir), so it is found without touching anyone else's run."""
    needle = str(Path(path).resolve())
    return [(pid, comm) for pid, _, comm, cmd in _process_table() if needle in cmd]


def kill_processes_naming(path: Path) -> list[str]:
    found = processes_naming(path)
    for pid, _ in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return [f"process {pid} ({comm})" for pid, comm in found]


def leftover_folders() -> list[Path]:
    """Temporary folders of cold VM boots, of several clients' start barriers and of the OVS daemons a run
    started (a SIGKILLed run-scenario cannot remove its own). Inside the micro-VM, /tmp shows the host's
    own through an overlay: those are the host's, maybe in use, and the guest's own vanish with it; its
    /run is its own."""
    ovs = sorted(OWN_OVS_PARENT.glob(OWN_OVS_PREFIX + "*"))
    if os.environ.get("TESTBED_IN_VM"):
        return ovs
    tmp = Path(tempfile.gettempdir())
    return sorted([*tmp.glob(VM_SCRIPT_PREFIX + "*"), *tmp.glob(BARRIER_PREFIX + "*")]) + ovs


def folders_of(run_dir: Path) -> list[Path]:
    """The temporary folders of cold boots whose guest writes into `run_dir` (the guest's command names
    files in it: its scenario's copy and its job file), so that --resume removes its own killed run's and
    never another run's."""
    needle = str(Path(run_dir).resolve())
    found = []
    for folder in leftover_folders():
        try:
            words = shlex.split((folder / VM_SCRIPT_FILE).read_text())
        except (OSError, ValueError):
            continue
        if any(w == needle or w.startswith(needle + "/") for w in words):
            found.append(folder)
    return found


def clean_after_a_killed_run(run_dir: Path) -> list[str]:
    """What a SIGKILLed run of `run_dir` left, stopped and removed: processes whose command line names
    the folder (its orphaned micro-VM) and its cold boot's temporary folder. One line per thing."""
    gone = kill_processes_naming(run_dir)
    for folder in folders_of(run_dir):
        shutil.rmtree(folder, ignore_errors=True)
        gone.append(f"temporary folder {folder}")
    return gone


# Both read what `ip link show` and `ip netns list` would print, without starting them: the warm VM
# looks after every job, and a process start costs 0.1-0.2 s in a TCG guest.
def leftover_links(net_dev: Path = Path("/proc/self/net/dev")) -> list[str]:
    """Our links in this process's namespace (the root one), by name."""
    try:
        lines = net_dev.read_text().splitlines()[2:]
    except OSError:
        return []
    names = [ln.partition(":")[0].strip() for ln in lines if ":" in ln]
    return [n for n in names if OUR_LINK.match(n)]


def leftover_netns(run_netns: Path = Path("/run/netns")) -> list[str]:
    """Named network namespaces (`ip netns add` makes a file here for each)."""
    try:
        return sorted(p.name for p in run_netns.iterdir())
    except OSError:
        return []


MININET_PORT = re.compile(r"^[A-Za-z][A-Za-z0-9_]*-eth\d+$")   # a switch's ports are <switch>-eth<n>


def leftover_bridges(ovs_was_running: bool = True) -> list[str]:
    """Bridges a run left in Open vSwitch. Where OVS ran before (a workstation's service, with bridges of its
    own), only those with a port Mininet named; in an OVS the testbed started, every one."""
    if not os.path.exists(ovsdb_socket()):   # Open vSwitch is not running: no bridge can be left
        return []
    r = run_quietly(["ovs-vsctl", "--timeout=5", "list-br"], timeout=10)
    bridges = r.stdout.split() if r is not None and r.returncode == 0 else []
    if not ovs_was_running:
        return bridges
    ours = []
    for name in bridges:
        ports = run_quietly(["ovs-vsctl", "--timeout=5", "list-ifaces", name], timeout=10)
        if ports is not None and any(MININET_PORT.match(p) for p in ports.stdout.split()):
            ours.append(name)
    return ours


def find_leftovers(ovs_was_running: bool = True) -> list[str]:
    """One line per thing a run left behind; empty when the machine is clean."""
    return _describe(*_scan(ovs_was_running))


def remove_leftovers(ovs_was_running: bool = True) -> list[str]:
    """Kill our processes, delete our links, bridges and namespaces; returns what was there."""
    processes, netns, links, bridges, folders = _scan(ovs_was_running)   # one scan: each costs process starts
    # the bridges go while OVS still runs: ovs-vsctl needs ovsdb-server, and ovs-vswitchd takes them
    # out of the kernel
    ovs = [(pid, what) for pid, what in processes if what in OVS_DAEMONS]
    for pid, _ in [p for p in processes if p not in ovs]:
        _kill(pid)
    for name in bridges:
        run_quietly(["ovs-vsctl", "--timeout=5", "--if-exists", "del-br", name])
    for pid, _ in ovs:
        _kill(pid)
    for name in links:
        run_quietly(["ip", "link", "del", name])
    for name in netns:
        run_quietly(["ip", "netns", "del", name])
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
    return _describe(processes, netns, links, bridges, folders)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _scan(ovs_was_running: bool) -> tuple[list, list, list, list, list]:
    return (leftover_processes(ovs_was_running), leftover_netns(), leftover_links(), leftover_bridges(ovs_was_running),
            leftover_folders())


def _describe(processes: list, netns: list, links: list, bridges: list, folders: list) -> list[str]:
    return ([f"process {pid} ({what})" for pid, what in processes]
            + [f"named network namespace {n}" for n in netns]
            + [f"link {name} in the root namespace" for name in links]
            + [f"Open vSwitch bridge {name}" for name in bridges]
            + [f"temporary folder {f}" for f in folders])
