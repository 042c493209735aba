"""The one-shot VM's cached root: the shim rewrites the pinned virtme-ng's root mount, and only that."""
import os
import subprocess
import sys
from pathlib import Path

from runners.backends.vm import root_cache


def fake_vng(tmp_path: Path, python: str) -> str:
    vng = tmp_path / "vng"
    vng.write_text(f"#!{python}\nprint('vng')\n")
    vng.chmod(0o755)
    return str(vng)


def test_the_pinned_virtme_ng_mounts_the_root_the_way_the_shim_rewrites():
    from virtme import mkinitramfs
    assert root_cache.patchable()
    assert mkinitramfs._MOUNT_ROOT_HOST.count(root_cache.UNCACHED) == 1


def test_the_shim_adds_the_cache_option_to_the_root_mount_only(tmp_path):
    env = {"PATH": "/usr/bin:/bin"}
    assert root_cache.install_shim(tmp_path / "bin", env, fake_vng(tmp_path, sys.executable))
    shim = tmp_path / "bin" / "virtme-run"
    assert env["PATH"] == f"{tmp_path / 'bin'}:/usr/bin:/bin" and os.access(shim, os.X_OK)
    assert shim.read_text().startswith(f"#!{sys.executable}\n")
    # the shim's patch, without starting virtme-run: the mount it leaves in the initramfs script
    patch = shim.read_text().split("from virtme.commands.run")[0]
    probe = patch + "print(initramfs._MOUNT_ROOT_HOST)\n"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert root_cache.CACHED in out and root_cache.UNCACHED not in out
    assert "mount -n -t virtiofs" in out      # the rest of the script as virtme-ng wrote it


def test_no_shim_when_turned_off_or_when_virtme_ng_runs_under_another_python(tmp_path, monkeypatch):
    env = {"PATH": "/usr/bin"}
    monkeypatch.setenv("TESTBED_VM_ROOT_CACHE", "0")
    assert not root_cache.install_shim(tmp_path / "off", env, fake_vng(tmp_path, sys.executable))
    monkeypatch.delenv("TESTBED_VM_ROOT_CACHE")
    other = tmp_path / "other" / "python3"
    other.parent.mkdir()
    other.symlink_to(sys.executable)
    assert not root_cache.install_shim(tmp_path / "other-bin", env, fake_vng(tmp_path, str(other)))
    assert env == {"PATH": "/usr/bin"} and not (tmp_path / "off").exists() and not (tmp_path / "other-bin").exists()


GUEST_61 = """/dev/root / 9p ro,dirsync,relatime,loose,access=any,msize=512000,trans=virtio 0 0
proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0
results /work/main/results 9p rw,relatime,access=any,msize=512000,trans=virtio 0 0
"""
UNCACHED_61 = GUEST_61.replace("relatime,loose,", "relatime,")
NEWER = GUEST_61.replace("relatime,loose,", "relatime,cache=f,")
HOST = "/dev/vda1 / ext4 rw,relatime,discard 0 0\n"


def test_the_guest_knows_whether_its_root_is_cached():
    assert root_cache.root_is_cached(GUEST_61) and root_cache.root_is_cached(NEWER)
    assert not root_cache.root_is_cached(UNCACHED_61)
    assert not root_cache.root_is_cached(HOST)
    assert not root_cache.root_is_cached(UNCACHED_61.replace("relatime,access", "relatime,cache=none,access"))


def test_before_each_job_a_cached_root_is_forgotten_and_nothing_else_is_touched(tmp_path):
    knob = tmp_path / "drop_caches"
    assert root_cache.forget_cached_root(GUEST_61, knob) and knob.read_text() == "3\n"
    knob.unlink()
    assert not root_cache.forget_cached_root(UNCACHED_61, knob) and not knob.exists()
    assert not root_cache.forget_cached_root(HOST, knob) and not knob.exists()
