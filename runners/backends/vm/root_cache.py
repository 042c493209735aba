"""The micro-VM's root, cached in the guest: the host's root over 9p with `cache=loose`.

virtme-ng mounts the shared root without a cache option, so the guest asks the
host for every lookup and every read again: each Python start reads its modules
anew, and every process start its binary and libraries. Measured in the TCG
guest on 2026-11-24 (kernel 6.1): importing runners.cli took 4.4-5.9 s
uncached and 2.5 s the second time with the cache; `tc qdisc show` 0.13-0.17 s
against 0.10-0.11 s.

The cache never asks the host again, so it is right only while the host's root
does not change under the guest. That holds for a VM that lives for one
run-scenario or one test session, whose inputs exist before it boots and whose
outputs go to shared folders of their own (`--rwdir`, mounted without the
cache). The warm VM lives across the user's edits, so before each job its guest
drops what it cached of files that no process holds (forget_cached_root): each
job then reads the host's files as they are when it starts, and rereads a file
it uses many times (a binary, a library) from the guest's memory.

The guest's initramfs mounts the root with options fixed in virtme-ng
(`virtme.mkinitramfs._MOUNT_ROOT_HOST`). virtme-ng starts `virtme-run` by name
through a shell, so the testbed puts a `virtme-run` of its own first on PATH:
it adds the cache option to that mount and runs virtme-ng's own main(). If a
virtme-ng version words the mount differently, the root stays uncached (a
unit test checks the pinned version). TESTBED_VM_ROOT_CACHE=0 turns it off.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

UNCACHED = "msize=524288 /dev/root"
CACHED = "msize=524288,cache=loose /dev/root"

SHIM = """#!{python}
# virtme-run for a one-shot VM: the guest's root cached (runners/backends/vm/root_cache.py)
import sys
import virtme.mkinitramfs as initramfs
initramfs._MOUNT_ROOT_HOST = initramfs._MOUNT_ROOT_HOST.replace({uncached!r}, {cached!r})
from virtme.commands.run import main
sys.exit(main())
"""


def patchable() -> bool:
    """Whether this virtme-ng mounts the root the way the shim rewrites."""
    try:
        from virtme import mkinitramfs
    except ImportError:
        return False
    return UNCACHED in getattr(mkinitramfs, "_MOUNT_ROOT_HOST", "")


def interpreter(vng: str) -> str | None:
    """The Python that runs virtme-ng (its script's #! line): the shim must import the same virtme."""
    try:
        first = Path(vng).read_bytes()[:256].split(b"\n", 1)[0].decode()
    except (OSError, UnicodeDecodeError):
        return None
    words = first[2:].split() if first.startswith("#!") else []
    return words[0] if len(words) == 1 and os.access(words[0], os.X_OK) else None


def install_shim(folder: Path, env: dict, vng: str) -> bool:
    """Write the shim into `folder` and put it first on env's PATH; False (nothing changed) if this
    virtme-ng cannot be patched, or runs under another Python than this one."""
    if os.environ.get("TESTBED_VM_ROOT_CACHE", "1") == "0":     # to compare, or if it ever misbehaves
        return False
    python = interpreter(vng)
    if python is None or Path(python).parent.resolve() != Path(sys.executable).parent.resolve() or not patchable():
        return False
    folder.mkdir(parents=True, exist_ok=True)
    shim = folder / "virtme-run"
    shim.write_text(SHIM.format(python=python, uncached=UNCACHED, cached=CACHED))
    shim.chmod(0o755)
    env["PATH"] = f"{folder}{os.pathsep}{env.get('PATH', '')}"
    return True


def root_is_cached(mounts: str | None = None) -> bool:
    """In a guest: whether / is the 9p root with a cache (6.1 shows `loose`; newer kernels `cache=<flags>`)."""
    if mounts is None:
        try:
            mounts = Path("/proc/mounts").read_text()
        except OSError:
            return False
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[1] == "/" and fields[2] == "9p":
            options = fields[3].split(",")
            return "loose" in options or any(o.startswith("cache=") and o not in ("cache=none", "cache=0")
                                             for o in options)
    return False


def forget_cached_root(mounts: str | None = None, drop_caches: Path = Path("/proc/sys/vm/drop_caches")) -> bool:
    """In a long-lived guest with a cached root (the warm VM), before each job: drop what the guest
    cached of files no process holds, so the job reads the host's files as they are now. True if done."""
    if not root_is_cached(mounts):
        return False
    drop_caches.write_text("3\n")
    return True
