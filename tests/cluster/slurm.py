"""A one-node Slurm cluster in a folder of its own: munged, slurmctld and slurmd (Debian's munge and slurm-wlm).

Everything is in the folder: slurm.conf, a fresh munge key and socket, state, spool, pid and log files. The
daemons listen on two free ports of 127.0.0.1 only (NoInAddrAny, NoCtldInAddrAny), run in the foreground as
children of the test, and are stopped at the end (running jobs cancelled first); then the folder is removed.
The machine's own munge and Slurm (/etc/munge, /etc/slurm, their services) are not touched.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

NODE = "testbed"
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL",
         "DEADLINE"}


class SlurmError(AssertionError):
    """The cluster did not come up or a job did not end as asked (with the daemons' logs' tails)."""


def free_ports(count: int) -> list[int]:
    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def slurm_conf(home: Path, ctld_port: int, slurmd_port: int) -> str:
    host = socket.gethostname().split(".")[0]   # slurmctld runs only where SlurmctldHost names this host
    return f"""\
ClusterName=testbed
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={home}/munge.socket
StateSaveLocation={home}/state
SlurmdSpoolDir={home}/spool
SlurmctldPidFile={home}/slurmctld.pid
SlurmdPidFile={home}/slurmd.pid
SlurmctldLogFile={home}/slurmctld.log
SlurmdLogFile={home}/slurmd.log
# no cgroups, no accounting database: what a one-node cluster in a folder can have
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/builtin
# whole nodes: one task at a time on the one node, since each shard boots a micro-VM that keeps both cores busy
SelectType=select/linear
ReturnToService=2
# ended jobs stay listed by scontrol for an hour, with their exit codes
MinJobAge=3600
NodeName={NODE} NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} State=UNKNOWN
PartitionName=sweep Nodes={NODE} Default=YES MaxTime=INFINITE State=UP
"""


def _raise_terminated(signum, frame):
    raise SystemExit(128 + signum)


class OneNodeSlurm:
    def __init__(self):
        # a short path of its own: munge's socket path must fit a sockaddr_un (108 bytes)
        self.home = Path(tempfile.mkdtemp(prefix="testbed-slurm-"))
        self.conf = self.home / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.daemons: list[subprocess.Popen] = []
        self.jobs: list[str] = []
        self.ports: list[int] = []

    def __enter__(self) -> OneNodeSlurm:
        # SIGTERM (CI's time limit) would end this process and leave the daemons running: raise instead, so
        # that __exit__ stops them
        self._old_term = signal.signal(signal.SIGTERM, _raise_terminated)
        try:
            self.start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.stop()
        finally:
            signal.signal(signal.SIGTERM, self._old_term)

    def start(self) -> None:
        for prog in ("munged", "slurmctld", "slurmd", "sbatch", "scontrol"):
            if not shutil.which(prog):
                raise SlurmError(f"{prog} is not installed (./setup.sh installs munge and slurm-wlm)")
        os.chmod(self.home, 0o700)   # munged refuses a key or socket in a folder others may write to
        for d in ("state", "spool"):
            (self.home / d).mkdir()
        key = self.home / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        self.ports = free_ports(2)
        self.conf.write_text(slurm_conf(self.home, *self.ports))
        h = self.home
        self._daemon(["munged", "-F", "-f", f"--socket={h}/munge.socket", f"--key-file={key}",
                      f"--pid-file={h}/munged.pid", f"--log-file={h}/munged.log", f"--seed-file={h}/munged.seed"])
        self._until(lambda: (h / "munge.socket").exists(), 20, "munged made no socket")
        self._daemon(["slurmctld", "-D", "-f", str(self.conf)])
        self._until(lambda: self._ok(["scontrol", "ping"], "UP"), 30, "slurmctld does not answer scontrol ping")
        self._daemon(["slurmd", "-D", "-f", str(self.conf), "-N", NODE])
        self._until(lambda: self._ok(["sinfo", "-h", "-n", NODE, "-o", "%T"], "idle"), 30,
                    "the node did not become idle")

    def listening(self) -> list[str]:
        """The addresses the cluster's two ports listen on (/proc/net/tcp and tcp6; 127.0.0.1 is 0100007F)."""
        found = []
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            for line in Path(table).read_text().splitlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                addr, port = local.split(":")
                if state == "0A" and int(port, 16) in self.ports:   # 0A: LISTEN
                    found.append(addr)
        return found

    def _daemon(self, argv: list[str]) -> None:
        log = open(self.home / f"{argv[0]}.out", "wb")
        with log:
            self.daemons.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                                 env=self.env))

    def _ok(self, argv: list[str], wanted: str) -> bool:
        r = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=30)
        return r.returncode == 0 and wanted in r.stdout

    def _until(self, ready, seconds: float, why: str) -> None:
        deadline = time.monotonic() + seconds
        while not ready():
            dead = [p.args[0] for p in self.daemons if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise SlurmError(f"{why}{' (' + ', '.join(dead) + ' exited)' if dead else ''}\n{self.logs()}")
            time.sleep(0.3)

    def logs(self, lines: int = 15) -> str:
        out = []
        for f in sorted(self.home.glob("*.log")) + sorted(self.home.glob("*.out")):
            tail = f.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {f.name}\n" + "\n".join(tail))
        return "\n".join(out)

    def sbatch(self, script: Path, cwd: Path, env: dict[str, str]) -> str:
        r = subprocess.run(["sbatch", "--parsable", str(script)], cwd=cwd, capture_output=True, text=True,
                           env={**env, "SLURM_CONF": str(self.conf)}, timeout=60)
        if r.returncode != 0:
            raise SlurmError(f"sbatch exited {r.returncode}: {r.stderr.strip()}\n{self.logs()}")
        self.jobs.append(r.stdout.strip().split(";")[0])
        return self.jobs[-1]

    def tasks(self, job: str) -> list[dict[str, str]]:
        """Every task of an array job, as scontrol shows it (JobState, ExitCode, StartTime, EndTime, ...)."""
        r = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True, env=self.env,
                           timeout=30)
        return [dict(re.findall(r"(\w+)=(\S*)", ln)) for ln in r.stdout.splitlines() if ln.strip()]

    def wait(self, job: str, tasks: int, seconds: float) -> list[dict[str, str]]:
        """The array job's tasks once all `tasks` have ended; SlurmError when they have not within `seconds`."""
        deadline = time.monotonic() + seconds
        while True:
            got = [t for t in self.tasks(job) if t.get("ArrayTaskId", "").isdigit()]
            if len(got) == tasks and all(t["JobState"] in FINAL for t in got):
                return sorted(got, key=lambda t: int(t["ArrayTaskId"]))
            if time.monotonic() > deadline:
                states = ", ".join(f"{t.get('ArrayTaskId')}: {t.get('JobState')}" for t in got)
                raise SlurmError(f"job {job} did not end within {seconds:.0f} s ({states})\n{self.logs()}")
            time.sleep(2)

    def stop(self) -> None:
        """Cancel what still runs (a shard's run-scenario stops its VM on SIGTERM), stop the daemons, and remove
        the folder."""
        try:
            self._stop_daemons()
        finally:
            shutil.rmtree(self.home, ignore_errors=True)

    def _stop_daemons(self) -> None:
        if self.jobs and all(p.poll() is None for p in self.daemons):
            subprocess.run(["scancel", *self.jobs], env=self.env, capture_output=True, timeout=30)
            # Slurm's KillWait (30 s) between SIGTERM and SIGKILL, and some; PENDING, RUNNING, COMPLETING all end
            # in ING, and an ended job in none of them
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and self._ok(["squeue", "-h", "-o", "%T"], "ING"):
                time.sleep(1)
        for p in reversed(self.daemons):   # slurmd, slurmctld, munged: each stops on SIGTERM
            if p.poll() is None:
                p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=30)
