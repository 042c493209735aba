"""A Linux bridge made with `ip link`: Mininet's LinuxBridge needs brctl, which is obsolete. No STP: the
scenario model refuses layer-2 loops outside steered uplinks.

Imported only when a plan has a bridge (it needs Mininet). `run-scenario export` copies this file's code,
from the import on, into the scripts it writes (runners/cli/export.py), so that they need only Mininet."""

from mininet.node import Switch


class IpBridge(Switch):
    """A Linux bridge made with `ip link` (no STP)."""

    # Mininet's class setup would ask `which mnexec` and `which ifconfig` at each build (two processes,
    # 0.12 s in a TCG guest): mnexec is checked with the testbed's other programs before anything starts
    # (runners.backends.programs), and a bridge runs no ifconfig
    isSetup = True

    def start(self, _controllers):
        self.cmd("ip link del", self.name, "2>/dev/null")
        self.cmd("ip link add name", self.name, "type bridge stp_state 0 forward_delay 0")
        for intf in self.intfList():
            if self.name in intf.name:
                self.cmd("ip link set dev", intf.name, "master", self.name)
                self.cmd("ip link set dev", intf.name, "up")
        self.cmd("ip link set dev", self.name, "up")

    def stop(self, deleteIntfs=True):
        self.cmd("ip link del", self.name, "2>/dev/null")
        super().stop(deleteIntfs)
