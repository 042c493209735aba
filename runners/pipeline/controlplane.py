"""Open vSwitch daemons and the os-ken controller: started before Mininet, stopped on every exit path.

The controller must accept connections before the switches are created, or
OVS backs off and a switch stalls for ~45 s; we wait for its port, then check
from OVS that every switch under the controller is connected.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from runners.errors import ControlPlaneError
from runners.linux.leftovers import OWN_OVS_PARENT, OWN_OVS_PREFIX
from runners.linux.openflow import BridgeChannel, OpenFlowError, mgmt_socket, ovs_rundir, ovsdb_socket
from runners.linux.processes import run_command, stop_processes
from runners.paths import REPO

OVS_CTL = "/usr/share/openvswitch/scripts/ovs-ctl"


def _run(argv: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
    return run_command(argv, timeout)


def ovs_running() -> bool:
    # ovs-vsctl took 2.2 s to give up in a TCG guest where no ovsdb-server ran (2026-11-28); a
    # distribution's build without its socket is not running, and that is known without a process
    vsctl = shutil.which("ovs-vsctl")
    if vsctl and os.path.realpath(vsctl) == "/usr/bin/ovs-vsctl" and not os.path.exists(ovsdb_socket()):
        return False
    try:
        return _run(["ovs-vsctl", "--timeout=5", "show"], timeout=10).returncode == 0
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return False


def ovs_ctl() -> str:
    """Debian and Ubuntu keep ovs-ctl outside PATH."""
    return OVS_CTL if os.path.exists(OVS_CTL) else "ovs-ctl"


def vswitchd_pid() -> int | None:
    """The ovs-vswitchd process, if one runs (ovs-vsctl alone cannot tell: it talks to ovsdb-server)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "ovs-vswitchd":
                return int(pid)
        except OSError:
            continue
    return None


def vswitchd_alive() -> bool:
    return vswitchd_pid() is not None


class OvsDaemons:
    """Starts ovsdb-server and ovs-vswitchd when they are not running, and stops only what it started.

    ovs-vswitchd dying mid-set is a run failure; for the teardown it is started again, because
    without it Mininet's `ovs-vsctl del-br` waits forever and the kernel keeps the bridges."""

    def __init__(self, log=print, logs_to: Path | None = None):
        self.log = log
        self.logs_to = logs_to   # where the daemons' logs are kept when their own folder goes
        self.started = False
        self.used = False
        self.vswitchd_pid: int | None = None
        self.own_dir: Path | None = None   # the folder of the daemons this object started itself

    def ensure(self, userspace: bool = False) -> None:
        if userspace:
            ensure_tun()
        self.used = True
        if ovs_running():
            return
        t0 = time.monotonic()
        if own_daemons_possible() and not system_bridges_in_kernel():
            self.log("starting Open vSwitch (its two daemons, with a database of this run's own)")
            self._start_own()
        else:
            self._start_with_ovs_ctl()
        self.log(f"Open vSwitch up in {time.monotonic() - t0:.1f}s")

    def _start_with_ovs_ctl(self) -> None:
        self.log("starting Open vSwitch (ovs-ctl start)")
        try:
            r = _run([ovs_ctl(), "start", "--system-id=random"], timeout=120)
        except FileNotFoundError:
            raise ControlPlaneError("Open vSwitch is not installed (no ovs-ctl); run ./setup.sh") from None
        self.started = True
        if not ovs_running():
            raise ControlPlaneError(f"Open vSwitch did not start: {(r.stderr or r.stdout).strip()[-500:]}")

    def _start_own(self) -> None:
        """ovsdb-server on a fresh database in a folder of its own, then ovs-vswitchd: 2.4 s in a TCG guest
        where `ovs-ctl start` took 5.9 s (2026-11-28), and nothing written to /etc/openvswitch. The
        kernel's module is loaded as ovs-ctl would; without it, the bridges' check names the failure."""
        self.own_dir = Path(tempfile.mkdtemp(prefix=OWN_OVS_PREFIX, dir=OWN_OVS_PARENT))   # stop() removes it
        self.started = True
        os.makedirs(ovs_rundir(), mode=0o755, exist_ok=True)   # /run is emptied at boot; ovs-ctl makes it too
        if shutil.which("modprobe"):
            _run(["modprobe", "-q", "openvswitch"])
        argvs = own_ovs_argvs(str(self.own_dir), ovs_rundir())
        for step in ("create", "ovsdb-server", "init", "ovs-vswitchd"):
            try:
                r = _run(argvs[step], timeout=60)
            except subprocess.TimeoutExpired:
                raise ControlPlaneError(f"Open vSwitch did not start: `{' '.join(argvs[step])}` took over 60 s; "
                                        f"its log: {self.own_dir}") from None
            if r.returncode != 0:
                raise ControlPlaneError(f"Open vSwitch did not start: `{' '.join(argvs[step])}` failed (exit "
                                        f"{r.returncode}): {(r.stderr or r.stdout).strip()[-500:]}")

    def delete_bridges(self, names: list[str]) -> None:
        """The bridges out of OVS's database before their ports' veth pairs go: ovs-vswitchd then takes all
        their ports out in one reconfiguration. With the pairs deleted first it tried to open each vanished
        port again, one after another (about 0.2 s each in a TCG guest: 3 s of a 16-client teardown,
        2026-11-28). Mininet's stop deletes them again, --if-exists."""
        if not names or not self.used:
            return
        argv = ["ovs-vsctl", "--timeout=10"]
        for name in names:
            argv += ["--", "--if-exists", "del-br", name]
        r = _run(argv, timeout=20)
        if r.returncode != 0:
            self.log("warning: deleting the bridges before their links failed: "
                     f"{(r.stderr or r.stdout).strip()[-300:]}")

    @property
    def vswitchd_log(self) -> Path:
        return self.own_dir / "ovs-vswitchd.log" if self.own_dir else Path("/var/log/openvswitch/ovs-vswitchd.log")

    def _alive(self) -> bool:
        """Cheap enough to ask every 0.5 s per client: the daemon's pid is found once, then only its
        /proc entry is looked at (a full /proc scan per check cost E5's four clients a third of their
        MPTCP throughput under TCG)."""
        if self.vswitchd_pid is not None and Path(f"/proc/{self.vswitchd_pid}/comm").exists():
            return True
        self.vswitchd_pid = vswitchd_pid()
        return self.vswitchd_pid is not None

    def check_alive(self, when: str) -> None:
        if self.used and not self._alive():
            raise ControlPlaneError(f"Open vSwitch's ovs-vswitchd is no longer running {when}: the switches "
                                    "stopped forwarding, so the set stopped here")

    def revive_for_teardown(self) -> None:
        if not self.used or vswitchd_alive():
            return
        self.log("cleaning up: ovs-vswitchd died; starting it again to take the switches down")
        argv = (own_ovs_argvs(str(self.own_dir), ovs_rundir())["ovs-vswitchd"] if self.own_dir
                else [ovs_ctl(), "start", "--system-id=random"])
        try:
            _run(argv, timeout=120)
        except (FileNotFoundError, subprocess.TimeoutExpired) as e:
            self.log(f"warning: could not start ovs-vswitchd again: {e}")

    def stop(self) -> None:
        if self.own_dir is not None:
            # `exit` over each one's control socket, as ovs-ctl's stop asks (stop_daemon); each removes its
            # pidfile and control socket as it exits
            for daemon in ("ovs-vswitchd", "ovsdb-server"):
                stop_daemon(self.own_dir / f"{daemon}.pid")
            self._keep_logs()
            shutil.rmtree(self.own_dir, ignore_errors=True)
            self.own_dir, self.started = None, False
        elif self.started:
            self.started = False
            try:
                _run([ovs_ctl(), "stop"], timeout=60)
            except (FileNotFoundError, subprocess.TimeoutExpired):
                pass

    def _keep_logs(self) -> None:
        """The daemons' logs go with the results (a dead ovs-vswitchd is explained there), as ovs-ctl's
        stay in /var/log/openvswitch."""
        if self.logs_to is None:
            return
        for log in sorted(self.own_dir.glob("*.log")):
            try:
                self.logs_to.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(log, self.logs_to / log.name)
            except OSError as e:
                self.log(f"warning: could not keep {log.name}: {e}")


OVS_SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"   # Debian's and Ubuntu's package


def own_daemons_possible() -> bool:
    """A distribution's Open vSwitch (its schema where Debian and Ubuntu keep it, its daemons on PATH);
    any other build is started by its own ovs-ctl. The daemons' folder is in /run, where `run-scenario
    clean` finds it (and them: their command lines name it) after a run that was killed."""
    return (OWN_OVS_PARENT.is_dir() and os.path.exists(OVS_SCHEMA)
            and all(shutil.which(p) for p in ("ovsdb-tool", "ovsdb-server", "ovs-vswitchd")))


def system_bridges_in_kernel(net: Path = Path("/sys/class/net")) -> bool:
    """Ports in the kernel's Open vSwitch datapath while no OVS runs: a stopped system OVS's bridges. A
    fresh database would make ovs-vswitchd take them out of the datapath, so ovs-ctl starts the system's
    own instead. (A run's own bridges are gone at its end: Mininet deletes them.)"""
    try:
        devices = list(net.iterdir())
    except OSError:
        return False
    for dev in devices:
        try:
            if os.path.basename(os.readlink(dev / "master")) == "ovs-system":
                return True
        except OSError:   # no master
            continue
    return False


def own_ovs_argvs(folder: str, rundir: str) -> dict[str, list[str]]:
    """The steps of OvsDaemons' own start. The database and the logs live in `folder`; the sockets stay in
    the run directory, where ovs-vsctl, ovs-ofctl and Mininet look for them. As ovs-ctl starts them: at
    nice -10 (ovs-user's datapath forwards inside ovs-vswitchd), in /, logging to their file only."""
    db, sock = f"{folder}/conf.db", f"unix:{rundir}/db.sock"
    daemon = ["-vconsole:emer", "-vsyslog:err", "-vfile:info", "--detach"]
    return {"create": ["ovsdb-tool", "create", db, OVS_SCHEMA],
            "ovsdb-server": ["nice", "-n", "-10", "ovsdb-server", db, f"--remote=p{sock}",
                             f"--pidfile={folder}/ovsdb-server.pid", f"--log-file={folder}/ovsdb-server.log",
                             *daemon],
            "init": ["ovs-vsctl", f"--db={sock}", "--no-wait", "init"],
            "ovs-vswitchd": ["nice", "-n", "-10", "ovs-vswitchd", sock, f"--pidfile={folder}/ovs-vswitchd.pid",
                             f"--log-file={folder}/ovs-vswitchd.log", *daemon]}


def stop_daemon(pidfile: Path, grace: float = 5.0) -> None:
    """Ask the daemon of `pidfile` to exit over its control socket, as `ovs-appctl exit` (ovs-ctl's stop)
    does: an ovs-vswitchd started again during the cleanup inherited its blocked SIGTERM, and waited out
    a SIGTERM's grace in a TCG guest (2026-11-28). SIGTERM where that fails, SIGKILL after `grace` s. It is
    not our child: its /proc entry says when it has gone."""
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return
    if not unixctl_exit(f"{ovs_rundir()}/{pidfile.stem}.{pid}.ctl"):
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            return
    deadline = time.monotonic() + grace
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.02)
    if os.path.exists(f"/proc/{pid}"):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def unixctl_exit(path: str, timeout: float = 5.0) -> bool:
    """An OVS daemon's `exit` command, JSON-RPC on its control socket; True once it was sent and answered
    (or the daemon hung up, exiting)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(path)
            sock.sendall(json.dumps({"method": "exit", "params": [], "id": 0}).encode())
            sock.recv(4096)
        return True
    except OSError:
        return False


def ensure_tun() -> None:
    """The userspace datapath opens /dev/net/tun for its internal port; a micro-VM's /dev may lack it."""
    tun = Path("/dev/net/tun")
    if tun.exists():
        return
    _run(["modprobe", "-q", "tun"])
    if not tun.exists():
        tun.parent.mkdir(parents=True, exist_ok=True)
        r = _run(["mknod", str(tun), "c", "10", "200"])
        if r.returncode != 0:
            raise ControlPlaneError(f"ovs-user needs /dev/net/tun, which is missing and cannot be made: "
                                    f"{r.stderr.strip()}")


def check_bridges(switches: list[str], log: Path) -> None:
    """Mininet does not notice when ovs-vswitchd fails to instantiate a bridge; OpenFlow does. A bridge that
    answers on its own OpenFlow socket is there (without a process: `ovs-ofctl show` took 0.3 s each in a
    TCG guest); one that does not is asked again by ovs-ofctl, whose error the message quotes."""
    for sw in switches:
        if bridge_answers(sw):
            continue
        r = _run(["ovs-ofctl", "-O", "OpenFlow13", "show", sw], timeout=20)
        if r.returncode != 0:
            tail = ""
            if log.exists():
                errs = [ln for ln in log.read_text(errors="replace").splitlines() if "|ERR|" in ln or "|WARN|" in ln]
                tail = " | ".join(errs[-3:])
            raise ControlPlaneError(f"Open vSwitch did not create switch {sw}: {(r.stderr or r.stdout).strip()[:200]}"
                                    + (f" (ovs-vswitchd: {tail})" if tail else ""))


def bridge_answers(bridge: str) -> bool:
    try:
        BridgeChannel(mgmt_socket(bridge)).close()
        return True
    except (OSError, OpenFlowError):
        return False


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def launch_argv(app: str, port: int, config: Path) -> list[str]:
    return [sys.executable, "-m", "controller.launch", "--port", str(port), "--config", str(config), app]


def launch_env(environ=os.environ, version=sys.version_info) -> dict[str, str]:
    """The controller's environment: the repository on its path; eventlet without its green DNS
    resolver, and before Python 3.12 the standard library's distutils. Both cut os-ken's import, 25-31 s
    in a TCG guest (`python -X importtime`, 2026-11-27): eventlet's greendns imports dnspython and
    requests (4 s there), which a controller on 127.0.0.1 never uses; eventlet 0.30 (Debian 12's)
    imports distutils.version, and in a venv with setuptools `import distutils` goes through setuptools'
    shim, which imports setuptools and pkg_resources (9 s there)."""
    env = {**environ, "PYTHONPATH": str(REPO) + os.pathsep + environ.get("PYTHONPATH", "")}
    env.setdefault("EVENTLET_NO_GREENDNS", "yes")
    if version < (3, 12):   # 3.12 has no distutils of its own, and its eventlet does not import it
        env.setdefault("SETUPTOOLS_USE_DISTUTILS", "stdlib")
    return env


class Controller:
    """One os-ken app process: its config and report live in the results, its log too."""

    def __init__(self, app: str, port: int, config: dict, out_dir: Path, log=print):
        self.app, self.port, self.log = app, port, log
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config_path = self.dir / "config.json"
        self.report_path = self.dir / "report.jsonl"
        self.log_path = self.dir / "controller.log"
        self.config = {**config, "report": str(self.report_path)}
        self.proc: subprocess.Popen | None = None
        self._report_pos = 0

    # os-ken's imports take 20-40 s in a TCG guest with cold caches: 30 s failed a first run of E5 and
    # a user's app in lab 5 (2026-11-23). A controller that fails exits, which is seen at once.
    START_TIMEOUT_S = 120

    def launch(self) -> None:
        """Start the controller's process; wait_listening() waits for its port. Between the two the
        network's build starts OVS: os-ken's imports and OVS's start overlap (about 4 s of a switched
        build under TCG, where both are CPU-bound and the guest has two CPUs)."""
        if port_open(self.port):
            raise ControlPlaneError(f"controller port {self.port} is already in use on 127.0.0.1; "
                                    "stop whatever listens there or set topology.controller.port")
        self.config_path.write_text(json.dumps(self.config, indent=2) + "\n")
        self.report_path.touch()
        logf = open(self.log_path, "ab")
        self.log(f"starting controller {self.app} on 127.0.0.1:{self.port}")
        self.proc = subprocess.Popen(launch_argv(self.app, self.port, self.config_path), cwd=REPO, env=launch_env(),
                                     stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        logf.close()

    def wait_listening(self, timeout: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ControlPlaneError(f"the controller exited at start (code {self.proc.returncode}): "
                                        f"{self.log_tail()}")
            if port_open(self.port):
                return
            time.sleep(0.2)
        raise ControlPlaneError(f"the controller did not open port {self.port} within {timeout:g}s: {self.log_tail()}")

    def check_alive(self, when: str) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise ControlPlaneError(f"the controller ({self.app}) exited with code {self.proc.returncode} {when}; "
                                    f"switches under it forward nothing new. Log: {self.log_path}. "
                                    f"Last lines: {self.log_tail()}")

    def wait_connected(self, switches: list[str], timeout: float = 60) -> None:
        """Every switch under the controller shows is_connected=true in OVS, else a clear error."""
        deadline = time.monotonic() + timeout
        pending = list(switches)
        while pending and time.monotonic() < deadline:
            self.check_alive("while the switches were connecting")
            pending = [s for s in pending if not switch_connected(s)]
            if pending:
                time.sleep(0.3)
        if pending:
            raise ControlPlaneError(f"switch(es) {', '.join(pending)} did not connect to the controller on port "
                                    f"{self.port} within {timeout:g}s. Log: {self.log_path}")

    def new_report_lines(self) -> list[dict]:
        """Report events written since the last call (the app appends JSON lines)."""
        try:
            with open(self.report_path) as f:
                f.seek(self._report_pos)
                text = f.read()
                self._report_pos = f.tell()
        except FileNotFoundError:
            return []
        out = []
        for line in text.splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def log_tail(self, n: int = 6) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").strip().splitlines()
        except FileNotFoundError:
            return "(no log)"
        return " | ".join(lines[-n:]) or "(empty log)"

    def stop(self) -> None:
        if self.proc is not None:
            stop_processes([self.proc], grace=5, group=True)
        self.proc = None


def switch_connected(switch: str) -> bool:
    r = _run(["ovs-vsctl", "--timeout=5", "get", "bridge", switch, "controller"], timeout=10)
    uuids = [u for u in r.stdout.strip().strip("[]").split(",") if u.strip()]
    if r.returncode != 0 or not uuids:
        return False
    for u in uuids:
        c = _run(["ovs-vsctl", "--timeout=5", "get", "controller", u.strip(), "is_connected"], timeout=10)
        if c.stdout.strip() != "true":
            return False
    return True


