"""The decompressed kernel a TCG guest boots by its PVH entry (runners.backends.vm.pvh), on synthetic images:
a bzImage's header, its payload, the ELF note qemu enters by, the cache, and every way back to the bzImage."""
import gzip
import lzma
import os
import struct

import pytest

from runners.backends.vm import boot as vm, pvh


def elf_with_notes(notes: bytes) -> bytes:
    """A 64-bit little-endian ELF with one PT_NOTE segment holding `notes`."""
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 0x20, 64)            # e_phoff
    struct.pack_into("<HH", header, 0x36, 56, 1)        # e_phentsize, e_phnum
    phdr = bytearray(56)
    struct.pack_into("<I", phdr, 0, 4)                  # PT_NOTE
    struct.pack_into("<Q", phdr, 8, 64 + 56)            # p_offset
    struct.pack_into("<Q", phdr, 32, len(notes))        # p_filesz
    return bytes(header + phdr) + notes


def note(name: bytes, kind: int, desc: bytes) -> bytes:
    pad = lambda b: b + b"\0" * (-len(b) % 4)
    return struct.pack("<III", len(name) + 1, len(desc), kind) + pad(name + b"\0") + pad(desc)


PVH_ELF = elf_with_notes(note(b"Xen", 6, b"linux\0") + note(b"Xen", 18, struct.pack("<Q", 0x1000000)))
PLAIN_ELF = elf_with_notes(note(b"GNU", 3, b"\1" * 20))


def bzimage(payload: bytes, version: int = 0x20F, setup_sects: int = 2) -> bytes:
    """A bzImage: setup sectors, then the protected-mode code whose payload the header points at (and the
    4 bytes of decompressed size the kernel appends to it)."""
    payload += struct.pack("<I", 12345)
    setup = bytearray((setup_sects + 1) * 512)
    setup[0x1F1] = setup_sects
    setup[0x202:0x206] = b"HdrS"
    struct.pack_into("<H", setup, 0x206, version)
    struct.pack_into("<II", setup, 0x248, 100, len(payload))
    return bytes(setup) + b"\x90" * 100 + payload + b"\0" * 64


def test_an_xz_or_gzip_bzimage_is_decompressed_and_cached_by_its_hash(tmp_path, monkeypatch):
    monkeypatch.delenv("TESTBED_VM_PVH", raising=False)
    xz = tmp_path / "vmlinuz-xz"
    xz.write_bytes(bzimage(lzma.compress(PVH_ELF, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC32)))
    gz = tmp_path / "vmlinuz-gz"
    gz.write_bytes(bzimage(gzip.compress(PVH_ELF)))
    cache = tmp_path / "cache"
    made = pvh.pvh_kernel(xz, cache)
    assert made.parent == cache and made.read_bytes() == PVH_ELF
    assert pvh.pvh_kernel(gz, cache).read_bytes() == PVH_ELF and pvh.pvh_kernel(gz, cache) != made
    assert made.stat().st_mode & 0o777 == 0o644     # qemu may run as another user
    made.write_bytes(PVH_ELF + b"cached")           # a second boot reads the cache, not the image
    assert pvh.pvh_kernel(xz, cache).read_bytes() == PVH_ELF + b"cached"
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]     # no temporary file left


@pytest.mark.parametrize("spoil", ["truncated", "empty", "unreadable"])
def test_a_cached_kernel_that_is_no_longer_whole_is_made_again(tmp_path, spoil, monkeypatch):
    """One cut short, emptied or made unreadable would make every boot fail, until someone removed it."""
    monkeypatch.delenv("TESTBED_VM_PVH", raising=False)
    image = tmp_path / "vmlinuz"
    image.write_bytes(bzimage(gzip.compress(PVH_ELF)))
    made = pvh.pvh_kernel(image, tmp_path / "cache")
    if spoil == "truncated":
        made.write_bytes(PVH_ELF[:100])
    elif spoil == "empty":
        made.write_bytes(b"")
    else:
        real_open = open
        monkeypatch.setattr("builtins.open", lambda f, *a, **k: (_ for _ in ()).throw(PermissionError(13, "denied"))
                            if str(f) == str(made) else real_open(f, *a, **k))
        assert not pvh._usable(made)
        monkeypatch.setattr("builtins.open", real_open)
        return
    assert pvh.pvh_kernel(image, tmp_path / "cache") == made and made.read_bytes() == PVH_ELF


@pytest.mark.parametrize("image", [
    b"not a kernel at all" * 100,                                         # no bzImage header
    bzimage(lzma.compress(PVH_ELF, format=lzma.FORMAT_XZ), version=0x207),  # a header too old to locate it
    bzimage(lzma.compress(PLAIN_ELF, format=lzma.FORMAT_XZ)),            # no PVH note: qemu could not enter it
    bzimage(b"\x5d\x00\x00" + os.urandom(200)),                           # lzma: nothing here undoes it
    bzimage(b"\xfd7zXZ\x00" + os.urandom(200)),                           # xz magic, corrupt stream
])
def test_an_image_that_cannot_be_entered_by_pvh_boots_as_it_is(tmp_path, image, monkeypatch):
    monkeypatch.delenv("TESTBED_VM_PVH", raising=False)
    path = tmp_path / "vmlinuz"
    path.write_bytes(image)
    assert pvh.pvh_kernel(path, tmp_path / "cache") is None
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").iterdir())


def test_an_unwritable_cache_or_the_switch_boots_the_bzimage(tmp_path, monkeypatch):
    path = tmp_path / "vmlinuz"
    path.write_bytes(bzimage(gzip.compress(PVH_ELF)))
    (tmp_path / "file").write_text("")
    assert pvh.pvh_kernel(path, tmp_path / "file" / "cache") is None     # a cache folder that cannot be made
    monkeypatch.setenv("TESTBED_VM_PVH", "0")
    assert pvh.pvh_kernel(path, tmp_path / "cache") is None and not (tmp_path / "cache").exists()


def test_the_cache_keeps_the_kernels_used_last(tmp_path, monkeypatch):
    monkeypatch.delenv("TESTBED_VM_PVH", raising=False)
    cache = tmp_path / "cache"
    made = []
    for i in range(pvh.KEEP + 2):
        path = tmp_path / f"vmlinuz-{i}"
        path.write_bytes(bzimage(gzip.compress(PVH_ELF + bytes([i]))))
        made.append(pvh.pvh_kernel(path, cache))
        os.utime(made[-1], (1000 + i, 1000 + i))     # in the order they were used
    assert sorted(cache.iterdir()) == sorted(made[-pvh.KEEP:])


def test_the_elf_note_parser_reads_only_what_is_there():
    assert pvh.has_pvh_entry(PVH_ELF) and not pvh.has_pvh_entry(PLAIN_ELF)
    assert not pvh.has_pvh_entry(PVH_ELF[:80])        # program headers cut off
    assert not pvh.has_pvh_entry(b"\x7fELF\x01\x01" + PVH_ELF[6:])    # 32-bit
    assert pvh.bzimage_payload(bzimage(b"\x28\xb5\x2f\xfd" + b"x" * 40))[0] == "zstd"


def test_a_tcg_plan_boots_the_decompressed_kernel_and_names_the_image(tmp_path, monkeypatch):
    monkeypatch.delenv("TESTBED_VM_PVH", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    kernel = tmp_path / "vmlinuz-6.1.0-56-amd64"
    kernel.write_bytes(bzimage(lzma.compress(PVH_ELF, format=lzma.FORMAT_XZ)))
    monkeypatch.setattr(vm, "kvm_usable", lambda: (False, "no usable /dev/kvm"))
    plan = vm.plan_vm(["true"], [], kernel=kernel)
    assert plan.kernel == kernel and plan.pvh_kernel.startswith(str(tmp_path / "xdg" / "mptcp-testbed" / "kernels"))
    assert plan.vng_argv("vng", tmp_path)[:3] == ["vng", "--run", plan.pvh_kernel]
    monkeypatch.setattr(vm, "kvm_usable", lambda: (True, "KVM"))     # KVM decompresses at native speed
    kvm_plan = vm.plan_vm(["true"], [], kernel=kernel)
    assert kvm_plan.pvh_kernel is None and kvm_plan.vng_argv("vng", tmp_path)[:3] == ["vng", "--run", str(kernel)]
