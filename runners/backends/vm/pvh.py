"""The kernel as a TCG guest boots it fastest: decompressed once on the host, entered by its PVH entry point.

A distribution's kernel is a bzImage: a compressed kernel behind a small decompressor that runs in the
guest. Under TCG every instruction of it is emulated, and Debian 12's 6.1 image is xz: measured on
2026-11-27 (2-core machine without KVM, kernel 6.1.0-56), a boot to the guest's command and back took
9.2-9.4 s from the bzImage and 6.4-7.0 s from its decompressed ELF, which qemu loads itself and enters
through the PVH note that Debian's kernels carry (CONFIG_PVH); the zstd 6.12 image gained 0.5 s. On the
host, Python's lzma decompresses the 6.1 image in 0.8 s, once per image: the ELF is cached by the
image's hash.

Anything unexpected (not a bzImage, a compression this host cannot undo, no PVH note, a cache that cannot
be written) boots the bzImage as before: this only ever makes a boot faster. TESTBED_VM_PVH=0 turns it
off.
"""
from __future__ import annotations

import lzma
import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

from runners.backends.vm.kernels import image_digest
from runners.paths import user_cache
from runners.results.store import atomic_write

ELF_MAGIC = b"\x7fELF"
XEN_ELFNOTE_PHYS32_ENTRY = 18     # the PVH entry point's note (include/xen/interface/elfnote.h)
MAX_KERNEL = 512 << 20            # a decompressed kernel larger than this is not one
KEEP = 4                          # decompressed kernels kept in the cache


def kernel_cache(env=os.environ) -> Path:
    """Where decompressed kernels are kept: $XDG_CACHE_HOME/mptcp-testbed/kernels (default ~/.cache)."""
    return user_cache(env) / "kernels"


def bzimage_payload(image: bytes) -> tuple[str, bytes] | None:
    """The compressed kernel inside a bzImage and its format (xz, gzip, zstd, ...), or None if `image`
    is not a bzImage of boot protocol 2.08 or later (the first to say where its payload is)."""
    if len(image) < 0x250 or image[0x202:0x206] != b"HdrS" or struct.unpack_from("<H", image, 0x206)[0] < 0x208:
        return None
    start = ((image[0x1F1] or 4) + 1) * 512           # setup sectors, then the protected-mode code
    offset, length = struct.unpack_from("<II", image, 0x248)
    payload = image[start + offset:start + offset + length]
    if len(payload) != length or length < 16:
        return None
    for fmt, magic in (("xz", b"\xfd7zXZ\x00"), ("gzip", b"\x1f\x8b"), ("zstd", b"\x28\xb5\x2f\xfd")):
        if payload.startswith(magic):
            return fmt, payload
    return "other", payload


def decompress(fmt: str, payload: bytes) -> bytes | None:
    """The payload decompressed, or None when this host cannot (a format without a decompressor here)."""
    try:
        if fmt == "xz":     # the kernel appends its decompressed size after the stream: left unread
            return lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(payload, MAX_KERNEL)
        if fmt == "gzip":
            return zlib.decompressobj(wbits=31).decompress(payload, MAX_KERNEL)
        if fmt == "zstd" and shutil.which("zstd"):
            # the trailing 4 bytes are the decompressed size, not a zstd frame
            out = subprocess.run(["zstd", "-dc"], input=payload[:-4], capture_output=True, timeout=60)
            return out.stdout if out.returncode == 0 and len(out.stdout) <= MAX_KERNEL else None
    except (lzma.LZMAError, zlib.error, OSError, subprocess.TimeoutExpired):
        return None
    return None


def has_pvh_entry(elf: bytes) -> bool:
    """Whether `elf` is a 64-bit little-endian ELF with a Xen PHYS32_ENTRY note (what qemu enters by)."""
    if len(elf) < 64 or elf[:4] != ELF_MAGIC or elf[4] != 2 or elf[5] != 1:
        return False
    phoff, = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    for i in range(phnum):
        at = phoff + i * phentsize
        if at + 56 > len(elf):
            return False
        p_type, = struct.unpack_from("<I", elf, at)
        if p_type != 4:             # PT_NOTE
            continue
        off, size = struct.unpack_from("<QQ", elf, at + 8)[0], struct.unpack_from("<Q", elf, at + 32)[0]
        if _notes_have_pvh(elf[off:off + size]):
            return True
    return False


def _notes_have_pvh(notes: bytes) -> bool:
    at = 0
    while at + 12 <= len(notes):
        namesz, descsz, kind = struct.unpack_from("<III", notes, at)
        name = notes[at + 12:at + 12 + namesz].rstrip(b"\0")
        if name == b"Xen" and kind == XEN_ELFNOTE_PHYS32_ENTRY:
            return True
        at += 12 + _aligned(namesz) + _aligned(descsz)
    return False


def _aligned(n: int) -> int:
    return (n + 3) & ~3


def pvh_kernel(image: Path, cache: Path | None = None) -> Path | None:
    """The decompressed ELF of the bzImage `image`, made once and cached by its hash; None when it cannot
    be made (then the bzImage boots)."""
    if os.environ.get("TESTBED_VM_PVH", "1") == "0":
        return None
    try:
        cached = (cache or kernel_cache()) / f"vmlinux-{image_digest(image)}"
    except OSError:
        return None
    folder = cached.parent
    if _usable(cached):
        try:
            os.utime(cached)        # most recently used: kept by _prune
        except OSError:
            pass
        return cached
    try:
        raw = Path(image).read_bytes()
    except OSError:
        return None
    found = bzimage_payload(raw)
    elf = decompress(*found) if found else None
    if elf is None or not has_pvh_entry(elf):
        return None
    try:
        # fsynced, 0644 (qemu may run as another user than the one who made it), whole or not at all: a crash
        # leaves no cut kernel under the final name, and two boots at once each write their own
        atomic_write(cached, elf)
    except OSError:
        return None
    _prune(folder)
    return cached


def _usable(cached: Path) -> bool:
    """A cached kernel this user can read, still an ELF with its PVH note (else it is made again): one
    truncated, replaced or made unreadable since would make every boot fail."""
    import mmap

    try:
        with open(cached, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as elf:
            return has_pvh_entry(elf)   # reads the headers and notes only, not the whole file
    except (OSError, ValueError):       # missing, unreadable, or empty (mmap refuses 0 bytes)
        return False


def _prune(folder: Path, keep: int = KEEP) -> None:
    """Keep the `keep` kernels used last (60-70 MB each): images replaced by updates go."""
    try:
        kernels = sorted(folder.glob("vmlinux-*"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in kernels[keep:]:
            old.unlink(missing_ok=True)
    except OSError:
        pass
