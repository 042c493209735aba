"""Result files: written atomically after every run, so a finished run is never lost.

Layout of one result set (`results/<scenario>/<UTC timestamp>/`; `results/<scenario>/latest` points at the
newest that has runs, and a shell session's set is `results/<scenario>/shell/<UTC timestamp>/`):
  scenario.yaml   the scenario as given
  metadata.json   kernel, tool versions, git revision, backend, times
  results.json    every run with all its metrics
  runs.csv        tidy: one row per run, metric and path
  raw/<run-id>/   the tools' own output (iperf3 JSON, nstat, ping, tc) and the samples (subflows, paths, CPU)
"""
from __future__ import annotations

import atexit
import json
import os
import re
import secrets
import signal
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from runners.results.derived import derived_by_run
from runners.results.set_text import SetText


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# Results are for everyone to read (0644). The temporary file is made with that mode, so that only a
# stricter umask than 022 costs a chmod: each is one more round trip over 9p in a micro-VM (17 raw files
# a run: 211 ms with a chmod each, 165 ms without, TCG guest, 2026-11-28)
RESULT_MODE = 0o644
_CHMOD_NEEDED = (RESULT_MODE & ~_umask()) != RESULT_MODE


def atomic_write(path: Path, data: str | bytes, make_parent: bool = True) -> None:
    """Write to a temporary file in the same folder, fsync, then rename over the target."""
    if make_parent:
        path.parent.mkdir(parents=True, exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, RESULT_MODE)
    try:
        with os.fdopen(fd, mode) as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if _CHMOD_NEEDED:
            os.chmod(tmp, RESULT_MODE)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def utc_stamp(now: datetime | None = None) -> str:
    return (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")


SHELL_SETS = "shell"   # results/<scenario>/shell/: the shell's sessions, kept apart from the run sets
SET_NAME = re.compile(r"(\d{8}T\d{6}Z)(?:-(\d+))?")   # what new_run_dir names a set


def new_run_dir(base: Path, scenario_name: str, shell: bool = False) -> Path:
    """A fresh `base/<scenario>/<UTC timestamp>` folder (a shell session's: `base/<scenario>/shell/<UTC
    timestamp>`); never reuses an existing one. `latest` is not moved here: a set takes it once it has a run
    (point_latest), so a set that ends before its first run, or a shell session, leaves it where it was."""
    parent = base / scenario_name / SHELL_SETS if shell else base / scenario_name
    stamp = utc_stamp()
    d = parent / stamp
    n = 1
    while d.exists():
        n += 1
        d = parent / f"{stamp}-{n}"
    d.mkdir(parents=True)
    return d


def has_runs(run_dir: Path) -> bool:
    """The set's results.json holds a run, and the set is not a shell session's (one of an older layout, kept
    beside the run sets, says so in its metadata)."""
    try:
        doc = json.loads((Path(run_dir) / "results.json").read_text())
    except (OSError, ValueError):
        return False
    return bool(doc.get("runs")) and not (doc.get("metadata") or {}).get("shell")


def newest_set_with_runs(scenario_dir: Path) -> Path | None:
    """Of the sets named as new_run_dir names them, the newest that has runs.

    Sorted by name before anything is asked of a file: the newest is nearly always the answer, and each
    question is a 9p round trip in the VM's guest (a stat of every set made each run cost more the more
    sets a scenario had)."""
    try:
        named = [(SET_NAME.fullmatch(name), name) for name in os.listdir(scenario_dir)]
    except OSError:
        return None
    sets = sorted(((m.group(1), int(m.group(2) or 1)), name) for m, name in named if m)
    candidates = (Path(scenario_dir) / name for _, name in reversed(sets))
    return next((d for d in candidates if not d.is_symlink() and d.is_dir() and has_runs(d)), None)


def point_latest(scenario_dir: Path) -> Path | None:
    """`<scenario_dir>/latest` -> the newest set there that has runs (relative, replaced atomically); left as it
    is when no set has runs. The set it points at, or None."""
    newest = newest_set_with_runs(scenario_dir)
    if newest is None:
        return None
    link = Path(scenario_dir) / "latest"
    tmp = Path(scenario_dir) / f".latest.{os.getpid()}"
    try:
        if os.path.islink(link) and os.readlink(link) == newest.name:
            return newest
        os.symlink(newest.name, tmp)
        os.replace(tmp, link)
    except OSError:
        # a filesystem without symlinks, or a VM guest that sees this folder read-only (the host links it
        # when the guest is done): the result set itself is what matters
        try:
            os.unlink(tmp)
        except OSError:
            pass
    return newest


_WRITERS: "weakref.WeakSet[DeferredWriter]" = weakref.WeakSet()


_STORE_WRITERS: "weakref.WeakSet[threading.Thread]" = weakref.WeakSet()   # add_runs(background=True)'s


def wait_for_writes() -> None:
    """Every writer's files written, errors ignored: at exit (atexit), and before os._exit in a forked job,
    which skips atexit. A set whose write failed has reported it already."""
    for t in list(_STORE_WRITERS):
        t.join()
    for w in list(_WRITERS):
        try:
            w.flush(parallel=False)   # at exit, concurrent.futures takes no more work
        except OSError:
            pass


atexit.register(wait_for_writes)


class DeferredWriter:
    """Files handed over now and written, atomically, when `flush` is called.

    A run keeps a dozen raw files (pings, counters, iperf3's JSON). In a
    micro-VM each is written over 9p, and each create, fsync, chmod and rename
    is a round trip: 67 ms a file with the run going on around it, over a
    second a run (TCG, 2026-11-25). Written while the run measures, they
    competed with it for the emulated CPU: pings read it as RTT. So they wait
    in memory until the run's traffic is over, and are then written a few at
    a time (the round trips overlap).
    """

    PARALLEL = 4

    def __init__(self) -> None:
        _WRITERS.add(self)
        self._lock = threading.Lock()
        self._pending: dict[Path, str | bytes] = {}
        self._folders: set[Path] = set()

    def put(self, path: Path, data: str | bytes) -> None:
        with self._lock:
            self._pending.pop(path, None)   # written once, with the latest text, in the latest place in order
            self._pending[path] = data

    def flush(self, parallel: bool = True) -> None:
        """Write everything handed over; the first error is raised once all were tried."""
        with self._lock:
            items, self._pending = list(self._pending.items()), {}
        if not items:
            return
        for folder in dict.fromkeys(path.parent for path, _ in items):
            if folder not in self._folders:
                folder.mkdir(parents=True, exist_ok=True)
                self._folders.add(folder)
        if len(items) == 1 or not parallel:
            return _write_in_turn(items)
        try:
            with ThreadPoolExecutor(max_workers=min(self.PARALLEL, len(items))) as pool:
                futures = [pool.submit(atomic_write, path, data, False) for path, data in items]
        except RuntimeError:   # the interpreter is ending (a set's records still being written): in turn
            return _write_in_turn(items)
        for f in futures:
            f.result()


def _write_in_turn(items: list[tuple[Path, str | bytes]]) -> None:
    errors = []
    for path, data in items:
        try:
            atomic_write(path, data, make_parent=False)
        except OSError as e:
            errors.append(e)
    if errors:
        raise errors[0]


SPACE_RESERVE = ".space-reserve"
RESERVE_BYTES = 256 * 1024   # metadata.json and results.json's rewrite with the status fit many times over


class ResultStore:
    """One result set on disk. Every mutation rewrites the affected files atomically."""

    def __init__(self, run_dir: Path, links_latest: bool = True):
        self.dir = Path(run_dir)
        # `latest` beside the set follows it from its first run (a shell session's set does not take it)
        self.links_latest = links_latest
        self.dir.mkdir(parents=True, exist_ok=True)
        self.runs: list[dict] = []
        self.metadata: dict[str, Any] = {}
        self.extra: dict[str, Any] = {}
        self.raw_writer = DeferredWriter()
        self._text = SetText()
        self._writing: threading.Thread | None = None   # add_runs(background=True) at work
        self._write_error: BaseException | None = None
        self._then: Callable[[], None] | None = None      # ... and what to do once it is written

    def settle(self) -> None:
        """The runs handed over last (add_runs with `background`) are on disk, and what was to follow
        their write has been done, in the caller's thread; or their write's error is raised here. Every
        other change of the set settles first."""
        if self._writing is not None:
            self._writing.join()   # cleared once joined: a Ctrl-C during the join leaves it to the next
            self._writing = None
        error, self._write_error = self._write_error, None
        then, self._then = self._then, None
        if error is not None:
            raise error
        if then is not None:
            then()

    def reserve_space(self) -> None:
        """Hold back a little disk space for the set's status: when the disk fills mid-set, releasing it
        lets metadata.json still say how the set ended."""
        try:
            with open(self.dir / SPACE_RESERVE, "wb") as f:
                f.write(b"\0" * RESERVE_BYTES)
                f.flush()
                os.fsync(f.fileno())
        except OSError:
            self.release_space()   # already full: nothing to hold back

    def release_space(self) -> None:
        try:
            os.unlink(self.dir / SPACE_RESERVE)
        except OSError:
            pass

    def write_scenario(self, text: str) -> None:
        self.settle()
        atomic_write(self.dir / "scenario.yaml", text)

    def set_metadata(self, **kv: Any) -> None:
        self.settle()
        self.metadata.update(kv)
        atomic_write(self.dir / "metadata.json", json.dumps(self.metadata, indent=2, sort_keys=True, default=str) + "\n")

    def finish_metadata(self, **kv: Any) -> None:
        """set_metadata, and the same metadata into results.json, whose copy was written with the last run
        (a run set's status, phases and, for a VM run, what only the host knows come after it)."""
        self.set_metadata(**kv)
        path = self.dir / "results.json"
        if path.exists():
            doc = json.loads(path.read_text())
            doc["metadata"] = self.metadata
            atomic_write(path, json.dumps(doc, indent=2, default=str) + "\n")

    def raw_dir(self, run_id: str) -> Path:
        """The run's raw folder, made now (a tool writes into it)."""
        d = self.dir / "raw" / run_id
        d.mkdir(parents=True, exist_ok=True)
        return d

    def save_raw(self, run_id: str, name: str, text: str) -> None:
        """A tool's own output, written by the next flush_raw (add_run, the set's end)."""
        self.raw_writer.put(self.dir / "raw" / run_id / name, text)

    def flush_raw(self) -> None:
        """Every run and raw file handed over is on disk; the first failed write is raised here."""
        self.settle()
        self.raw_writer.flush()

    def add_run(self, run: dict) -> None:
        self.add_runs([run])

    def add_runs(self, runs: list[dict], background: bool = False, then: Callable[[], None] | None = None) -> None:
        """Record runs; one recorded again (a job run together, rerun on resume) replaces the old record.

        Their raw files are written first, then results.json: once that holds a run, the run is kept.
        Each run's own copy (raw/<id>/run.json) goes with the next flush. The set's first run points
        `latest` at the newest set with runs (this one, unless a newer one has runs).

        `background`: written by a thread while the caller goes on, as the next run's endpoints and
        servers start; settle() waits for it (the next run settles before its pings). A run is on disk
        as soon as without it: the write starts at once, and only the wait for it moved. In the TCG
        micro-VM each file is a few 9p round trips: 0.24-0.44 s a run (2026-11-29).

        `then`: called once the runs are on disk (by settle(), in its caller's thread; not after a failed
        write), as the run's line that says it finished: it is never printed for a run that was lost."""
        self.settle()
        if background:
            writer = threading.Thread(target=self._record_in_thread, args=(runs,), name="store-runs")
            try:
                writer.start()
            except RuntimeError:   # no thread to be had (a pids limit): written now, as without `background`
                pass
            else:
                self._writing, self._then = writer, then
                _STORE_WRITERS.add(writer)
                return
        self._record(runs)
        if then is not None:
            then()

    def _record_in_thread(self, runs: list[dict]) -> None:
        # the runner blocks Ctrl-C and SIGTERM in its thread while it cleans up; a thread that left them
        # open would take the signal, and Python raises it in the main thread all the same
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
        try:
            self._record(runs)
        except BaseException as e:   # noqa: BLE001 - raised again by settle(), in the caller's thread
            self._write_error = e

    def _record(self, runs: list[dict]) -> None:
        self.raw_writer.flush()
        first = not self.runs
        ids = {r["id"] for r in runs}
        self.runs = [r for r in self.runs if r["id"] not in ids] + list(runs)
        self._flush()
        if first and self.links_latest:
            point_latest(self.dir.parent)
        for run in runs:
            self.save_raw(run["id"], "run.json", json.dumps(run, indent=2, default=str) + "\n")

    def set_extra(self, key: str, value: Any) -> None:
        self.settle()
        self.extra[key] = value
        self._flush()

    def _flush(self) -> None:
        # derived metrics (efficiency) are recomputed per point on every write: a TCP baseline may
        # finish after the MPTCP run it belongs to; only the runs whose text changed are made anew
        derived = derived_by_run(self.runs)
        head = {"format": 1, "metadata": self.metadata, **self.extra}
        atomic_write(self.dir / "results.json", self._text.results_json(head, self.runs, derived))
        atomic_write(self.dir / "runs.csv", self._text.runs_csv(self.runs, derived))


def load_results(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / "results.json").read_text())


def run_key(run: dict) -> tuple[str, int, str, str]:
    return (run.get("point", "p001"), int(run["repeat"]), run["primary"], run["mode"])


def runs_on_disk(run_dir: Path) -> int:
    """Finished runs as results.json holds them (a run whose write failed is not among them)."""
    try:
        return len(json.loads((run_dir / "results.json").read_text()).get("runs", []))
    except (OSError, ValueError):
        return 0
