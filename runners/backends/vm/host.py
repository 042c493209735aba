"""The VM backend's host side: `run_set` boots one guest (or uses the warm VM) for the set, or one per
kernel of a kernel sweep, into one result folder; then adds what only the host knows to metadata.json
(the VM, the boot's time, the tools) and writes the summary and report."""
from __future__ import annotations

import dataclasses
import json
import os
import platform
import threading
import time
from pathlib import Path

from scenarios.spec.kernel import is_kernel_path

from runners.analysis.report import summary_and_report
from runners.backends import probe_cache
from runners.backends.vm.guest import guest_command, write_job
from runners.backends.vm.kernel_sets import kernel_base, kernel_sweep, record_kernel, sweeps_kernels
from runners.console.output import err, info
from runners.errors import (EXIT_FAIL, EXIT_INPUT, EXIT_INTERRUPTED, EXIT_KERNEL_REFUSED, EXIT_OK, EXIT_STOPPED,
    EXIT_TERMINATED)
from runners.linux import host_cpu
from runners.results.fidelity import host_contended
from runners.results.metadata import read_metadata_file, userland_metadata
from runners.results.store import runs_on_disk
from runners.runset.jobs import parse_shard


def run_set(options, exp, run_dir: Path, probe=None) -> int:
    """The set in a micro-VM (`probe`: the native probe's report when auto ran one; the guest probes its own)."""
    from runners.results.metadata import command_record, read_metadata, update_metadata
    from runners.results.store import ResultStore
    from runners.console.runlog import RUN_LOG

    ResultStore(run_dir).write_scenario(exp.text)
    update_metadata(run_dir, **command_record(options, exp, read_metadata(run_dir)))   # before the guest: it keeps it
    RUN_LOG.start(run_dir / "run.log")
    info(f"results: {run_dir}")
    if not options.no_report and not options.no_plots:
        _prepare_the_report_meanwhile()
    if sweeps_kernels(exp):
        code = _run_vm_per_kernel(options, exp, run_dir)
    else:
        code = _run_one_vm(options, exp, run_dir, options.kernel[0] if options.kernel else None, exp.scenario.requires.kernel)
    meta_path = run_dir / "metadata.json"
    if code == EXIT_OK and not meta_path.exists():
        err("the VM finished but wrote no results")
        return EXIT_FAIL
    if code not in (EXIT_OK, *EXIT_STOPPED) and not (run_dir / "results.json").exists():
        err(f"the VM run failed (exit {code}) before any run finished")
        if not meta_path.exists():
            _mark_stopped(run_dir, "failed", failure=f"the VM run failed (exit {code}) before any run finished; "
                                                     "its output is above this line on the console")
    if (run_dir / "results.json").exists() and code != EXIT_INPUT:
        code = summary_and_report(run_dir, options, code)
    return code if code in (EXIT_OK, EXIT_FAIL, EXIT_INPUT, *EXIT_STOPPED) else EXIT_FAIL


def _prepare_the_report_meanwhile() -> None:
    """While the guest runs, this process only waits: load matplotlib and draw a first figure now (0.4-0.5 s
    on the host) rather than after the guest is done, when the user waits for the report."""
    def load() -> None:
        try:
            from runners.analysis import plots
            plots.warm_up()
        except Exception:   # the report itself will say what is wrong
            pass

    threading.Thread(target=load, name="report-warm-up", daemon=True).start()


def _run_vm_per_kernel(options, exp, run_dir: Path) -> int:
    """Boot each kernel of the sweep in turn (or use the warm VM that runs it) for its points, all into
    one result set. A kernel that cannot run the scenario is recorded as refused; the others go on."""
    from scenarios.spec.kernel import satisfies

    from runners.backends.vm.kernels import image_release, kernel_groups, resolve_kernel
    from runners.results.metadata import update_metadata

    if kernel_sweep(options):
        update_metadata(run_dir, kernel_sweep=kernel_sweep(options))
    from scenarios.spec.sweep import shard_points

    requirement, codes = exp.scenario.requires.kernel, []
    shard = parse_shard(options.shard) if options.shard else None
    for label, points in kernel_groups(shard_points(exp.points, shard)).items():
        image = resolve_kernel(label, kernel_base(exp))
        release = image_release(image)
        if not satisfies(release, requirement):
            why = f"requires.kernel {requirement}: kernel {release} does not meet it"
            record_kernel(run_dir, label, release=release, image=str(image), refused=why)
            info(f"kernel {label}: not run: {why}")
            continue
        info(f"kernel {label} ({release}): {len(points)} point(s)")
        code = _run_one_vm(dataclasses.replace(options, only_kernel=label), exp, run_dir, image, None)
        if code in EXIT_STOPPED:
            return code
        if code != EXIT_KERNEL_REFUSED:
            codes.append(code)
    if codes and not any(codes) and options.until_conclusive:
        code = _more_rounds_across_kernels(options, exp, run_dir)
        if code in EXIT_STOPPED:
            return code
        codes.append(code)
    if not codes:
        err("no kernel of the sweep could run the scenario (see above)")
        _mark_stopped(run_dir, "failed", failure="no kernel of the sweep could run the scenario")
        return EXIT_FAIL
    if any(codes):
        _mark_stopped(run_dir, "failed", failure="a kernel's runs failed (see run.log)")
        return EXIT_FAIL
    return EXIT_OK


def _more_rounds_across_kernels(options, exp, run_dir: Path) -> int:
    """--until-conclusive for checks across kernels: while one is inconclusive, one more repetition of its
    points, a boot (or warm VM job) per kernel, up to --max-repeat. Each guest has already added rounds
    for its own kernel's checks."""
    from runners.analysis.report import make_report
    from runners.backends.vm.kernels import kernel_groups, resolve_kernel

    done = json.loads((run_dir / "results.json").read_text())["runs"]
    rnd = max([int(r["repeat"]) for r in done] + [options.repeat or exp.scenario.runs.repeat])
    while rnd < options.max_repeat:
        pending = make_report(run_dir, plots=False).inconclusive_across_kernels()
        if not pending:
            return EXIT_OK
        rnd += 1
        info(f"until-conclusive: round {rnd} for {len(pending)} point(s) of checks across kernels")
        for label, points in kernel_groups([p for p in exp.points if p.id in pending]).items():
            guest = dataclasses.replace(options, only_kernel=label, only_points=",".join(p.id for p in points),
                                        repeat=rnd)
            code = _run_one_vm(guest, exp, run_dir, resolve_kernel(label, kernel_base(exp)), None)
            if code:
                return code
    return EXIT_OK


def _run_one_vm(options, exp, run_dir: Path, kernel, requirement: str | None) -> int:
    """One guest (booted, or the warm VM) runs the set's points (or one kernel's: options.only_kernel, and
    of those options.only_points), its job written from `options`; the host then adds what only it knows to
    metadata.json. The guest's exit code."""
    from runners.backends.vm.boot import VmError, plan_vm, run_in_vm
    from runners.backends.vm.warm import WarmVmStopped
    from runners.errors import Terminated

    label = options.only_kernel
    try:
        guest = guest_command(run_dir, write_job(options, exp, run_dir))
    except OSError as e:   # the results disk, full or read-only since the set's metadata was written
        err(f"the guest's job could not be written into {run_dir}: {e.strerror or e}")
        return EXIT_FAIL
    # --modules belongs to the kernels given by path (a kernel from /boot has its own in /lib/modules)
    modules = Path(options.modules) if options.modules and (label is None or is_kernel_path(label)) else None
    try:
        plan = plan_vm(guest, [run_dir], kernel=kernel, memory=options.vm_memory, cpus=options.vm_cpus,
                       requirement=requirement, modules=modules)
    except VmError as e:
        err(str(e))
        return EXIT_FAIL
    if options.capture_spec is not None and not plan.kvm:
        info("capture: under TCG every captured packet costs the emulated CPU; rates may come out lower")
    t0, cpu_before = time.time(), host_cpu.snapshot()
    try:
        warm, warm_boot = _usable_warm_vm(plan, options), 0.0
        while True:
            if warm is None:
                before = time.time()
                warm = _boot_warm_vm(plan, options)
                warm_boot = time.time() - before if warm is not None else 0.0
            if warm is None:
                break
            try:
                code = _submit_warm(warm, guest, run_dir, quiet=options.quiet)
                break
            except WarmVmStopped:   # it stopped itself, idle, as the job came: the job did not start
                _forget(warm)
                warm = None
        if warm is None:
            # the probe's answers a guest of this image gave before: about 1 s of the guest's `prepare`
            probe_cache.offer(plan.kernel, run_dir)
            try:
                with host_cpu.recording(run_dir, testbed_roots(None)):   # the guest judges its runs with them
                    code = run_in_vm(plan, log=info, silence=vm_silence_limit(exp), quiet=options.quiet)
            finally:
                probe_cache.adopt(plan.kernel, run_dir)
    except VmError as e:
        err(str(e))
        _mark_stopped(run_dir, "failed", failure=str(e))
        err(f"{runs_on_disk(run_dir)} finished run(s) kept in {run_dir} "
             f"(continue with: run-scenario --resume {run_dir})")
        return EXIT_FAIL
    except (KeyboardInterrupt, Terminated) as e:
        code, status = ((EXIT_TERMINATED, "terminated") if isinstance(e, Terminated)
                        else (EXIT_INTERRUPTED, "interrupted"))
        _mark_stopped(run_dir, status)
        err(f"{status}; finished runs are kept in {run_dir} (continue with: run-scenario --resume {run_dir})")
        return code
    if (run_dir / "metadata.json").exists() and code != EXIT_KERNEL_REFUSED:
        if warm is not None:
            plan = as_booted_by_warm_vm(plan, warm.state() or {})
        cpu = _host_cpu_share(cpu_before, warm)
        code = _host_metadata(run_dir, plan, warm is not None, time.time() - t0, label, warm_boot, cpu) or code
    return code


def _host_cpu_share(before, warm) -> dict | None:
    """How this host's CPUs were shared while the guest ran (runners.linux.host_cpu); said in a line when
    other processes took a real share."""
    after = host_cpu.snapshot()
    got = host_cpu.shares(before, after, testbed_roots(warm)) if before and after else None
    if got and host_contended(got):
        info(f"warning: other processes on this host used {got['others_cores']:g} of its {got['cpus']} CPUs "
             f"while the VM ran (the testbed {got['testbed_cores']:g}): an emulated CPU runs on what is left, "
             f"so rates and delays may fall behind (docs/fidelity.md)")
    return got


def testbed_roots(warm) -> set[int]:
    """The processes whose trees are the testbed's on this host: this one (qemu of a booted VM runs under
    it) and a warm VM's, whose runs go under its own."""
    warm_pid = (warm.state() or {}).get("pid") if warm is not None else None
    return {os.getpid()} | ({warm_pid} if warm_pid is not None else set())


def as_booted_by_warm_vm(plan, state: dict):
    """The plan of the guest that really ran a warm job: its `vm up` chose the CPUs, memory and CPU
    model, not the job's own command line (a job's --vm-cpus does not resize a running guest)."""
    return dataclasses.replace(plan, cpus=state.get("cpus", plan.cpus), memory=state.get("memory", plan.memory),
                               cpu_model=state.get("cpu_model", plan.cpu_model),
                               pvh_kernel=state.get("pvh_kernel", plan.pvh_kernel))


def _host_metadata(run_dir: Path, plan, warm: bool, host_seconds: float, label: str | None,
                   warm_boot: float = 0.0, host_cpu_share: dict | None = None) -> int | None:
    """What only the host knows, added to the guest's metadata.json: the VM, the boot's time, the tools
    (`warm_boot`: this run booted the warm VM it ran in, in so many seconds). EXIT_FAIL when the guest
    found the results disk full (it said why)."""
    from runners.backends.vm.boot import kernel_release
    from runners.results.store import ResultStore
    from runners.runset.session import RESULTS_UNWRITABLE

    store = ResultStore(run_dir)
    store.metadata = read_metadata_file(run_dir)
    phases = dict(store.metadata.get("phases", {}))
    guest_seconds = store.metadata.get("process_seconds")
    if warm:
        # a warm VM's boot (qemu, kernel, the guest's imports and probes) is paid by the run that boots it
        phases["vm_boot_and_exit"] = round(warm_boot, 3)
        phases["warm_vm_job_overhead"] = round(host_seconds - warm_boot - (guest_seconds or 0.0), 3)
    elif guest_seconds is not None:
        # initramfs, qemu, the guest kernel and its init, and the power-off: all but the guest's process
        phases["vm_boot_and_exit"] = round(host_seconds - guest_seconds, 3)
    if store.metadata.get("status") == RESULTS_UNWRITABLE:
        return EXIT_FAIL
    vm = {"kernel_image": str(plan.kernel), "kernel": kernel_release(plan.kernel), "modules": plan.modules,
          "accel": "kvm" if plan.kvm else "tcg", "accel_reason": plan.accel_reason, "cpus": plan.cpus,
          "cpu_model": plan.cpu_model, "pvh_kernel": plan.pvh_kernel,
          "memory": plan.memory, "warm": warm, "wall_seconds_with_boot": round(host_seconds, 2),
          "host_cpu": host_cpu_share}
    store.finish_metadata(backend="vm", vm=vm, host_kernel=platform.release(), phases=phases, **userland_metadata())
    if label is not None:
        record_kernel(run_dir, label, vm=vm, phases=phases)
    return None


def vm_silence_limit(exp) -> float:
    """Seconds a booted guest may print nothing before it is taken as wedged: the guest prints a line as
    each run starts and ends, so the longest run's time, thrice, plus a slow boot and build.
    TESTBED_VM_SILENCE_S sets it (the fault-injection tests use a short one)."""
    from runners.runset.session import run_seconds

    if os.environ.get("TESTBED_VM_SILENCE_S"):
        return float(os.environ["TESTBED_VM_SILENCE_S"])
    return 3 * max(run_seconds(p.scenario) for p in exp.points) + 300


def _mark_stopped(run_dir: Path, status: str, **more) -> None:
    """The guest was stopped before it could say how the set ended: the host says it."""
    from runners.results.store import ResultStore
    meta = run_dir / "metadata.json"
    store = ResultStore(run_dir)
    try:
        store.metadata = read_metadata_file(run_dir) if meta.exists() else {}
        store.finish_metadata(status=status, backend="vm", **more)
    except (OSError, ValueError):
        pass


def _usable_warm_vm(plan, options):
    """The warm VM, when one is up (or was, and is replaced) and can run this job; else None. A warm VM
    runs jobs for any result folder: those it does not share go through a stage (_submit_warm)."""
    from runners.backends.vm import warm as warmvm
    from runners.backends.vm.boot import VmError

    vm = warmvm.for_kernel(plan.kernel)
    if vm is None:
        up = [v.state()["kernel"] for v in warmvm.running()]
        if up:
            info(f"warm VM: runs kernel {', '.join(up)}, this run needs {plan.kernel.name}: booting a VM for it")
        return None
    if vm.health() == "still booting":    # another command boots it: wait for it (warm.booting)
        info("warm VM: another command is booting it; waiting")
        with warmvm.booting(vm):
            pass
    st = vm.state()
    if st is None:
        return None
    problem = vm.problem()
    if problem is not None and vm.stopped_idle():   # it did what it was told: not a failure to report
        _forget(vm)
        return None
    if problem is not None:
        kept = warmvm.keep_console(vm) if "gone" in problem or "wedged" in problem else None
        info(f"warm VM: {problem}; replacing it" + (f" (its console is kept in {kept})" if kept else ""))
        warmvm.stop(vm, log=info)
        try:
            warmvm.up(vm, warmvm.plan_warm(Path(st["kernel_image"]), st["memory"], st["cpus"], vm,
                                           [Path(d) for d in st["rwdirs"] if Path(d) not in (vm.spool, vm.stages)],
                                           Path(st["modules"]) if st.get("modules") else None),
                      keep_seconds=st.get("keep_seconds"), booted_by=st.get("booted_by", "vm up"), reuse=True)
        except VmError as e:
            info(f"warm VM: could not replace it ({e}): booting a VM for this run")
            return None
    _keep_as_asked(vm, options)
    return vm


def _keep_as_asked(vm, options) -> None:
    """A run that names its idle time (--keep-vm, TESTBED_KEEP_VM) sets it for the warm VM it uses."""
    from runners.backends.vm import warm as warmvm
    from runners.backends.vm.keep import ENV, keep_setting

    asked = keep_setting(options.keep_vm, os.environ)
    if asked.why in ("--keep-vm", ENV) and asked.seconds > 0:
        warmvm.set_keep(vm, asked.seconds)


def _forget(vm) -> None:
    """A warm VM that stopped itself: its state cleared (and what its stages kept moved out), quietly."""
    from runners.backends.vm import warm as warmvm

    warmvm.stop(vm, log=lambda m: None)


def _boot_warm_vm(plan, options):
    """No warm VM runs this kernel: boot this run's guest as one and leave it up for the next runs, for
    --keep-vm's idle time (default 10 min; none with --keep-vm 0s, TESTBED_KEEP_VM=0, under CI). None
    when none is kept (or it could not boot): the run boots a VM of its own, as before."""
    from runners.backends.vm import warm as warmvm
    from runners.backends.vm.boot import VmError
    from runners.backends.vm.keep import describe, keep_setting
    from runners.paths import RESULTS

    keep = keep_setting(options.keep_vm, os.environ)
    if keep.seconds <= 0:
        return None
    vm = warmvm.slot_for(plan.kernel)
    vm.home.mkdir(parents=True, exist_ok=True)
    shares = []
    try:
        RESULTS.mkdir(parents=True, exist_ok=True)
        shares.append(RESULTS)   # the default results folder is written directly; any other through the spool
    except OSError:
        pass
    asked = time.time()
    try:
        st = warmvm.up(vm, warmvm.plan_warm(plan.kernel, plan.memory, plan.cpus, vm, shares,
                                            Path(plan.modules) if plan.modules else None),
                       log=info, keep_seconds=keep.seconds, booted_by="run", reuse=True)
    except VmError as e:
        info(f"warm VM: could not boot one ({e}): booting a VM for this run only")
        warmvm.stop(vm, log=lambda m: None)
        return None
    except BaseException:   # Ctrl-C or SIGTERM during its boot: the user wants nothing left running
        warmvm.stop(vm, log=lambda m: None)
        raise
    if st["started"] >= asked:    # booted here, not by another command meanwhile
        info(f"warm VM: left up for the next runs; it stops after {describe(keep.seconds)} without one "
             "(now: `run-scenario vm down`; never kept: --keep-vm 0s)")
    return vm


class _QuietGuest:
    """-q with a warm VM: the job's errors and warnings on the console, every line in run.log."""

    def __init__(self):
        self.partial = ""

    def write(self, text: str) -> None:
        from runners.backends.vm.boot import loud
        from runners.console.runlog import RUN_LOG

        *lines, self.partial = (self.partial + text).split("\n")
        for line in lines:
            if loud(line):
                print(line, flush=True)
            else:
                RUN_LOG.note(line)

    def flush(self) -> None:
        pass


def _submit_warm(vm, guest_argv: list[str], run_dir: Path, quiet: bool = False) -> int:
    """The job in the warm VM. A result folder it does not share gets a stage (WarmVm.stages), seen by
    the job at the folder's own path and moved into the folder run by run (runners.backends.vm.spool_out)."""
    from runners.backends.vm import warm as warmvm
    from runners.backends.vm.spool_out import Stage

    info("warm VM: running the job without a boot")
    job_id = warmvm.new_job_id()
    stage = mover = None
    if not vm.shares(run_dir):
        stage = Stage.create(vm.stages, job_id, run_dir)
        stage.seed()
        mover = _Mover(stage)
    try:
        # drop `python -m runners.cli`: the guest calls its main(); the host's CPU rows go where it writes
        with host_cpu.recording(stage.files if stage else run_dir, testbed_roots(vm)):
            code = warmvm.submit(vm, guest_argv[3:], out=_QuietGuest() if quiet else None, job_id=job_id,
                                 mounts=[(stage.files, Path(run_dir).resolve())] if stage else [],
                                 on_poll=mover.poll if mover else None)
    except warmvm.WarmVmStopped:
        raise
    except warmvm.WarmVmGone as e:
        err(str(e))
        code = EXIT_FAIL
    finally:
        if mover is not None:
            mover.finish()
    return EXIT_FAIL if mover is not None and mover.failed else code


class _Mover:
    """The stage's moves while the job runs and after it; a folder that cannot take them (full, read-only,
    removed) is said once, and the job goes on: what it writes stays in the stage for salvage."""

    def __init__(self, stage):
        self.stage, self.failed = stage, False
        self.target = stage.target

    def poll(self) -> None:
        if not self.failed:
            try:
                self.stage.poll()
            except OSError as e:
                self._say(e)

    def finish(self) -> None:
        if self.failed or not self.stage.home.exists():   # gone: a warm VM that died was stopped, which salvaged it
            return
        try:
            self.stage.finish()
        except OSError as e:
            self._say(e)

    def _say(self, e: OSError) -> None:
        self.failed = True
        err(f"warm VM: the results cannot be moved into {self.target} ({e.strerror or e}); they are kept in "
            f"{self.stage.files} and moved there by `run-scenario --resume {self.target}` or when the warm "
            "VM stops")
