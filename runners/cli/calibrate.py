"""`run-scenario calibrate`: measure what this machine reproduces faithfully on a backend and kernel, and
keep it in a calibration file (runners.runset.calibration) that --check, --dry-run and every run compare
their plan with (runners.runset.limits).

The search (runners.runset.calibration_search) runs short probes, each a one-run scenario: natively in
this process, or all of them inside ONE micro-VM boot, whose guest runs `run-scenario calibrate
--in-guest DIR`. Either way each probe runs as the VM's guest runs a set (a job file, no report), in a
fork of a process that imported the testbed once (the warm VM's way: runners.backends.vm.warm_guest), so
that a probe costs its network and its run, not an interpreter's start."""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from runners.console.output import err, info
from runners.errors import EXIT_FAIL, EXIT_INPUT, EXIT_INTERRUPTED, EXIT_OK
from runners.runset import calibration as cal
from runners.runset import calibration_search as search

# of the probes: leaves the boot, the guest's start and the host's part within 10 minutes in the TCG
# micro-VM of this project's CI machine kind (docs/fidelity.md)
DEFAULT_BUDGET_S = 510.0
# the clients' search's share of the budget, against 1 for each count of paths: its probes build up to 17
# hosts and took 17-29 s each, a path probe's 12-15 s (TCG micro-VM, 2026-11-29); with an equal share and
# each limit probed twice it had time for 4 probes, not enough to bisect to one client
HOSTS_SHARE = 1.5
MEASURED = "measured.json"   # what the search found, in the work folder (the guest writes it)

EPILOG = f"""\
what it measures (each probe one job: {search.PROBE_SECONDS:g} s of traffic by default after {search.PROBE_OMIT_S} s left out,
links of {search.PROBE_DELAY_MS:g} ms each way, queues of {search.PROBE_QUEUE} packets):
  - the highest rate of one path, and per path of 2, 4 and 8 disjoint paths at once (a TCP flow on each);
  - the most clients on one switch at --host-rate each (TCP, all at once);
  - the RTT floor's error on the idle paths (the pings before each probe that passed).
  {search.rule()} (with --seconds, runs of that length).

where it goes:
  one file per machine, backend and kernel in $XDG_CACHE_HOME/mptcp-testbed/calibration/ (default
  ~/.cache/...; with sudo, the sudo user's, and owned by that user); the probes' result folders beside it
  in runs/ (the newest of each backend and kernel is kept). --check, --dry-run and every run compare their
  plan with it; --strict-fidelity refuses a plan beyond it.

exit codes: 0 measured and written; 1 the probes could not run; 2 bad command line; 130 Ctrl-C.
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="run-scenario calibrate", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
        description="Measure what this machine reproduces faithfully (the highest rate of 1, 2, 4 and 8 paths "
                    "at once, the most clients at a rate, the delay's error), for one backend and kernel; "
                    "writes a calibration file and prints a table.")
    p.add_argument("--backend", choices=["auto", "native", "vm"], default="auto",
                   help="where to measure (default: auto, where a run would go; a warm VM counts as vm)")
    p.add_argument("--kernel", metavar="KERNEL", help="vm backend: the kernel to boot, as for a run (a release "
                   "prefix such as 6.12, or an image's path; default: the one a run boots)")
    p.add_argument("--vm-memory", default="2G", metavar="SIZE", help="vm backend: guest memory (default: 2G)")
    p.add_argument("--vm-cpus", type=int, metavar="N", help="vm backend: guest CPUs (default: host CPUs, at most 4)")
    p.add_argument("--seconds", type=float, default=search.PROBE_SECONDS, metavar="S",
                   help=f"traffic per probe, after {search.PROBE_OMIT_S} s of TCP's start left out (default: "
                        f"{search.PROBE_SECONDS:g}; 2-30)")
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, metavar="S",
                   help=f"seconds for all the probes, shared among the five searches (the clients' share "
                        f"{HOSTS_SHARE:g} times a path count's); a search out of time keeps the bracket it found "
                        f"(default: {DEFAULT_BUDGET_S:g}, which keeps the whole under 10 min in a TCG micro-VM)")
    p.add_argument("--host-rate", type=float, default=search.HOST_RATE, metavar="MBIT",
                   help=f"each client's rate in the search for the most clients (default: {search.HOST_RATE:g})")
    p.add_argument("--in-guest", metavar="DIR", help=argparse.SUPPRESS)   # the VM's guest: probe into DIR
    return p


def main(argv: list[str]) -> int:
    p = build_parser()
    a = p.parse_args(argv)
    if not 2 <= a.seconds <= 30:
        p.error(f"--seconds must be between 2 and 30 (got {a.seconds:g})")
    if not 30 <= a.budget <= 3600:
        p.error(f"--budget must be between 30 and 3600 seconds (got {a.budget:g})")
    if not 1 <= a.host_rate <= 10000:
        p.error(f"--host-rate must be between 1 and 10000 Mbit/s (got {a.host_rate:g})")
    if a.in_guest:
        return _probe_into(Path(a.in_guest), a)
    t0, host_before = time.monotonic(), _host_cpu()
    where = _where(p, a)
    if isinstance(where, int):
        return where
    backend, kernel, image = where
    work = cal.calibration_dir() / "runs" / f"{cal.machine_id()}-{backend}-{kernel}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    cal.make_folder(work)
    info(f"calibrate: {backend} backend, kernel {kernel}; probes in {work}")
    vm = None
    try:
        if backend == "vm":
            vm = _in_a_vm(a, work, image)
            code, vm = (vm, None) if isinstance(vm, int) else (vm.pop("code"), vm)
        else:
            code = _probe_into(work, a)
    except KeyboardInterrupt:
        err(f"interrupted; the probes so far are in {work}")
        return EXIT_INTERRUPTED
    finally:
        _hand_over(work)
    if code != EXIT_OK or not (work / MEASURED).exists():
        err(f"calibration failed (exit {code}); the probes' folders and logs are in {work}")
        return EXIT_FAIL
    doc = _calibration(json.loads((work / MEASURED).read_text()), backend, kernel, vm, work, time.monotonic() - t0)
    doc["host_cpu"] = _host_load(host_before, _host_cpu())
    target = cal.file_for(backend, kernel)
    cal.write(target, doc)
    _keep_newest_evidence(work)
    print(cal.table(doc), end="", flush=True)
    info(f"calibration: {target} ({doc['seconds']:.0f} s)")
    return EXIT_OK


def _where(p, a):
    """(backend, kernel release, kernel image or None) to calibrate; an exit code after saying why not."""
    from scenarios.spec.loader import parse_scenario

    from runners.backends.choice import choose_backend

    if a.backend == "native" and (a.kernel or a.vm_cpus or a.vm_memory != "2G"):
        p.error("--kernel, --vm-cpus and --vm-memory are for the vm backend (natively: this kernel)")
    # what auto would choose for a run: an MPTCP scenario of two paths, as the benchmark asks it
    probe_scenario = parse_scenario(search.paths_yaml(2, 10, mptcp=True), "calibrate.yaml")
    choice = choose_backend("vm" if a.kernel else a.backend, [probe_scenario])
    if choice.refusal:
        err(choice.refusal)
        return EXIT_FAIL
    if choice.name == "native":
        if os.geteuid() != 0:
            err("calibrate --backend native runs networks in this kernel: run it as root (or with sudo)")
            return EXIT_INPUT
        return "native", platform.release(), None
    if choice.auto_note:
        info(choice.auto_note)
    from runners.backends.vm.boot import VmError, choose_kernel, kernel_release

    try:
        image = choose_kernel(a.kernel, None)
    except VmError as e:
        err(str(e))
        return EXIT_INPUT
    return "vm", kernel_release(image), image


def _in_a_vm(a, work: Path, image: Path) -> dict | int:
    """Every probe in one micro-VM boot: {"code", the VM's facts}, or an exit code."""
    from runners.backends.vm import warm as warmvm
    from runners.backends.vm.boot import VmError, plan_vm, run_in_vm

    guest = [sys.executable, "-m", "runners.cli", "calibrate", "--in-guest", str(work), "--seconds", f"{a.seconds:g}",
             "--budget", f"{a.budget:g}", "--host-rate", f"{a.host_rate:g}"]
    try:
        plan = plan_vm(guest, [work], kernel=image, memory=a.vm_memory, cpus=a.vm_cpus)
    except VmError as e:
        err(str(e))
        return EXIT_FAIL
    if warmvm.running():
        info("calibrate: a warm VM is up and shares this machine's CPUs; `run-scenario vm down` first for "
             "figures of an otherwise idle machine")
    try:
        code = run_in_vm(plan, log=info, silence=300)
    except VmError as e:
        err(str(e))
        return EXIT_FAIL
    return {"code": code, "accel": "kvm" if plan.kvm else "tcg", "accel_reason": plan.accel_reason,
            "cpus": plan.cpus, "memory": plan.memory, "cpu_model": plan.cpu_model, "kernel_image": str(plan.kernel)}


def _calibration(measured: dict, backend: str, kernel: str, vm: dict | None, work: Path, seconds: float) -> dict:
    return {"version": cal.VERSION, "machine": _machine(), "backend": backend, "kernel": kernel, "vm": vm,
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "seconds": round(seconds, 1),
            "rule": search.rule(measured.get("settings", {}).get("probe_seconds", search.PROBE_SECONDS)), **measured, "evidence": str(work)}


def _machine() -> dict:
    model = next((line.split(":", 1)[1].strip() for line in _cpuinfo().splitlines() if line.startswith("model name")), None)
    return {"id": cal.machine_id(), "cpu": model, "cores": os.cpu_count()}


def _host_cpu() -> list[int]:
    """This machine's CPU time so far (/proc/stat's first line: user ... steal), in ticks."""
    try:
        return [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return []


def _host_load(before: list[int], after: list[int]) -> dict:
    """How busy this machine was while it calibrated (a VM's qemu included; other people's work too,
    which makes a calibration read lower) and its hypervisor's steal, as shares of its CPU time."""
    d = [b - a for a, b in zip(before, after)]
    total = sum(d)
    if len(d) < 8 or total <= 0:
        return {}
    return {"busy_pct": round(100 * (total - d[3] - d[4]) / total, 1), "steal_pct": round(100 * d[7] / total, 1),
            "loadavg": [round(x, 2) for x in os.getloadavg()]}


def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def _hand_over(work: Path) -> None:
    """Under sudo, the probes' folders to the sudo user, as result sets are."""
    paths = [work]
    for root, dirs, files in os.walk(work):
        paths += [Path(root) / n for n in dirs + files]
    cal.give_to_user(paths)


def _keep_newest_evidence(work: Path) -> None:
    """The probes' folders of earlier calibrations of the same machine, backend and kernel go: each is
    hundreds of small files, and the calibration file names the newest."""
    prefix = work.name[:-len("20261125T000000Z")]
    for old in work.parent.glob(prefix + "*"):
        if old != work and old.is_dir() and len(old.name) == len(work.name):
            shutil.rmtree(old, ignore_errors=True)


# ---------------------------------------------------------------- the probes (natively, or in the guest)

def _probe_into(work: Path, a) -> int:
    """Run the search here (as root, on this kernel), each probe in its folder of `work`; write what it
    found to work/measured.json."""
    from runners.backends.vm.warm_guest import preload_testbed

    if os.geteuid() != 0:
        err("calibrate: the probes build networks: run as root")
        return EXIT_INPUT
    t0 = time.monotonic()
    preload_testbed()
    info(f"calibrate: testbed loaded in {time.monotonic() - t0:.1f} s; probing for at most {a.budget:.0f} s")
    prober = _Prober(work, a.seconds)
    start = time.monotonic()
    weights = [1.0] * len(cal.PATH_COUNTS) + [HOSTS_SHARE]
    paths: dict[str, dict] = {}
    for i, n in enumerate(cal.PATH_COUNTS):
        # each search may use its share of the budget and whatever the ones before it left
        deadline = start + a.budget * sum(weights[:i + 1]) / sum(weights)
        guess = search.RATE_START if not paths else _next_guess(paths, n)
        paths.update(search.search_paths(prober.paths, [n], prober.out_of_time(deadline), start=guess))
    hosts = search.search_hosts(lambda n: prober.hosts(n, a.host_rate), prober.out_of_time(start + a.budget))
    measured = {"limits": {"paths": paths, "hosts": {**hosts, "rate_mbit": a.host_rate},
                           "delay": search.delay_figures(prober.outcomes)},
                "settings": {"probe_seconds": a.seconds, "delay_ms": search.PROBE_DELAY_MS,
                             "queue": search.PROBE_QUEUE, "budget_s": a.budget, "min_carried": search.MIN_CARRIED},
                "probes": [o.to_dict() for o in prober.outcomes],
                "probing_seconds": round(time.monotonic() - start, 1)}
    from runners.results.store import atomic_write

    atomic_write(work / MEASURED, json.dumps(measured, indent=1) + "\n")
    return EXIT_OK


def _next_guess(paths: dict[str, dict], n: int) -> float:
    """Where the search for `n` paths starts: the aggregate the previous count carried, shared by n."""
    prev = max(int(k) for k in paths)
    b = paths[str(prev)]
    carried = b["value"] if b["value"] is not None else (b["failed_at"] or search.RATE_START) / 2
    return carried * prev / n


class _Prober:
    """Runs probes one at a time and keeps their outcomes and times."""

    def __init__(self, work: Path, seconds: float):
        self.work, self.seconds = work, seconds
        self.outcomes: list[search.Outcome] = []

    def out_of_time(self, deadline: float):
        """True when the next probe, taking as long as the longest of the last two, would end after
        `deadline`."""
        def check() -> bool:
            recent = [o.seconds for o in self.outcomes[-2:]] or [self.seconds + 5]
            return time.monotonic() + max(recent) > deadline
        return check

    def paths(self, count: int, rate: float) -> bool:
        return self._run("paths", count, rate, search.paths_yaml(count, rate, self.seconds))

    def hosts(self, clients: int, rate: float) -> bool:
        return self._run("hosts", clients, rate, search.hosts_yaml(clients, rate, self.seconds))

    def _run(self, kind: str, count: int, rate: float, text: str) -> bool:
        from runners.backends.vm.warm_guest import run_job

        n = len(self.outcomes) + 1
        folder = self.work / f"{n:02d}-{kind}-{count}x{rate:g}"
        t0 = time.monotonic()
        job_file, job = _probe_job(folder, text)
        ended = run_job(job_file, job)
        try:
            doc = json.loads((folder / "results.json").read_text())
        except (OSError, ValueError):
            doc = None
        o = search.outcome_of(kind, count, rate, doc, failure=f"exit {ended['code']}: see {job_file.with_suffix('.log')}")
        o.seconds, o.folder = time.monotonic() - t0, folder.name
        self.outcomes.append(o)
        what = f"{count} path{'s' if count > 1 else ''}" if kind == "paths" else f"{count} clients"
        said = (f"reproduced (carried {o.carried_mbps:.4g} Mbit/s, fidelity ok)" if o.passed
                else f"not reproduced: {o.why()}")
        info(f"calibrate: probe {n}: {what} x {rate:g} Mbit/s: {said} [{o.seconds:.0f} s]")
        return o.passed


def _probe_job(folder: Path, text: str) -> tuple[Path, dict]:
    """A probe's folder, with its scenario and the job a warm guest runs (`run-scenario` with a guest job
    file: the set natively, without its report): the job's file and what it holds."""
    from runners.backends.vm.guest import guest_command, write_job
    from runners.cli.run import build_parser
    from runners.runset.options import RunOptions

    folder.mkdir(parents=True)
    scenario = folder / "scenario.yaml"
    scenario.write_text(text)
    args = build_parser().parse_args([str(scenario), "--backend", "native"])
    args.capture_spec, args.argv, args.started_at, args.process_age = None, [], 0.0, 0.0
    job = write_job(RunOptions.from_args(args), SimpleNamespace(file=str(scenario)), folder)
    job_file, probe = folder / "probe.json", {"argv": guest_command(folder, job)[3:]}
    job_file.write_text(json.dumps(probe) + "\n")
    return job_file, probe
