"""What `run-scenario clean` lists as ours, on a recorded process table: never a container's process."""
import os

from runners.linux import leftovers


def test_only_our_processes_are_leftovers(monkeypatch, tmp_path):
    own = os.readlink("/proc/self/ns/net")
    table = [
        (101, "net:[9001]", "bash", "bash --norc --noediting -is mininet:h1"),      # a Mininet host
        (102, "net:[9001]", "ping", "ping -c 5 10.0.1.2"),                          # in its namespace
        (103, "net:[9002]", "nginx", "nginx: worker process"),                      # a container's
        (104, own, "iperf3", "iperf3 -s -1"),
        (105, own, "qemu-system-x86", "qemu-system-x86_64 -fsdev path=/tmp/testbed-vm-cmd-x1"),
        (106, own, "python3", "python3 -m controller.launch steering 6653"),
        (107, own, "sshd", "sshd: /usr/sbin/sshd -D"),
        # a SIGKILLed run's capture, the last process of its host's namespace; and a user's own tcpdump
        (108, "net:[9003]", "tcpdump", "tcpdump -i h1-eth0 -w /r/raw/r001-mptcp-A/pcap/h1-h1-eth0.part.pcap"),
        (109, "net:[9004]", "tcpdump", "tcpdump -i eth0 -w /root/mine.pcap"),
        # a host's namespace holder (marked in its environment), a process in its namespace; a container's sleep
        (110, "net:[9005]", "cat", "cat"),
        (111, "net:[9005]", "iperf3", "iperf3 -s -1"),
        (112, "net:[9006]", "cat", "cat"),
    ]
    environ = {110: b"PATH=/usr/bin\0" + leftovers.HOLDER_MARK.encode() + b"=h2\0", 112: b"PATH=/usr/bin\0"}
    monkeypatch.setattr(leftovers, "_process_table", lambda: table)
    monkeypatch.setattr(leftovers, "_environ", lambda pid: environ.get(pid, b""))
    found = dict(leftovers.leftover_processes())
    assert sorted(found) == [101, 102, 104, 105, 106, 108, 110, 111]
    assert "micro-VM" in found[105] and "controller" in found[106]


def test_the_holders_mark_is_the_one_the_hosts_get():
    from topologies.planned_host import HOLDER_MARK

    assert leftovers.HOLDER_MARK == HOLDER_MARK


def test_temporary_folders_of_cold_boots_and_start_barriers_are_found(monkeypatch, tmp_path):
    """What a SIGKILLed run leaves in /tmp: its guest's command folder, and a FIFO its clients waited on."""
    from runners.traffic.barrier import StartBarrier
    monkeypatch.setattr(leftovers, "OWN_OVS_PARENT", tmp_path / "run")
    monkeypatch.setattr(leftovers.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(leftovers.tempfile, "tempdir", str(tmp_path))
    (tmp_path / "testbed-vm-cmd-abc").mkdir()
    (tmp_path / "other").mkdir()
    barrier = StartBarrier(2)        # never closed, as after a SIGKILL
    assert leftovers.leftover_folders() == sorted([tmp_path / "testbed-vm-cmd-abc", barrier.fifo.parent])


def test_an_orphaned_guest_is_found_by_the_result_folder_it_names(tmp_path):
    """--resume after a SIGKILL stops only what names its own result folder, never another run."""
    import subprocess
    import sys
    mine = tmp_path / "results" / "s" / "20261122T000000Z"
    mine.mkdir(parents=True)
    other = tmp_path / "results" / "s" / "20261122T000001Z"
    ours = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "--rwdir", str(mine)])
    theirs = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "--rwdir", str(other)])
    try:
        stopped = leftovers.kill_processes_naming(mine)
        assert stopped == [f"process {ours.pid} (python3)"] or stopped == [f"process {ours.pid} (python)"]
        assert ours.wait(timeout=5) == -9 and theirs.poll() is None
    finally:
        for p in (ours, theirs):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_inside_the_vm_the_hosts_folders_are_not_leftovers(monkeypatch, tmp_path):
    monkeypatch.setattr(leftovers, "OWN_OVS_PARENT", tmp_path / "run")
    monkeypatch.setattr(leftovers.tempfile, "gettempdir", lambda: str(tmp_path))
    (tmp_path / "testbed-vm-cmd-abc").mkdir()
    monkeypatch.setenv("TESTBED_IN_VM", "1")
    assert leftovers.leftover_folders() == []


def test_links_are_read_from_proc_net_dev_and_only_ours_count(tmp_path):
    from runners.linux.leftovers import leftover_links
    dev = tmp_path / "dev"
    dev.write_text("Inter-|   Receive |  Transmit\n face |bytes packets|bytes packets\n"
                   "    lo: 1 2 0 0 0 0 0 0 1 2 0 0 0 0 0 0\n  eth0: 1 2 0 0 0 0 0 0 1 2 0 0 0 0 0 0\n"
                   "h1-eth0: 1 2 0 0 0 0 0 0 1 2 0 0 0 0 0 0\n s1-eth2: 1 2 0 0 0 0 0 0 1 2 0 0 0 0 0 0\n")
    assert leftover_links(dev) == ["h1-eth0", "s1-eth2"]
    assert leftover_links(tmp_path / "missing") == []


def test_the_links_read_are_the_ones_ip_lists():
    import json
    import shutil
    import subprocess

    import pytest

    from runners.linux.leftovers import OUR_LINK, leftover_links
    if not shutil.which("ip"):
        pytest.skip("no ip here")
    listed = json.loads(subprocess.run(["ip", "-j", "link", "show"], capture_output=True, text=True).stdout)
    assert leftover_links() == [ln["ifname"] for ln in listed if OUR_LINK.match(ln["ifname"])]


def test_named_namespaces_are_the_files_ip_netns_makes(tmp_path):
    from runners.linux.leftovers import leftover_netns
    (tmp_path / "mptb-features-12").touch()
    (tmp_path / "other").touch()
    assert leftover_netns(tmp_path) == ["mptb-features-12", "other"]
    assert leftover_netns(tmp_path / "missing") == []


def test_open_vswitch_that_a_run_started_itself_is_ours_and_a_systems_is_not(monkeypatch):
    """The daemons a run starts on a database of its own name its folder; after a SIGKILL, `clean` stops
    them even where Open vSwitch ran before (a workstation's own service is never touched)."""
    from runners.pipeline.controlplane import own_ovs_argvs
    own = os.readlink("/proc/self/ns/net")
    argvs = own_ovs_argvs(f"{leftovers.OWN_OVS_PARENT}/{leftovers.OWN_OVS_PREFIX}k2j4", "/var/run/openvswitch")
    table = [(201, own, "ovsdb-server", " ".join(argvs["ovsdb-server"])),
             (202, own, "ovs-vswitchd", " ".join(argvs["ovs-vswitchd"])),
             (203, own, "ovs-vswitchd", "ovs-vswitchd unix:/var/run/openvswitch/db.sock -vconsole:emer "
                                        "--mlockall --no-chdir --pidfile --detach --monitor")]   # systemd's
    monkeypatch.setattr(leftovers, "_process_table", lambda: table)
    assert [pid for pid, _ in leftovers.leftover_processes(ovs_was_running=True)] == [201, 202]
    assert [pid for pid, _ in leftovers.leftover_processes(ovs_was_running=False)] == [201, 202, 203]


def test_their_folder_is_a_leftover_inside_the_vm_too(monkeypatch, tmp_path):
    monkeypatch.setattr(leftovers, "OWN_OVS_PARENT", tmp_path)
    monkeypatch.setattr(leftovers.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    (tmp_path / "testbed-ovs-abc").mkdir()
    (tmp_path / "openvswitch").mkdir()
    assert leftovers.leftover_folders() == [tmp_path / "testbed-ovs-abc"]
    monkeypatch.setenv("TESTBED_IN_VM", "1")       # the guest's /run is its own
    assert leftovers.leftover_folders() == [tmp_path / "testbed-ovs-abc"]


def test_clean_takes_the_bridges_down_before_it_stops_the_ovs_daemons(monkeypatch):
    """ovs-vsctl needs ovsdb-server, and ovs-vswitchd takes a deleted bridge out of the kernel."""
    done = []
    monkeypatch.setattr(leftovers, "_scan", lambda _: ([(1, "iperf3"), (2, "ovs-vswitchd"), (3, "ovsdb-server")],
                                                       [], [], ["s1"], []))
    monkeypatch.setattr(leftovers, "_kill", lambda pid: done.append(pid))
    monkeypatch.setattr(leftovers, "run_quietly", lambda argv, timeout=20: done.append(argv[-1]))
    leftovers.remove_leftovers()
    assert done == [1, "s1", 2, 3]


def test_where_open_vswitch_ran_before_only_bridges_with_mininets_ports_are_ours(monkeypatch, tmp_path):
    """A workstation's own bridge (br0 with its uplink and VMs' taps) is never taken down by `clean`."""
    from types import SimpleNamespace
    (tmp_path / "db.sock").touch()
    monkeypatch.setenv("OVS_RUNDIR", str(tmp_path))
    ifaces = {"br0": "enp3s0\nvnet0\n", "s1": "s1-eth1\ns1-eth2\n", "core": "core-eth1\n", "empty": ""}

    def vsctl(argv, timeout=20):
        out = " ".join(ifaces) if argv[-1] == "list-br" else ifaces[argv[-1]]
        return SimpleNamespace(returncode=0, stdout=out)
    monkeypatch.setattr(leftovers, "run_quietly", vsctl)
    assert leftovers.leftover_bridges(ovs_was_running=True) == ["s1", "core"]
    assert leftovers.leftover_bridges(ovs_was_running=False) == ["br0", "s1", "core", "empty"]
