"""The run command's comparison of a plan with this machine's calibration, before anything starts
(--check, --dry-run and a run): the calibration of the backend and kernel the run would use
(runners.runset.calibration), each point against it (runners.runset.limits), a warning per point beyond
it naming the paths and the limit, and a note once per command when there is no calibration."""
from __future__ import annotations

import functools
import platform
import sys

from runners.runset import calibration as cal
from runners.runset.limits import compare, unmeasured

_SAID: set[str] = set()   # what was said once per command: a missing calibration, an unmeasured dimension


def kernels_of_points(exp, backend: str, given: list[str] | None) -> dict[str, str | None]:
    """{point id: the kernel release it runs on here} (None: unknown here, not compared)."""
    if backend == "native":
        return {p.id: platform.release() for p in exp.points}
    from runners.backends.vm.kernel_sets import kernels_here, sweeps_kernels

    if sweeps_kernels(exp) or (given and len(given) > 1):
        here = kernels_here(exp, given)
        return {p.id: here.get(p.kernel) for p in exp.points}
    release = _release(given[0] if given else None, exp.scenario.requires.kernel)
    return {p.id: release for p in exp.points}


@functools.lru_cache(maxsize=None)
def _release(kernel: str | None, requirement: str | None) -> str | None:
    """The release of the kernel a VM run boots; once per command (finding the default asks dpkg about
    each installed kernel: 0.16 s, for every file of `--check scenarios/*.yaml`)."""
    from runners.backends.vm.boot import VmError, choose_kernel, kernel_release

    try:
        return kernel_release(choose_kernel(kernel, requirement))
    except VmError:
        return None   # the run refuses it later, naming the kernel


def check_plan(exp, backend: str, given_kernels: list[str] | None, strict: bool, label: str) -> bool:
    """Print what the plan asks beyond the calibration (warnings; errors with `strict`) and the notes;
    True when a point is beyond it. `label`: the scenario file, which starts every line."""
    by_point = kernels_of_points(exp, backend, given_kernels)
    kind = "vm" if backend in ("vm", "warm vm") else backend
    beyond = False
    docs: dict[str, dict | None] = {}
    for p in exp.points:
        release = by_point.get(p.id)
        if release is None:
            continue
        if release not in docs:
            docs[release] = _calibration(kind, release, label)
        doc = docs[release]
        if doc is None:
            continue
        for f in compare(p.id, p.scenario, doc):
            where = f"{label}: point {p.id}" if len(exp.points) > 1 else label
            if f.beyond:
                beyond = True
                level = "error" if strict else "warning"
                _say(f"{level}: {where}: {f.text} (calibration of {doc.get('date_utc', '?')[:10]}: {kind}, "
                     f"kernel {release})")
            else:
                _say(f"note: {where}: {f.text}")
    if beyond and strict:
        _say(f"{label}: --strict-fidelity: refused, the plan is beyond what this machine reproduces faithfully "
             "(lower the rates, paths or clients, or run without --strict-fidelity and let each run's fidelity "
             "say whether it kept up)")
    return beyond


def _calibration(kind: str, release: str, label: str) -> dict | None:
    """The calibration for the backend and kernel, or None after saying (once) that there is none."""
    path = cal.file_for(kind, release)
    try:
        doc = cal.read(path)
    except cal.CalibrationError as e:
        _once(str(e), f"note: {e}: the plan is not compared with it")
        return None
    if doc is None:
        hint = "--backend native" if kind == "native" else f"--backend vm --kernel {release}"
        _once(f"none:{kind}:{release}", f"note: no calibration of this machine for the {kind} backend and kernel "
              f"{release}, so the plan is not compared with what it reproduces faithfully; "
              f"`run-scenario calibrate {hint}` measures it (under 10 min in a TCG micro-VM)")
        return None
    missing = unmeasured(doc)
    if missing:
        _once(f"missing:{path}", f"note: the calibration {path} has no figure for {', '.join(missing)} "
              "(its search ran out of time): those are not compared")
    return doc


def _once(key: str, line: str) -> None:
    if key not in _SAID:
        _SAID.add(key)
        _say(line)


def _say(line: str) -> None:
    """Warnings and errors on stderr; a note is progress (stdout, left out by -q, kept in run.log): every run
    on a machine without a calibration says one, and a quiet run prints its summary only."""
    if line.startswith("note:"):
        from runners.console.output import info

        info(line)
    else:
        print(line, file=sys.stderr, flush=True)
