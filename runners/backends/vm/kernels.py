"""Kernels a scenario names, as images the VM backend can boot: release prefixes, paths, modules.

A `kernel` sweep value (or `--kernel`) is a release prefix of a kernel in
/boot ('6.1', '6.12') or the path of an image (a bzImage of one's own tree,
or a distribution kernel unpacked somewhere). An image's release is read
from its x86 boot header, so a file named `bzImage` still has one; virtme-ng
needs it to find the image's modules. `--modules DIR` gives those modules
when they are not in `<root>/lib/modules/<release>` above the image (where
virtme-ng looks): DIR may be an `INSTALL_MOD_PATH` (holding
`lib/modules/<release>`) or the `<release>` folder itself.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import struct
from pathlib import Path

from scenarios.spec.kernel import is_kernel_path, release_matches

BOOT = Path("/boot")
OS_RELEASE = Path("/etc/os-release")

# The kernel series each distribution release packages, and how to add one (setup.sh installs both of
# Debian 12's; Debian 13's linux-image-amd64 depends on 6.12, and it packages no 6.1: checked in trixie's
# package index on 2026-11-25). A kernel it lacks is still bootable as an image: --kernel PATH.
DISTRIBUTION_KERNELS = {
    ("debian", "bookworm"): {
        "6.1": "Debian 12's own kernel: apt-get install linux-image-amd64",
        "6.12": "bookworm-backports' linux-image-6.12.*-amd64 (./setup.sh adds bookworm-backports and installs it)",
    },
    ("debian", "trixie"): {
        "6.12": "Debian 13's own kernel: apt-get install linux-image-amd64",
        "6.1": "Debian 13 packages none; Debian 12's linux-image-6.1.0-*-amd64 .deb, unpacked with dpkg-deb -x DIR, "
               "boots with --kernel DIR/boot/vmlinuz-<release> --modules DIR",
    },
}


class KernelNotFound(ValueError):
    """A kernel label that names no image."""


def header_release(image: Path) -> str | None:
    """The release an x86 bzImage names in its setup header ('6.1.0-56-amd64'), or None."""
    try:
        with open(image, "rb") as f:
            head = f.read(0x10000)
    except OSError:
        return None
    if len(head) < 0x210 or head[0x202:0x206] != b"HdrS":
        return None
    offset = struct.unpack_from("<H", head, 0x20E)[0] + 0x200
    text = head[offset:offset + 256].split(b"\0", 1)[0].decode("ascii", "replace")
    release = text.split(" ", 1)[0]
    return release if re.match(r"^\d+\.\d+[A-Za-z0-9.+~_-]*$", release) else None


def image_release(image: Path) -> str:
    """What `uname -r` will say in a guest booted from `image`: its header's release, else its file name."""
    return header_release(image) or image.name.removeprefix("vmlinuz-")


def image_digest(image: Path) -> str:
    """The kernel image's SHA-256 (20 hex digits), which names what is kept for it: the decompressed kernel
    (pvh) and the probe's answers (probe_cache). Raises OSError."""
    st = os.stat(image)
    return _digest(str(image), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=16)   # read once per image and change: a cold boot asked for it 3 times (8-12 MB each)
def _digest(image: str, _size: int, _changed: int) -> str:
    return hashlib.sha256(Path(image).read_bytes()).hexdigest()[:20]


def installed_kernels(boot: Path | None = None) -> list[Path]:
    boot = BOOT if boot is None else boot
    return sorted((p for p in boot.glob("vmlinuz-*") if p.is_file()), key=_version_key)


def _version_key(path: Path) -> list:
    return [(0, int(x), "") if x.isdigit() else (1, 0, x)
            for x in re.split(r"[.+-]", path.name.removeprefix("vmlinuz-"))]


def resolve_kernel(label: str, base: Path | None = None, boot: Path | None = None) -> Path:
    """The image a kernel label names: a path (relative to `base`, the scenario's folder), or the newest
    kernel in /boot whose release starts with the prefix. KernelNotFound says what is installed."""
    if is_kernel_path(label):
        path = Path(label) if Path(label).is_absolute() or base is None else base / label
        if not path.is_file():
            raise KernelNotFound(f"kernel {label}: no such kernel image ({path})")
        return path.resolve()
    boot = BOOT if boot is None else boot
    found = [k for k in installed_kernels(boot) if release_matches(label, k.name.removeprefix("vmlinuz-"))]
    if not found:
        have = ", ".join(k.name.removeprefix("vmlinuz-") for k in installed_kernels(boot)) or "none"
        raise KernelNotFound(f"kernel {label}: no kernel in {boot} has that release (installed: {have}); "
                             "give a release prefix such as 6.1, or the path of a kernel image")
    return found[-1]


def os_release(path: Path | None = None) -> tuple[str, str]:
    """(ID, VERSION_CODENAME) of this machine's distribution ('debian', 'trixie'), '' where unknown."""
    try:
        text = (OS_RELEASE if path is None else path).read_text()
    except OSError:
        return "", ""
    fields = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    return tuple(fields.get(k, "").strip().strip('"') for k in ("ID", "VERSION_CODENAME"))


def how_to_add(label: str, distribution: tuple[str, str] | None = None) -> str:
    """How to get kernel `label` onto this machine: the distribution's package where it has one, else
    an image of one's own (or another release's package, unpacked) given with --kernel PATH."""
    if is_kernel_path(label):
        return "no image at that path; build or unpack one there, or give another with --kernel PATH"
    distribution = os_release() if distribution is None else distribution
    for series, advice in DISTRIBUTION_KERNELS.get(distribution, {}).items():
        if release_matches(series, label) or release_matches(label, series):
            return advice if "--kernel" in advice else f"{advice}; or --kernel PATH, the path of an image"
    name = " ".join(x for x in distribution if x) or "this distribution"
    return (f"{name} has no package of it known here; give an image with --kernel PATH (a kernel you built, or "
            "another release's package unpacked; --modules DIR when its modules are not beside it)")


def missing_report(missing: list[str], boot: Path | None = None,
                   distribution: tuple[str, str] | None = None) -> list[str]:
    """Lines for kernels a scenario names but this machine lacks: which kernels are here, and how to add
    each missing one."""
    boot = BOOT if boot is None else boot
    here = ", ".join(k.name.removeprefix("vmlinuz-") for k in installed_kernels(boot)) or "none"
    return ([f"kernel {', '.join(missing)}: not on this machine (kernels in {boot}: {here})"]
            + [f"  to add kernel {label}: {how_to_add(label, distribution)}" for label in missing])


def modules_for(release: str, modules: Path | None) -> Path | None:
    """The `lib/modules/<release>` folder under --modules DIR, or None when DIR holds none for it."""
    if modules is None:
        return None
    for candidate in (modules / "lib" / "modules" / release, modules / release, modules):
        if (candidate / "modules.order").is_file() or (candidate / "kernel").is_dir():
            if candidate == modules and modules.name != release and (modules / "lib").exists():
                continue
            return candidate
    return None


def stage_image(image: Path, release: str, moddir: Path, into: Path) -> Path:
    """A root for virtme-ng to find `image` and its modules in: `into`/boot/vmlinuz-<release> and
    `into`/lib/modules/<release>, both links. virtme-ng looks for modules above the image's path."""
    (into / "boot").mkdir(parents=True, exist_ok=True)
    (into / "lib" / "modules").mkdir(parents=True, exist_ok=True)
    staged = into / "boot" / f"vmlinuz-{release}"
    staged.symlink_to(image.resolve())
    (into / "lib" / "modules" / release).symlink_to(moddir.resolve())
    return staged


def kernel_groups(points: list) -> dict[str | None, list]:
    """Points by the kernel they run on, in the order the kernels first appear (None: no kernel sweep)."""
    groups: dict[str | None, list] = {}
    for pt in points:
        groups.setdefault(pt.kernel, []).append(pt)
    return groups


def native_refusal(points: list, running: str, base: Path | None = None) -> str | None:
    """Why the native backend cannot run these points: they sweep kernels other than the running one."""
    others = []
    for label in kernel_groups(points):
        if label is None:
            continue
        if is_kernel_path(label):
            try:
                same = image_release(resolve_kernel(label, base)) == running
            except KernelNotFound:
                same = False
        else:
            same = release_matches(label, running)
        if not same:
            others.append(label)
    if not others:
        return None
    return (f"this scenario runs on kernels {', '.join(others)}, and the native backend runs only the running "
            f"kernel ({running}): use --backend vm, which boots each kernel in turn")
