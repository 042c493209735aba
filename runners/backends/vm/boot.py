"""VM backend: boot a micro-VM with virtme-ng and run the native backend inside it.

virtme-ng shares the host's root file system read-only, so the guest runs
this very checkout and venv; the result folder is shared writable
(`--rwdir`), so each finished run lands on the host as soon as it is written.
"""
from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from scenarios.spec.kernel import is_kernel_path, satisfies

from runners.backends.programs import missing_tools
from runners.backends.vm import root_cache
from runners.backends.vm.pvh import pvh_kernel
from runners.backends.vm.kernels import (KernelNotFound, image_release, installed_kernels, modules_for,
    resolve_kernel, stage_image)
from runners.errors import Terminated
from runners.linux.leftovers import VM_SCRIPT_FILE, VM_SCRIPT_PREFIX
from runners.linux.processes import start_reaped, stop_processes
from runners.paths import REPO



GUEST_SCRIPT = VM_SCRIPT_FILE
GUEST_ENV = {
    "TESTBED_IN_VM": "1",
    # Mininet imports distutils; setuptools' replacement for it loads pkg_resources, which reads
    # every installed package's metadata: 9 of the 12 s Mininet's import took in a TCG guest.
    "SETUPTOOLS_USE_DISTUTILS": "stdlib",
    # pydantic looks for plugins in every installed package's entry points when the scenario model's first
    # class is made; the testbed uses none. In a TCG guest the scan took about 0.5 s of the model's import
    # (3.3 s against 2.8 s, `python -X importtime`, kernel 6.1, 2026-11-26).
    "PYDANTIC_DISABLE_PLUGINS": "__all__",
    "PYTHONDONTWRITEBYTECODE": "1",
}
# The CPU qemu emulates under TCG. virtme-ng asks for `-cpu max`, whose extra features cost dearly when
# every instruction is emulated: iperf3 over the guest's loopback moved 960-1460 Mbit/s with `max`,
# 3800-4600 with this x86-64-v2 CPU and 4100-5600 with bare qemu64 (2026-11-23, kernel 6.1, 2 CPUs).
# x86-64-v2, not bare qemu64: numpy 2.4's wheels need it ("Illegal instruction" on qemu64).
# TESTBED_VM_CPU overrides it.
TCG_CPU_MODEL = "qemu64,+ssse3,+sse4.1,+sse4.2,+popcnt,+cx16,+lahf-lm"
PACKAGES = ("runners", "scenarios", "topologies", "controller", "bench", "tests")
# The guest's udev rules: only the one that names virtio-serial ports, through which virtme-ng-init hands the
# guest command its terminal and exit code. The host's rules made udev's coldplug load a driver for every
# emulated device the testbed never uses (SATA, CD-ROM, watchdog, CPU frequency and crypto drivers: powernow_k8
# alone took 2.6 s), rename and re-address network devices, and run helpers for each: 2.6 s of a 6.6 s guest
# boot under TCG with those drivers blacklisted (2026-11-27, kernel 6.1), then again for every veth and OVS
# port a build makes. The modules the testbed uses (netem, veth, openvswitch, ...) the kernel loads on demand,
# without udev; the blacklist of those drivers went with the rules (the same modules load without it).
# The command's folder is shared *as* the distribution's rules folder (udev reads only *.rules there), so the
# rules cost no shared folder of their own: see MAX_INIT_ENVS.
GUEST_UDEV_RULES = 'SUBSYSTEM=="virtio-ports", KERNEL=="vport*", ATTR{name}=="?*", SYMLINK+="virtio-ports/$attr{name}"\n'
UDEV_RULES_FILE = "50-virtio-ports.rules"
UDEV_RULE_DIRS = ("/usr/lib/udev/rules.d", "/lib/udev/rules.d")   # where distributions put theirs


class VmError(RuntimeError):
    """The VM could not be started (no kernel, no virtme-ng, no qemu)."""


def find_kernels() -> list[Path]:
    return installed_kernels()


def is_backport(kernel: Path) -> bool:
    """Installed from a backports suite (Debian version '~bpo')? Such kernels are used only when asked for.
    False when dpkg cannot say (then asked again the next time)."""
    try:
        return _installed_from_backports(str(kernel), Path(kernel).stat().st_ctime_ns)
    except (OSError, subprocess.TimeoutExpired):
        return False


# Asked once per image and inode change (ctime: set when a package unpacks the file; dpkg sets the mtime
# from the package): a run with the VM backend chooses its kernel 3 times (0.5 s of the host's time with
# two dpkg-query processes per image, 2026-11-27; 0.15 s with the cache). Read from dpkg's database where
# Debian's naming finds the package (no process: 0.15 s less of each command, 2026-11-29); else dpkg-query.
# Only definite answers are kept: a dpkg-query that failed to start or timed out raises through the cache.
@functools.lru_cache(maxsize=None)
def _installed_from_backports(kernel: str, _changed: int) -> bool:
    version = dpkg_version_of(kernel)
    if version is not None:
        return "bpo" in version
    pkg = subprocess.run(["dpkg-query", "-S", str(kernel)], capture_output=True, text=True, timeout=10)
    name = pkg.stdout.split(":", 1)[0].strip()
    if pkg.returncode != 0 or not name:
        return False
    ver = subprocess.run(["dpkg-query", "-W", "-f=${Version}", name], capture_output=True, text=True,
                         timeout=10).stdout
    return "bpo" in ver


DPKG_DB = Path("/var/lib/dpkg")


def dpkg_version_of(kernel: str, db: Path | None = None) -> str | None:
    """The version of the package that installed the image `kernel`, from dpkg's own files: the package
    Debian names after the image (linux-image-RELEASE, or its -unsigned build) when its file list holds
    the image, and that package's Version in dpkg's status. None when those files do not say."""
    db = DPKG_DB if db is None else db
    release = Path(kernel).name.removeprefix("vmlinuz-")
    try:
        if any((db / "updates").glob("[0-9]*")):   # dpkg runs or was interrupted: status is not yet all
            return None
        for name in (f"linux-image-{release}", f"linux-image-{release}-unsigned"):
            listed = db / "info" / f"{name}.list"
            if listed.is_file() and kernel in listed.read_text(errors="replace").splitlines():
                return _status_version(db / "status", name)
    except OSError:
        return None
    return None


def _status_version(status: Path, package: str) -> str | None:
    for stanza in status.read_text(errors="replace").split("\n\n"):
        if stanza.lstrip("\n").startswith(f"Package: {package}\n"):
            fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and line[0] != " ")
            installed = fields.get("Status", "").endswith(" installed")
            return fields.get("Version") if installed else None
    return None


def default_kernel(requirement: str | None = None) -> Path:
    """The kernel the VM boots when --kernel is not given.

    With `requires.kernel`: the newest kernel in /boot that meets it. Without:
    the newest distribution (non-backports) kernel, so results stay
    comparable when a backports kernel is installed beside it (6.12 also runs
    about 3x slower than 6.1 under TCG).
    """
    kernels = find_kernels()
    if not kernels:
        raise VmError("no kernel in /boot to boot the VM with (install linux-image-amd64, or pass --kernel)")
    fit = [k for k in kernels if satisfies(kernel_release(k), requirement)]
    if not fit:
        raise VmError(f"requires.kernel {requirement}: no kernel in /boot meets it (installed: "
                      f"{', '.join(kernel_release(k) for k in kernels)}); setup.sh installs 6.12 from "
                      "bookworm-backports on Debian 12, or pass --kernel")
    if requirement:
        return fit[-1]
    stable = [k for k in fit if not is_backport(k)]
    return (stable or fit)[-1]


def kernel_release(kernel: Path) -> str:
    return image_release(kernel)


def kvm_usable() -> tuple[bool, str]:
    """KVM only helps when it can boot a stock kernel: a PVM-only /dev/kvm cannot."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False, "no usable /dev/kvm"
    if Path("/sys/module/kvm_pvm").exists():
        return False, "/dev/kvm is PVM-only (kvm_pvm), which cannot boot a stock kernel"
    flags = Path("/proc/cpuinfo").read_text()
    if not re.search(r"\b(vmx|svm)\b", flags):
        return False, "the CPU exposes no vmx/svm"
    if not (Path("/sys/module/kvm_intel").exists() or Path("/sys/module/kvm_amd").exists()):
        return False, "neither kvm_intel nor kvm_amd is loaded"
    return True, "KVM"


def vng_path() -> str | None:
    here = Path(sys.executable).parent / "vng"
    return str(here) if here.exists() else shutil.which("vng")


def vm_missing() -> list[str]:
    """Everything the VM backend needs on the host that is not there, each with its package."""
    problems = missing_tools("vm")
    if not vng_path():
        problems.append("virtme-ng (`vng`) is not installed in the venv (pip package virtme-ng; run ./setup.sh)")
    return problems


def vng_binary() -> str:
    problems = vm_missing()
    if problems:
        raise VmError("the VM backend cannot start:\n" + "\n".join(f"  - {p}" for p in problems))
    return vng_path()


@dataclass(frozen=True)
class VmPlan:
    kernel: Path
    kvm: bool
    accel_reason: str
    memory: str
    cpus: int
    rwdirs: tuple[str, ...]
    guest_argv: tuple[str, ...]
    modules: str | None = None       # --modules: the kernel's lib/modules/<release> folder
    cpu_model: str | None = None     # the emulated CPU under TCG (tcg_cpu_model); None with KVM: the host's
    pvh_kernel: str | None = None    # `kernel` decompressed, booted in its place under TCG (runners.backends.vm.pvh)

    def guest_script(self) -> str:
        """The guest command as a shell script; every word quoted."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in GUEST_ENV.items())
        return f"cd {shlex.quote(str(REPO))} && export {env} && exec {shlex.join(self.guest_argv)}\n"

    def write_guest_files(self, script_dir: Path) -> None:
        """What the guest reads from `script_dir` (shared read-only): its command and its udev rules."""
        (script_dir / GUEST_SCRIPT).write_text(self.guest_script())
        (script_dir / UDEV_RULES_FILE).write_text(GUEST_UDEV_RULES)

    def vng_argv(self, vng: str, script_dir: Path) -> list[str]:
        """virtme-ng's command line; the guest command is read from `script_dir`/guest.sh.

        virtme-ng passes --exec on the kernel command line, which x86 cuts at
        2048 bytes: a long command (a pytest run of every integration test)
        was cut and the guest hung at boot. A script file keeps it short.
        Each shared folder adds its path there too: VmError when they would not fit.
        """
        argv = [vng, "--run", str(self.boot_image(script_dir)), "--memory", self.memory, "--cpus", str(self.cpus)]
        if not self.kvm:
            argv += ["--disable-kvm", f"--qemu-opts=-cpu {self.cpu_model}"]
        if not rust_virtiofsd():
            argv.append("--force-9p")
        for d in self.rwdirs:
            argv += ["--rwdir", d]
        if self.modules is not None:
            # the guest hides parts of the host's tree under tmpfs (/var/cache, /var/tmp, /var/log, /run):
            # modules kept there must be shared explicitly to be loadable
            argv += ["--rodir", str(Path(self.modules).resolve())]
        # with --modules, virtme-ng links the guest's /lib/modules/RELEASE to the staged root in the command's
        # folder by its own path (boot_image): that folder must then be seen where it is, with the host's rules
        rules = udev_rule_dir() if self.modules is None else None
        seen_as = Path(rules) if rules else script_dir   # where the guest sees the command's folder
        # the folder's name stays on qemu's command line, where a killed run's orphaned VM is recognised
        # (runners.linux.leftovers): a parameter with a dot is the kernel's module parameter, not init's variable
        argv += ["--append", f"testbed.cmd={script_dir}"] if rules else []
        argv += ["--rodir", f"{rules}={script_dir}" if rules else str(script_dir),
                 "--exec", f"sh {shlex.quote(str(seen_as / GUEST_SCRIPT))}"]
        _fits_the_kernel_command_line(argv)
        return argv

    def boot_image(self, script_dir: Path) -> Path:
        """The image virtme-ng boots: the kernel, or with --modules a link to it in a staged root
        (in `script_dir`, which the guest then sees at its own path) beside its modules, where virtme-ng
        looks for them."""
        image = Path(self.pvh_kernel) if self.pvh_kernel else self.kernel
        if self.modules is None:
            return image
        root = script_dir / "kernel-root"
        shutil.rmtree(root, ignore_errors=True)
        return stage_image(image, kernel_release(self.kernel), Path(self.modules), root)


KERNEL_CMDLINE_MAX = 2048
# The kernel hands each parameter it does not know (and without a dot) to init as an environment variable,
# and panics ("Too many boot env vars") past 32 of them, HOME and TERM included. virtme-ng's own are 14
# (virtme-ng 1.42); each shared folder adds 3. A warm VM shares 4 (spool, stages, results, its command).
MAX_INIT_ENVS = 32
VIRTME_INIT_ENVS = 14 + 2
# What virtme-ng puts on the kernel command line besides the shared folders and the working folder
# (virtme_chdir): its own parameters (504 characters with /work/main/.venv's virtme-ng-init, 2026-11-27,
# virtme-ng 1.42), with room for a longer venv path. tests/unit/test_vm.py checks both estimates against
# virtme-ng's --dry-run.
VIRTME_CMDLINE_ALLOWANCE = 700


def shared_folders(argv: list[str]) -> list[str]:
    """The folders a vng command line shares with the guest, as the guest sees them."""
    return [argv[i + 1].split("=", 1)[0] for i, a in enumerate(argv[:-1]) if a in ("--rwdir", "--rodir")]


def cmdline_estimate(argv: list[str]) -> int:
    """At least the length of the kernel command line virtme-ng makes of `argv`: its own parameters, and per
    shared folder `virtme_initmountN=PATH virtme_initmountN_fstype=9p virtme_initmountN_access=rw`."""
    appended = sum(len(argv[i + 1]) + 1 for i, a in enumerate(argv[:-1]) if a == "--append")
    # with --modules: virtme_link_mods=/<the staged root in the command's folder>/lib/modules/RELEASE
    linked = sum(len(a) + 60 for a in argv if "/kernel-root/" in a)
    return (VIRTME_CMDLINE_ALLOWANCE + len(os.getcwd()) + appended + linked
            + sum(len(f) + 3 * len(f"virtme_initmount{i}") + 24 for i, f in enumerate(shared_folders(argv))))


def init_envs(argv: list[str]) -> int:
    """How many environment variables the guest's init gets from the kernel command line."""
    return VIRTME_INIT_ENVS + 3 * len(shared_folders(argv))


def _fits_the_kernel_command_line(argv: list[str]) -> None:
    """A command line cut at its length, or with too many parameters, hangs or panics the guest at boot with
    nothing on the terminal: refuse first, naming the folders."""
    folders = shared_folders(argv)
    need, envs = cmdline_estimate(argv), init_envs(argv)
    if need > KERNEL_CMDLINE_MAX or envs > MAX_INIT_ENVS:
        raise VmError(f"the guest cannot be given {len(folders)} shared folders ({', '.join(folders)}): "
                      + (f"its kernel command line would be about {need} characters, over x86's {KERNEL_CMDLINE_MAX}"
                         if need > KERNEL_CMDLINE_MAX else
                         f"they make {envs} boot parameters for its init, over the kernel's {MAX_INIT_ENVS}")
                      + "; share fewer or shorter ones (`run-scenario vm up --share`, --out)")


def udev_rule_dir() -> str | None:
    """The host's folder of the distribution's udev rules (the guest sees the host's root), or None. On a
    merged-/usr system /lib/udev is /usr/lib/udev; elsewhere the one holding udev's default rules."""
    found = [d for d in UDEV_RULE_DIRS if os.path.isdir(d)]
    with_defaults = [d for d in found if os.path.exists(os.path.join(d, "50-udev-default.rules"))]
    return (with_defaults or found or [None])[0]


VIRTIOFSD_PATHS = ("/usr/libexec/virtiofsd", "/usr/lib/virtiofsd/virtiofsd", "/usr/lib/virtiofsd",
                   "/usr/lib/qemu/virtiofsd")


def virtiofsd_candidates() -> tuple[str | None, ...]:
    """Where virtme-ng looks for virtiofsd."""
    return (shutil.which("virtiofsd"), *VIRTIOFSD_PATHS)


@functools.lru_cache(maxsize=1)
def rust_virtiofsd() -> bool:
    """Whether a virtiofsd that virtme-ng can start is installed (the Rust one: it takes --shared-dir).

    Debian 12's qemu ships the old C virtiofsd at /usr/lib/qemu/virtiofsd. virtme-ng
    accepts it, starts it with options it does not know, and waits 3.1 s for it per
    shared folder before falling back to 9p: 9.3 s of every boot (root, results, script).
    Without a usable one the testbed asks for 9p at once.
    """
    for path in virtiofsd_candidates():
        if path and os.access(path, os.X_OK):
            try:
                out = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                continue
            if "--shared-dir" in out.stdout + out.stderr:
                return True
    return False


def choose_kernel(kernel: Path | str | None, requirement: str | None, base: Path | None = None) -> Path:
    """--kernel (an image's path, or a release prefix such as 6.12), or the default for the scenario's
    requires.kernel; VmError (listing what is installed) when none fits. Called before the result
    folder is made, so a refusal leaves nothing behind."""
    if kernel and not is_kernel_path(str(kernel)) and re.match(r"^\d+(\.\d+)*", str(kernel)) \
            and not Path(kernel).is_file():
        try:
            kernel = resolve_kernel(str(kernel), base)
        except KernelNotFound as e:
            raise VmError(str(e)) from None
    k = Path(kernel) if kernel else default_kernel(requirement)
    if not k.is_file():
        raise VmError(f"--kernel {k}: no such kernel image")
    if not satisfies(kernel_release(k), requirement):
        raise VmError(f"--kernel {k}: release {kernel_release(k)} does not meet the scenario's "
                      f"requires.kernel {requirement}")
    return k


def tcg_cpu_model() -> str:
    """TESTBED_VM_CPU, else TCG_CPU_MODEL; VmError for a value that is not a qemu CPU model."""
    model = os.environ.get("TESTBED_VM_CPU") or TCG_CPU_MODEL
    # it reaches qemu's command line, which virtme-ng splits at spaces: a model name and its flags only
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.,=+-]*", model):
        raise VmError(f"TESTBED_VM_CPU={model!r}: not a qemu CPU model (e.g. qemu64, max, Nehalem,+avx)")
    return model


def plan_vm(guest_argv: list[str], rwdirs: list[Path], kernel: Path | str | None = None,
            memory: str = "2G", cpus: int | None = None, requirement: str | None = None,
            modules: Path | None = None) -> VmPlan:
    vng_binary()   # every missing program named at once, before a kernel is chosen
    k = choose_kernel(kernel, requirement)
    kvm, why = kvm_usable()
    pvh = None if kvm else pvh_kernel(k)    # with KVM the kernel decompresses itself at native speed
    mods = modules_dir(k, modules) if modules is not None else None
    return VmPlan(kernel=k, kvm=kvm, accel_reason=why, memory=memory, cpus=cpus or min(os.cpu_count() or 1, 4),
                  rwdirs=tuple(str(d) for d in rwdirs), guest_argv=tuple(guest_argv),
                  modules=str(mods) if mods else None,
                  cpu_model=None if kvm else tcg_cpu_model(), pvh_kernel=str(pvh) if pvh else None)


def modules_dir(kernel: Path, modules: Path, root: Path = Path("/")) -> Path | None:
    """--modules DIR's folder for this kernel's release; VmError when DIR holds none. None when it is the
    root's own /lib/modules/RELEASE, which the guest has where it looks: staged as well, the guest's
    /lib/modules/RELEASE became a link to a link back to itself, and no module loaded."""
    release = kernel_release(kernel)
    found = modules_for(release, modules)
    if found is None:
        raise VmError(f"--modules {modules}: no modules for kernel {release} there (expected "
                      f"{modules}/lib/modules/{release}, as `make modules_install INSTALL_MOD_PATH={modules}` "
                      f"writes, or {modules}/{release})")
    own = [root / "lib" / "modules" / release, root / "usr" / "lib" / "modules" / release]
    return None if any(found.resolve() == o.resolve() for o in own if o.exists()) else found


def run_in_vm(plan: VmPlan, log=print, timeout: float | None = None, silence: float | None = None,
              quiet: bool = False) -> int:
    """Boot, run, return the guest command's exit code. Ctrl-C, SIGTERM and `timeout` stop qemu too.

    A guest that prints nothing for `silence` seconds is taken as wedged (qemu
    stopped, a hung guest kernel): it is killed and VmError says so. The
    guest's output reaches this process's stdout through a pipe (with `quiet`,
    only its errors and warnings; every line still reaches run.log): given a
    file, qemu would open it again with O_TRUNC at offset 0 and overwrite what
    the host had written there.
    """
    vng = vng_binary()
    compile_bytecode()
    env = vng_env(vng)
    script_dir = Path(tempfile.mkdtemp(prefix=VM_SCRIPT_PREFIX))
    try:
        plan.write_guest_files(script_dir)
        # this VM lives for one command, so its root may be cached (the warm VM's may not)
        cached = root_cache.install_shim(script_dir / "bin", env, vng)
        log(f"booting micro-VM: kernel {kernel_release(plan.kernel)}, "
            f"{'KVM' if plan.kvm else 'TCG (' + plan.accel_reason + f'; CPU {plan.cpu_model})'}, {plan.cpus} CPUs, "
            f"{plan.memory}{', root cached' if cached else ''}{', kernel entered by PVH' if plan.pvh_kernel else ''}")
        return _boot(plan.vng_argv(vng, script_dir), env, log, timeout, silence, quiet)
    finally:
        shutil.rmtree(script_dir, ignore_errors=True)


def vng_env(vng: str) -> dict:
    """virtme-ng's environment: its own folder first on PATH (it calls virtme-run from there)."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(vng).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    env["TESTBED_IN_VM"] = "1"
    return env


def compile_bytecode() -> None:
    """Byte-compile the checkout on the host: the guest sees it read-only and would compile every
    module it imports again on each boot (seconds under TCG)."""
    import compileall

    for pkg in PACKAGES:
        if (REPO / pkg).is_dir() and os.access(REPO / pkg, os.W_OK):
            compileall.compile_dir(REPO / pkg, quiet=1)


def _boot(argv: list[str], env: dict, log, timeout: float | None, silence: float | None,
          quiet: bool = False) -> int:
    proc = start_reaped(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    pump = _OutputPump(proc.stdout, quiet)
    pump.start()

    def stop(signum, frame):
        raise Terminated()   # exit 143, as a native run's SIGTERM (it was turned into a Ctrl-C: 130)
    old_term = signal.signal(signal.SIGTERM, stop)
    ended = None
    try:
        ended = _watch(proc, pump, timeout, silence)
        return proc.returncode
    finally:
        signal.signal(signal.SIGTERM, old_term)
        running = proc.poll() is None
        if running:
            # stopped first, reported after: with `| tee` killed by the same Ctrl-C, printing raises
            # BrokenPipeError, and a report made first left the VM running
            stop_processes([proc], grace=10, group=True)
        pump.join(timeout=5)
        _quietly(log, None if ended else "stopped the micro-VM" if running else None)
        if ended:
            raise VmError(ended)


def _watch(proc, pump: "_OutputPump", timeout: float | None, silence: float | None) -> str | None:
    """Wait for the VM to exit; why it had to be stopped (too long, or silent too long), or None."""
    started = time.monotonic()
    while proc.poll() is None:
        now = time.monotonic()
        if timeout is not None and now - started > timeout:
            return f"the micro-VM did not finish within {timeout:.0f} s; it was stopped"
        if silence is not None and now - pump.last_output > silence:
            return (f"the micro-VM printed nothing for {silence:.0f} s (a wedged guest, or qemu stopped); "
                    "it was stopped")
        time.sleep(0.2)
    return None


LOUD = ("error", "warning", "Traceback", "qemu-system")   # what -q still shows of the guest's output


def loud(line: str) -> bool:
    return any(w in line for w in LOUD)


class _OutputPump(threading.Thread):
    """Forwards the guest's output as it comes (bytes in, text out) and notes when it last came. The
    pipe is drained to the end even when this process's stdout is gone, so qemu never blocks on it."""

    def __init__(self, src, quiet: bool = False):
        super().__init__(daemon=True)
        self.src, self.quiet = src, quiet
        self.last_output = time.monotonic()

    def run(self) -> None:
        out_ok = True
        from runners.console.runlog import RUN_LOG

        for line in iter(self.src.readline, b""):
            self.last_output = time.monotonic()
            if self.quiet and not loud(line.decode(errors="replace")):
                RUN_LOG.note_raw(line.decode(errors="replace"))
                continue
            if out_ok:
                try:
                    sys.stdout.write(line.decode(errors="replace"))
                    sys.stdout.flush()
                except (BrokenPipeError, OSError, ValueError):
                    out_ok = False


def _quietly(log, message: str | None) -> None:
    """Report, unless the terminal is gone."""
    if message:
        try:
            log(message)
        except (BrokenPipeError, OSError):
            pass


