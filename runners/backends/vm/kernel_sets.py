"""One result set over several kernels: what each kernel's guest and the host record about it.

The VM backend boots each kernel of a `kernel` sweep in turn; every guest
runs that kernel's points into the same result folder (a resume of it).
metadata.json keeps, per kernel label: the release that ran, its MPTCP
feature probe, its VM and phases, and, for a kernel that could not run the
scenario, why not (`refused`). The summary says which kernels were refused.
"""
from __future__ import annotations

from pathlib import Path

from runners.results.metadata import read_metadata_file


def record_kernel(run_dir: Path, label: str, **info) -> None:
    """Merge `info` into metadata.json's kernels[label] (and results.json's copy of it)."""
    from runners.results.store import ResultStore

    store = ResultStore(run_dir)
    try:
        store.metadata = read_metadata_file(run_dir)
    except (OSError, ValueError):
        store.metadata = {}
    kernels = dict(store.metadata.get("kernels") or {})
    kernels[label] = {**(kernels.get(label) or {}), **info}
    store.finish_metadata(kernels=kernels)


def kernel_base(exp) -> Path:
    """Where a kernel path in the scenario is relative to: the scenario file's folder."""
    return Path(exp.file).resolve().parent


def sweeps_kernels(exp) -> bool:
    return any(p.kernel is not None for p in exp.points)


def vm_kernels_problem(exp, modules: str | None) -> str | None:
    """Before anything starts: every kernel of the sweep names an image, and at least one of them meets
    requires.kernel (the others are refused at run time, and the summary says so)."""
    from scenarios.spec.kernel import satisfies

    from runners.backends.vm.kernels import (KernelNotFound, how_to_add, image_release, kernel_groups, modules_for,
        resolve_kernel)

    requirement = exp.scenario.requires.kernel
    problems, fit = [], []
    for label in kernel_groups(exp.points):
        try:
            image = resolve_kernel(label, kernel_base(exp))
        except KernelNotFound as e:
            problems.append(f"{e}; to add it: {how_to_add(label)}")
            continue
        release = image_release(image)
        if modules and "/" in label and modules_for(release, Path(modules)) is None:
            problems.append(f"--modules {modules}: no modules for kernel {release} ({label}) there")
        if satisfies(release, requirement):
            fit.append(label)
    if problems:
        return "; ".join(problems)
    if not fit:
        return f"requires.kernel {requirement}: none of the scenario's kernels meets it"
    return None


def kernels_named(exp, given: list[str] | None) -> list[str]:
    """Every kernel the run would boot by name: the sweep's (a --kernel sweep's included), or one --kernel."""
    from runners.backends.vm.kernels import kernel_groups

    labels = [label for label in kernel_groups(exp.points) if label is not None]
    return labels or list(given or [])


def kernels_here(exp, given: list[str] | None, boot: Path | None = None) -> dict[str, str | None]:
    """{each kernel the scenario or --kernel names: the release of its image here, or None (missing)}."""
    from runners.backends.vm.kernels import KernelNotFound, image_release, resolve_kernel

    here: dict[str, str | None] = {}
    for label in kernels_named(exp, given):
        try:
            here[label] = image_release(resolve_kernel(label, kernel_base(exp), boot))
        except KernelNotFound:
            here[label] = None
    return here


def missing_kernels_report(here: dict[str, str | None], given: list[str] | None,
                           boot: Path | None = None) -> tuple[list[str], list[str]]:
    """(the missing kernels that --kernel asked for, lines saying which kernels are here and how to add
    each missing one); ([], []) when none is missing."""
    from runners.backends.vm.kernels import missing_report

    missing = [label for label, release in here.items() if release is None]
    if not missing:
        return [], []
    return [k for k in missing if k in (given or [])], missing_report(missing, boot)


def kernel_sweep(args) -> list[str] | None:
    """The kernels of a sweep made on the command line (two or more --kernel), else None."""
    return list(args.kernel) if args.kernel and len(args.kernel) > 1 else None
