"""A warm VM's results for a folder it does not share: the guest writes into a stage the VM shares, and the
host moves what is finished into the real result folder, run by run.

A running guest cannot be given another shared folder, so a run whose result folder (its `--out`) is not
one the warm VM shares gets a stage, `<stages>/<job id>/set` (a folder the warm VM shares for them:
runners.backends.vm.warm.WarmVm.stages), which the guest sees mounted at the
result folder's own path (runners.backends.vm.warm_guest binds it there for that job only): every path the
run records is the result folder's, as in a cold boot. The host

  seeds the stage with the folder as it is (the host's scenario copy, metadata and job; on --resume the
      finished runs, which the guest must see),
  syncs it while the job runs: whenever results.json changes, the top-level files and the raw files of the
      runs it lists, then results.json itself (the guest writes a run's raw files before the results.json
      that lists it, so a run in the target's results.json always has its files there),
  and finishes it: everything, as the guest left it (an interrupted run's raw files too, as a cold run
      leaves them), files the guest removed removed, then the stage.

Every file goes in whole: copied to a temporary name in the target's folder, fsynced, renamed over the
old one, the folder fsynced. A host that dies at any point leaves a result set that --resume takes up;
the stage keeps the rest (its `target` file names the folder) until `salvage` moves it there: --resume of
that folder, or the warm VM's stop.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

RESULTS = "results.json"
HOST_OWNED = ("run.log",)    # the host writes it into the target itself, while the guest runs


class Stage:
    def __init__(self, home: Path):
        self.home = Path(home)
        self.copied: dict[str, tuple[int, int]] = {}    # relative path -> (size, mtime_ns) last moved
        self._results_seen: tuple[int, int] | None = None
        self.touched: set[Path] = set()                  # folders with a file renamed in since the last fsync

    @property
    def files(self) -> Path:
        """What the guest sees at the target's path."""
        return self.home / "set"

    @property
    def target(self) -> Path:
        return Path((self.home / "target").read_text().strip())

    @classmethod
    def create(cls, stages: Path, job_id: str, target: Path) -> "Stage":
        stage = cls(Path(stages) / job_id)
        stage.files.mkdir(parents=True)
        (stage.home / "target").write_text(str(Path(target).resolve()) + "\n")
        return stage

    def seed(self) -> None:
        """The stage starts as the target is now."""
        for rel in _files_under(self.target):
            if rel in HOST_OWNED:
                continue
            dst = self.files / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(self.target / rel, dst)
            self.copied[rel] = _sig(dst)

    def poll(self) -> None:
        """Between the job's output lines: sync when the guest has recorded another run."""
        try:
            seen = _sig(self.files / RESULTS)
        except FileNotFoundError:
            return
        if seen != self._results_seen:
            self._results_seen = seen
            self.sync()

    def sync(self) -> None:
        """The finished runs into the target (see the module's docstring)."""
        results = _snapshot(self.files / RESULTS)    # first: the runs it lists have their files by now
        finished = _run_ids(results[0] if results else None)
        for rel in _files_under(self.files):
            if rel == RESULTS or rel in HOST_OWNED:
                continue
            if "/" not in rel or (rel.startswith("raw/") and rel.split("/")[1] in finished):
                self._move(rel)
        if results is not None:
            _atomic_write(results, self.target / RESULTS)
        self._fsync_dirs()

    def finish(self) -> None:
        """Everything as the guest left it, then the stage is removed."""
        self.sync()
        left = set(_files_under(self.files))
        for rel in sorted(left - {RESULTS, *HOST_OWNED}):
            self._move(rel)
        for rel in sorted(set(self.copied) - left - {RESULTS}):    # the guest removed it after it was moved
            (self.target / rel).unlink(missing_ok=True)
            self.touched.add((self.target / rel).parent)
        results = _snapshot(self.files / RESULTS)
        if results is not None:
            _atomic_write(results, self.target / RESULTS)
        self._fsync_dirs()
        shutil.rmtree(self.home, ignore_errors=True)

    def _fsync_dirs(self) -> None:
        """The renames themselves on disk (a crash after them keeps them)."""
        for d in sorted(self.touched | {self.target}):
            try:
                fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
            except OSError:
                continue
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self.touched.clear()

    def _move(self, rel: str) -> None:
        src = self.files / rel
        try:
            sig = _sig(src)
        except FileNotFoundError:   # removed by the guest since the walk
            return
        if self.copied.get(rel) == sig and (self.target / rel).exists():
            return
        dst = self.target / rel
        if not dst.parent.is_dir():    # its new entries need their parents' fsync too
            self.touched.update(p for p in dst.parents if self.target in p.parents)
            dst.parent.mkdir(parents=True, exist_ok=True)
        st = _atomic_copy(src, dst)
        if st is None:
            return
        self.copied[rel] = (st.st_size, st.st_mtime_ns)
        self.touched.add(dst.parent)


def salvage(stages: Path, log=print) -> list[Path]:
    """Every stage left in `stages` (its host died, or its job was cancelled), finished into its target
    when that folder still exists, then removed. The targets it filled. Call it only when no job writes
    into them: the guest is stopped, or their jobs are done."""
    filled = []
    for home in sorted(Path(stages).glob("*")) if Path(stages).is_dir() else []:
        stage = Stage(home)
        try:
            target = stage.target
        except OSError:
            shutil.rmtree(home, ignore_errors=True)
            continue
        if target.is_dir():
            stage.finish()
            filled.append(target)
            log(f"warm VM: moved what a stopped job left in its stage into {target}")
        else:
            shutil.rmtree(home, ignore_errors=True)
    return filled


def stages_for(stages: Path, target: Path) -> list[Stage]:
    """The stages whose target is this folder (a killed run's, when it is resumed)."""
    want = str(Path(target).resolve())
    found = []
    for home in sorted(Path(stages).glob("*")) if Path(stages).is_dir() else []:
        try:
            if Stage(home).target == Path(want):
                found.append(Stage(home))
        except OSError:
            continue
    return found


def _run_ids(results: bytes | None) -> set[str]:
    if not results:
        return set()
    try:
        return {str(r["id"]) for r in json.loads(results).get("runs", [])}
    except (ValueError, AttributeError, KeyError, TypeError):
        return set()


def _files_under(root: Path) -> list[str]:
    """Every regular file under `root`, relative, skipping names that start with a dot (a writer's
    temporary file, the space reserve)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            if not name.startswith("."):
                out.append(os.path.relpath(os.path.join(dirpath, name), root))
    return sorted(out)


def _sig(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


def _snapshot(path: Path) -> tuple[bytes, os.stat_result] | None:
    """A file's bytes and its stat, of one and the same version (the guest replaces files by renaming
    over them); None when it is gone."""
    try:
        with open(path, "rb") as f:
            return f.read(), os.fstat(f.fileno())
    except FileNotFoundError:
        return None


def _atomic_copy(src: Path, dst: Path) -> os.stat_result | None:
    """_atomic_write of a file of any size, streamed; the stat of the version copied, or None when the
    file is gone."""
    try:
        fin = open(src, "rb")
    except FileNotFoundError:
        return None
    with fin:
        st = os.fstat(fin.fileno())
        _atomic_write((fin, st), dst)
    return st


def _atomic_write(snap: tuple, dst: Path) -> None:
    """The snapshot's bytes (or an open file's), mode and modification time at dst, whole or not at all:
    a temporary name in dst's folder (the target's filesystem), fsync, rename."""
    data, st = snap
    tmp = dst.with_name(f".{dst.name}.moving")
    try:
        with open(tmp, "wb") as f:
            if isinstance(data, bytes):
                f.write(data)
            else:
                shutil.copyfileobj(data, f, 1 << 20)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, stat.S_IMODE(st.st_mode))
        os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(tmp, dst)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
