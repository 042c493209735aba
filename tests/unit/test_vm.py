"""VM backend planning: command line, quoting and kernel choice (no VM is booted)."""
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from scenarios.spec.kernel import release_version, satisfies

from runners.backends.vm import boot as vm, kernels as kernel_images


def test_vng_argv_quotes_guest_command(tmp_path, monkeypatch):
    kernel = tmp_path / "vmlinuz-6.1.0-56-amd64"
    kernel.write_text("")
    monkeypatch.setattr(vm, "kvm_usable", lambda: (False, "no usable /dev/kvm"))
    plan = vm.plan_vm(["/venv/python", "-m", "runners.cli", "/r/my dir/scenario.yaml"], [tmp_path], kernel=kernel,
                      cpus=2)
    argv = plan.vng_argv("vng", tmp_path / "cmd")
    assert argv[:3] == ["vng", "--run", str(kernel)] and "--disable-kvm" in argv
    assert argv[argv.index("--rwdir") + 1] == str(tmp_path)
    rules = vm.udev_rule_dir()     # the command's folder is seen there (where the host has one)
    seen_as = rules or str(tmp_path / "cmd")
    assert argv[argv.index("--rodir") + 1] == (f"{rules}={tmp_path / 'cmd'}" if rules else seen_as)
    assert shlex.split(argv[argv.index("--exec") + 1]) == ["sh", f"{seen_as}/{vm.GUEST_SCRIPT}"]
    script = plan.guest_script()
    assert shlex.split(script)[-4:] == ["/venv/python", "-m", "runners.cli", "/r/my dir/scenario.yaml"]


def test_the_guest_sees_only_the_udev_rule_that_names_its_command_ports(tmp_path, monkeypatch):
    """The host's rules made the guest's udev coldplug take 2.6 s of a 6.6 s boot under TCG. The command's
    folder is shared as the rules' folder: a folder of its own would cost 3 of the guest's boot parameters."""
    usr_lib, lib = tmp_path / "usr-lib", tmp_path / "lib"
    monkeypatch.setattr(vm, "UDEV_RULE_DIRS", (str(usr_lib), str(lib)))
    assert vm.udev_rule_dir() is None
    lib.mkdir()
    assert vm.udev_rule_dir() == str(lib)
    usr_lib.mkdir()
    assert vm.udev_rule_dir() == str(usr_lib)               # a merged /usr, or the first found
    (lib / "50-udev-default.rules").write_text("")
    assert vm.udev_rule_dir() == str(lib)                   # not merged: where udev's own rules are
    kernel = tmp_path / "vmlinuz-6.1.0-56-amd64"
    kernel.write_text("")
    monkeypatch.setattr(vm, "kvm_usable", lambda: (False, "no usable /dev/kvm"))
    plan = vm.plan_vm(["true"], [], kernel=kernel)
    (tmp_path / "cmd").mkdir()
    plan.write_guest_files(tmp_path / "cmd")
    rules = (tmp_path / "cmd" / vm.UDEV_RULES_FILE).read_text()
    assert rules == vm.GUEST_UDEV_RULES and 'SYMLINK+="virtio-ports/$attr{name}"' in rules
    assert (tmp_path / "cmd" / vm.GUEST_SCRIPT).read_text() == plan.guest_script()
    argv = plan.vng_argv("vng", tmp_path / "cmd")
    assert f"{lib}={tmp_path / 'cmd'}" in argv and argv[-1] == f"sh {lib / vm.GUEST_SCRIPT}"
    # the folder's name stays on qemu's command line, where a killed run's orphaned VM is recognised
    assert argv[argv.index("--append") + 1] == f"testbed.cmd={tmp_path / 'cmd'}"
    monkeypatch.setattr(vm, "UDEV_RULE_DIRS", ())           # no rules on the host: the folder as it is
    argv = plan.vng_argv("vng", tmp_path / "cmd")
    assert str(tmp_path / "cmd") in argv and argv[-1] == f"sh {tmp_path / 'cmd' / vm.GUEST_SCRIPT}"
    assert "--append" not in argv


def test_with_modules_the_command_folder_is_seen_where_it_is(tmp_path, monkeypatch):
    """virtme-ng links the guest's /lib/modules/RELEASE to the staged root in the command's folder by its own
    path: shared as the udev rules' folder instead, a warm VM's (under /run, a tmpfs in the guest) would
    have had no modules."""
    monkeypatch.setattr(vm, "UDEV_RULE_DIRS", (str(tmp_path),))
    kernel = tmp_path / "vmlinuz-6.1.0-56-amd64"
    kernel.write_text("")
    mods = tmp_path / "mods" / "lib" / "modules" / "6.1.0-56-amd64"
    mods.mkdir(parents=True)
    (mods / "modules.order").write_text("")
    monkeypatch.setattr(vm, "kvm_usable", lambda: (False, "no usable /dev/kvm"))
    monkeypatch.setattr(vm, "kernel_release", lambda k: "6.1.0-56-amd64")
    plan = vm.plan_vm(["true"], [], kernel=kernel, modules=tmp_path / "mods")
    (tmp_path / "cmd").mkdir()
    argv = plan.vng_argv("vng", tmp_path / "cmd")
    assert argv[argv.index("--run") + 1] == str(tmp_path / "cmd" / "kernel-root" / "boot" / "vmlinuz-6.1.0-56-amd64")
    assert str(tmp_path / "cmd") in argv and argv[-1] == f"sh {tmp_path / 'cmd' / vm.GUEST_SCRIPT}"
    assert not any(a.startswith(f"{tmp_path}=") for a in argv)


def test_a_long_guest_command_stays_off_the_kernel_command_line(tmp_path, monkeypatch):
    """x86 cuts the kernel command line at 2048 bytes; a cut --exec hung the guest at boot."""
    kernel = tmp_path / "vmlinuz-6.1.0-56-amd64"
    kernel.write_text("")
    monkeypatch.setattr(vm, "kvm_usable", lambda: (False, "no usable /dev/kvm"))
    ids = [f"tests/integration/test_x.py::test_number_{i}_with_a_long_descriptive_name" for i in range(60)]
    plan = vm.plan_vm(["python", "-m", "pytest", *ids], [tmp_path], kernel=kernel)
    argv = plan.vng_argv("vng", tmp_path)
    assert len(argv[argv.index("--exec") + 1]) < 100 and sum(len(a) for a in argv) < 2048
    assert all(i in plan.guest_script() for i in ids)


def test_kvm_is_used_when_usable(tmp_path, monkeypatch):
    kernel = tmp_path / "vmlinuz-x"
    kernel.write_text("")
    monkeypatch.setattr(vm, "kvm_usable", lambda: (True, "KVM"))
    assert "--disable-kvm" not in vm.plan_vm(["true"], [], kernel=kernel).vng_argv("vng", tmp_path)


def test_tcg_emulates_a_baseline_cpu_which_the_user_may_override(tmp_path, monkeypatch):
    """`-cpu max` made the guest's network stack 3-5x slower under TCG (vm.TCG_CPU_MODEL); KVM keeps the host's."""
    kernel = tmp_path / "vmlinuz-x"
    kernel.write_text("")
    monkeypatch.delenv("TESTBED_VM_CPU", raising=False)
    monkeypatch.setattr(vm, "kvm_usable", lambda: (False, "no usable /dev/kvm"))
    plan = vm.plan_vm(["true"], [], kernel=kernel)
    assert f"--qemu-opts=-cpu {vm.TCG_CPU_MODEL}" in plan.vng_argv("vng", tmp_path)
    assert plan.cpu_model.startswith("qemu64,") and "+sse4.2" in plan.cpu_model     # x86-64-v2: numpy 2.4 needs it
    monkeypatch.setenv("TESTBED_VM_CPU", "Nehalem,+avx")
    assert "--qemu-opts=-cpu Nehalem,+avx" in vm.plan_vm(["true"], [], kernel=kernel).vng_argv("vng", tmp_path)
    monkeypatch.setenv("TESTBED_VM_CPU", "max -device evil")     # would add qemu options: refused
    with pytest.raises(vm.VmError, match="TESTBED_VM_CPU"):
        vm.plan_vm(["true"], [], kernel=kernel)
    monkeypatch.setattr(vm, "kvm_usable", lambda: (True, "KVM"))
    kvm_plan = vm.plan_vm(["true"], [], kernel=kernel)
    assert kvm_plan.cpu_model is None and not any(a.startswith("--qemu-opts") for a in kvm_plan.vng_argv("vng", tmp_path))


def test_missing_kernel_is_a_clear_error(tmp_path):
    with pytest.raises(vm.VmError, match="no such kernel image"):
        vm.plan_vm(["true"], [], kernel=tmp_path / "nope")


def test_kernel_versions_sort_numerically():
    names = ["vmlinuz-6.12.9+bpo-amd64", "vmlinuz-6.1.0-56-amd64", "vmlinuz-6.9.1"]
    assert [p.name for p in sorted(map(Path, names), key=kernel_images._version_key)] == [
        "vmlinuz-6.1.0-56-amd64", "vmlinuz-6.9.1", "vmlinuz-6.12.9+bpo-amd64"]


def test_kernel_requirements(monkeypatch, tmp_path):
    from runners.backends.vm import boot as vm
    assert satisfies("6.12.95+deb12-amd64", ">=6.12") and not satisfies("6.1.0-56-amd64", ">=6.12")
    assert satisfies("6.1.0-56-amd64", "<6.12") and satisfies("6.1.0-56-amd64", "==6.1")
    assert release_version("6.12.95+deb12-amd64") == (6, 12, 95)
    kernels = [tmp_path / "vmlinuz-6.1.0-56-amd64", tmp_path / "vmlinuz-6.12.95+deb12-amd64"]
    for k in kernels:
        k.write_text("")
    monkeypatch.setattr(vm, "find_kernels", lambda: kernels)
    monkeypatch.setattr(vm, "is_backport", lambda k: "6.12" in k.name)
    assert vm.default_kernel() == kernels[0]          # the distribution's kernel unless asked
    assert vm.default_kernel(">=6.12") == kernels[1]
    assert vm.default_kernel("<6.12") == kernels[0]
    with pytest.raises(vm.VmError, match=r"requires.kernel >=7: no kernel in /boot meets it \(installed: "
                                         r"6.1.0-56-amd64, 6.12.95\+deb12-amd64\)"):
        vm.default_kernel(">=7")
    with pytest.raises(vm.VmError, match="does not meet the scenario's requires.kernel >=6.12"):
        vm.plan_vm(["true"], [], kernel=kernels[0], requirement=">=6.12")


def test_whether_an_image_came_from_backports_is_asked_once_per_image_and_change(tmp_path, monkeypatch):
    """A run with the VM backend chooses its kernel 3 times: two dpkg-query processes per image each time
    took 0.5 s of the host's."""
    image = tmp_path / "vmlinuz-6.12.95+deb12-amd64"
    image.write_text("")
    asked = []
    monkeypatch.setattr(vm, "DPKG_DB", tmp_path / "no-dpkg")   # dpkg's files do not say: dpkg-query is asked

    def dpkg_query(argv, **kw):
        asked.append(argv[1])
        out = "linux-image-6.12.95+deb12-amd64: " + str(image) if argv[1] == "-S" else "6.12.95-1~bpo12+1"
        return subprocess.CompletedProcess(argv, 0, out, "")
    monkeypatch.setattr(vm.subprocess, "run", dpkg_query)
    assert vm.is_backport(image) and vm.is_backport(image) and asked == ["-S", "-W"]
    time.sleep(0.05)            # past the file system's coarse clock tick
    os.chmod(image, 0o600)      # its inode changed (installed again): asked again
    assert vm.is_backport(image) and asked == ["-S", "-W", "-S", "-W"]
    assert vm.is_backport(tmp_path / "gone") is False and len(asked) == 4

    def timed_out(argv, **kw):
        asked.append("timeout")
        raise subprocess.TimeoutExpired(argv, 10)
    monkeypatch.setattr(vm.subprocess, "run", timed_out)
    time.sleep(0.05)
    os.chmod(image, 0o644)
    assert vm.is_backport(image) is False and vm.is_backport(image) is False
    assert asked[-2:] == ["timeout", "timeout"]     # no answer is kept: asked again


def test_whether_an_image_came_from_backports_is_read_from_dpkgs_files_without_a_process(tmp_path, monkeypatch):
    db = tmp_path / "dpkg"
    (db / "info").mkdir(parents=True)
    status = []
    for release, version, state in (("6.12.95+deb12-amd64", "6.12.95-1~bpo12+1", "install ok installed"),
                                    ("6.1.0-56-amd64", "6.1.192-2", "install ok installed"),
                                    ("6.1.0-55-amd64", "6.1.190-1", "deinstall ok config-files")):
        (db / "info" / f"linux-image-{release}.list").write_text(f"/.\n/boot\n/boot/vmlinuz-{release}\n")
        status.append(f"Package: linux-image-{release}\nStatus: {state}\nPriority: optional\n"
                      f"Version: {version}\nDescription: Linux {release}\n with a continued line: here\n")
    (db / "info" / "linux-image-6.13.0-1-amd64-unsigned.list").write_text("/boot/vmlinuz-6.13.0-1-amd64\n")
    status.append("Package: linux-image-6.13.0-1-amd64-unsigned\nStatus: install ok installed\nVersion: 6.13.2-1~bpo12+1\n")
    (db / "status").write_text("\n".join(status))
    assert vm.dpkg_version_of("/boot/vmlinuz-6.12.95+deb12-amd64", db) == "6.12.95-1~bpo12+1"
    assert vm.dpkg_version_of("/boot/vmlinuz-6.1.0-56-amd64", db) == "6.1.192-2"
    assert vm.dpkg_version_of("/boot/vmlinuz-6.13.0-1-amd64", db) == "6.13.2-1~bpo12+1"   # the -unsigned build
    assert vm.dpkg_version_of("/boot/vmlinuz-6.1.0-55-amd64", db) is None     # removed: dpkg-query decides
    assert vm.dpkg_version_of("/srv/vmlinuz-6.1.0-56-amd64", db) is None      # not the listed file
    assert vm.dpkg_version_of("/boot/vmlinuz-6.2.0-1-amd64", db) is None      # no such package
    (db / "updates").mkdir()
    (db / "updates" / "0001").write_text("Package: linux-image-6.1.0-56-amd64\nStatus: install ok half-configured\n")
    assert vm.dpkg_version_of("/boot/vmlinuz-6.1.0-56-amd64", db) is None     # dpkg is at work: dpkg-query decides
    (db / "updates" / "0001").unlink()
    monkeypatch.setattr(vm, "DPKG_DB", db)
    monkeypatch.setattr(vm.subprocess, "run", lambda *a, **k: pytest.fail("a process was started"))
    for release, bpo in (("6.12.95+deb12-amd64", True), ("6.1.0-56-amd64", False)):
        image = Path(f"/boot/vmlinuz-{release}")
        assert vm._installed_from_backports(str(image), hash((tmp_path, release))) is bpo


def _fake_virtiofsd(path: Path, help_text: str) -> str:
    path.write_text(f"#!/bin/sh\necho '{help_text}'\n")
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize("help_text, force_9p", [
    ("Usage: virtiofsd [OPTIONS] --shared-dir <shared_dir>", False),   # the Rust daemon: virtio-fs is used
    ("usage: virtiofsd [options] -o source=PATH", True),               # Debian 12's C daemon: 9p at once
])
def test_9p_is_forced_unless_a_rust_virtiofsd_is_installed(tmp_path, monkeypatch, help_text, force_9p):
    kernel = tmp_path / "vmlinuz-x"
    kernel.write_text("")
    daemon = _fake_virtiofsd(tmp_path / "virtiofsd", help_text)
    monkeypatch.setattr(vm, "virtiofsd_candidates", lambda: (daemon,))
    monkeypatch.setattr(vm, "kvm_usable", lambda: (False, "TCG"))
    vm.rust_virtiofsd.cache_clear()
    try:
        argv = vm.plan_vm(["true"], [], kernel=kernel).vng_argv("vng", tmp_path)
    finally:
        vm.rust_virtiofsd.cache_clear()
    assert ("--force-9p" in argv) == force_9p


def test_vm_test_shards_balance_recorded_time_and_keep_file_order(tmp_path, monkeypatch):
    from tests import conftest

    durations = tmp_path / "durations.json"
    durations.write_text(json.dumps({"about": "", "seconds": {"t::a": 250, "t::b": 180, "t::c": 130, "t::d": 100}}))
    monkeypatch.setattr(conftest, "DURATIONS", durations)
    parts = conftest.shards(["t::a", "t::b", "t::c", "t::d", "t::new"], 2)
    # longest first to the emptier shard: a | b, c to b's (180 < 250), d to a's (250 < 310), new (60 s,
    # not recorded) to b's (310 < 350)
    assert parts == [["t::a", "t::d"], ["t::b", "t::c", "t::new"]]
    assert conftest.shards(["t::a", "t::b"], 1) == [["t::a", "t::b"]]
    assert conftest.shards(["t::a"], 3) == [["t::a"]]


def test_vm_test_shards_run_side_by_side_with_their_output_marked(tmp_path, capsys):
    from tests import conftest

    def argv_of(junit, part):
        code = "import sys, time; time.sleep(1); print('ran', *sys.argv[1:]); sys.exit(len(sys.argv) - 1)"
        return [sys.executable, "-c", code, *part]
    t0 = time.monotonic()
    codes, terminated = conftest.run_shards([["x", "y"], ["z"]], tmp_path, argv_of)
    assert codes == [2, 1] and not terminated and time.monotonic() - t0 < 1.9   # at once, not one after another
    out = capsys.readouterr().out.splitlines()
    assert sorted(out) == ["[vm1] ran x y", "[vm2] ran z"]


def release_with_modules(modules: Path = Path("/lib/modules")) -> str:
    """The newest kernel release whose modules this machine has (setup.sh installs the VM's kernels), so that
    virtme-ng's --dry-run builds its initramfs as for a real boot. For a release without modules it boots
    without one and its command line differs (rootfstype=, rootflags=, raid=): the release this test named
    until 2026-11-27, 6.12.95+deb12 from bookworm-backports, has none on Debian 13, where the test failed."""
    found = sorted((d.name for d in modules.iterdir() if (d / "modules.dep").exists()), key=release_version) \
        if modules.is_dir() else []
    if not found:
        pytest.skip(f"no kernel's modules in {modules}: virtme-ng's command line would not be a real boot's")
    return found[-1]


def test_the_kernel_command_line_estimates_are_never_short_and_too_many_folders_are_refused(tmp_path, monkeypatch):
    """x86 cuts the kernel command line at 2,048 bytes, and the kernel panics past 32 environment variables
    for init; a guest given either hung or powered off at boot with nothing on the terminal. Every shared
    folder adds its path, ~75 characters and 3 variables: the estimates the plan is checked with must not be
    below what virtme-ng really makes (its --dry-run builds the line without booting), for the warm VM
    (spool, stages, its command folder) with its results and another share."""
    from runners.backends.vm import warm as warmvm

    release = release_with_modules()
    kernel = tmp_path / f"vmlinuz-{release}"
    kernel.write_text("")
    monkeypatch.setattr(vm, "kvm_usable", lambda: (False, "no usable /dev/kvm"))
    slot = warmvm.WarmVm(tmp_path / "run" / f"warm-vm-{release}",
                         stages_dir=tmp_path / "var-tmp" / "warm-stages" / f"warm-vm-{release}")
    shares = [tmp_path / f"results-{i}" for i in range(3)]
    for d in (slot.spool, slot.home / "cmd", *shares):
        d.mkdir(parents=True)
    vng = vm.vng_binary()
    for extra in (0, 2):    # its results' folder and one --share
        plan = warmvm.plan_warm(kernel, "2G", 2, slot, shares[:extra])
        plan.write_guest_files(slot.home / "cmd")
        argv = plan.vng_argv(vng, slot.home / "cmd")
        out = subprocess.run([*argv, "--dry-run"], env=vm.vng_env(vng), capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        words = shlex.split(out.stdout.strip().splitlines()[-1])
        cmdline = words[words.index("-append") + 1]
        assert f"virtme_initmount{2 + extra}=" in cmdline and f"virtme_initmount{3 + extra}=" not in cmdline
        assert len(cmdline) <= vm.cmdline_estimate(argv) <= len(cmdline) + 300
        envs = [w for w in cmdline.split() if "=" in w and "." not in w.split("=")[0]
                and w.split("=")[0] not in ("console", "earlyprintk", "loglevel", "panic", "init")]
        # HOME and TERM first; virtme-ng adds virtme_root_user=1 only for root
        assert vm.init_envs(argv) - (0 if os.geteuid() == 0 else 1) == len(envs) + 2 <= vm.MAX_INIT_ENVS, " ".join(envs)
    with pytest.raises(vm.VmError, match=r"cannot be given 6 shared folders .*results-2.*: they make 34 boot "
                                         r"parameters for its init, over the kernel's 32"):
        warmvm.plan_warm(kernel, "2G", 2, slot, shares).vng_argv(vng, slot.home / "cmd")
    long = tmp_path / ("x" * 250)
    long.mkdir()
    with pytest.raises(vm.VmError, match=r"kernel command line would be about \d+ characters, over x86's 2048"):
        warmvm.plan_warm(kernel, "2G", 2, slot, [long / ("y" * 200), long]).vng_argv(vng, slot.home / "cmd")


def test_modules_that_are_the_roots_own_are_not_staged_again(tmp_path, monkeypatch):
    """`--modules /lib/modules/RELEASE` for an installed kernel: staged, the guest's /lib/modules/RELEASE was a
    link to a link back to itself, and the warm VM's probe found no veth ("Unknown device type")."""
    monkeypatch.setattr(vm, "kernel_release", lambda k: "6.1.0-56-amd64")
    own = tmp_path / "root" / "lib" / "modules" / "6.1.0-56-amd64"
    own.mkdir(parents=True)
    (own / "modules.order").write_text("")
    built = tmp_path / "build" / "lib" / "modules" / "6.1.0-56-amd64"
    built.mkdir(parents=True)
    (built / "modules.order").write_text("")
    kernel = tmp_path / "vmlinuz"
    assert vm.modules_dir(kernel, own, root=tmp_path / "root") is None
    assert vm.modules_dir(kernel, tmp_path / "root", root=tmp_path / "root") is None
    assert vm.modules_dir(kernel, tmp_path / "build", root=tmp_path / "root") == built
