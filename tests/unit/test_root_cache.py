"""The one-shot VM's cached root: the shim rewrites the pinned virtme-ng's root mount, and only that."""
import os
import subprocess
import sys
from pathlib import Path

from runners.backends import root_cache


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
