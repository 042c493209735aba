"""The probe's answers about a kernel and the programs beside it, kept across cold VM boots.

Each answer starts processes: a netem qdisc tried in a throwaway namespace, `iperf3 --help`, one `ip mptcp
endpoint add` per flag. A cold VM's guest asked them all again at every boot: about 1 s of its 2.8 s
`prepare` under TCG (2026-11-27). Now:

- In any process an answer is asked once per arguments, defaults filled in (`remembered`).
- Before a cold boot the host puts what it kept for the kernel image (by the image's SHA-256) into the
  result folder as ANSWERS_FILE. The guest takes those answers only if they were asked under the same
  kernel build (/proc/version) with the same programs and modules (`guest_key`); otherwise it asks again.
- A guest that asked anything writes its answers back there, and the host keeps them in
  $XDG_CACHE_HOME/mptcp-testbed/probe/ (default ~/.cache) and removes the file from the result folder.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable

from runners.backends.vm.kernels import image_digest
from runners.paths import user_cache

ANSWERS_FILE = ".probe-answers.json"
FORMAT = 1
# the programs whose answers are kept: a new build of any of them (its size or mtime) asks again
PROGRAMS = ("ip", "tc", "iperf3", "mptcpize", "ethtool", "nft", "modprobe")
# the code that asks: answers kept by another version of it are asked again (the netem probe installs
# what topologies.plan's shaping commands say, with scenarios.spec.units' numbers)
_HERE = Path(__file__).resolve().parent
_TOP = _HERE.parents[1]
ASKING_CODE = (_HERE / "probe.py", _HERE / "kernel_features.py", Path(__file__).resolve(),
               _TOP / "runners" / "linux" / "procfs.py", _TOP / "runners" / "linux" / "netns.py",
               _TOP / "topologies" / "plan.py", _TOP / "scenarios" / "spec" / "units.py")
KEPT_IMAGES = 8    # the host keeps the answers of the kernel images used last

_values: dict[tuple[str, tuple], Any] = {}
_asked: set[tuple[str, tuple]] = set()       # asked in this process, not taken from the host's file
_writes_back = {"on": True}                  # off in a warm VM's guest (settle): no host adopts its jobs' files
# answers that JSON gives back as lists, made the tuples their function returns again
_RESTORE: dict[str, Callable[[Any], Any]] = {
    "netem_works": tuple,
    "endpoint_answers": lambda v: {name: tuple(answer) for name, answer in v.items()},
}


def remembered(fn):
    """Memoise `fn` by its arguments in this process's answers (which the host's file may have seeded)."""
    name = fn.__name__
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def answer(*args):
        bound = signature.bind(*args)
        bound.apply_defaults()    # netem_works() and netem_works(False) are one answer
        key = (name, bound.args)
        if key not in _values:
            _values[key] = fn(*args)
            _asked.add(key)
        return _values[key]

    def cache_clear() -> None:
        for key in [k for k in _values if k[0] == name]:
            _values.pop(key, None)
            _asked.discard(key)
    answer.cache_clear = cache_clear
    return answer


def kernel_build() -> str:
    """The running kernel's build: release, compiler and build number and date (/proc/version)."""
    try:
        return Path("/proc/version").read_text()
    except OSError:
        return os.uname().release


def guest_key() -> str:
    """What the answers depend on, as this machine has it: the kernel build, the programs, the modules, the
    code that asks."""
    parts: dict[str, Any] = {"format": FORMAT, "kernel": kernel_build(),
                             "code": [_digest(f) for f in ASKING_CODE]}
    for program in PROGRAMS:
        path = shutil.which(program)
        parts[program] = _stat(path) if path else None
    parts["modules"] = _stat(f"/lib/modules/{os.uname().release}/modules.dep")
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:20]


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    except OSError:
        return None


def _stat(path: str) -> list | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [path, st.st_size, st.st_mtime_ns]


def seed_from(path: Path) -> int:
    """Take the answers in `path` if they were asked under this very kernel build, programs and modules;
    how many were taken (0 when there is no file, it cannot be read, or it is another machine's)."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return 0
    if not _well_formed(doc) or doc["key"] != guest_key():
        return 0
    taken = 0
    for name, args, value in doc["answers"]:
        key, answer = (name, tuple(args)), _RESTORE.get(name, lambda v: v)(value)
        if key not in _values and worth_keeping(name, answer):
            _values[key] = answer
            taken += 1
    return taken


def keep_new(path: Path) -> bool:
    """Write this process's answers worth keeping to `path` when it asked any itself; True when it wrote.
    Never raises: it runs as the guest's set ends, whose exit code must stay the set's."""
    if not _asked or not _writes_back["on"]:
        return False
    try:
        answers = [[name, list(args), value] for (name, args), value in list(_values.items())
                   if worth_keeping(name, value)]
        if answers:
            _write(Path(path), json.dumps({"key": guest_key(), "answers": answers}, indent=1, default=list) + "\n")
            return True
    except Exception:   # noqa: BLE001  (a cache not written costs the next boot its questions, nothing more)
        pass
    return False


def worth_keeping(name: str, value: Any) -> bool:
    """Only what the kernel and programs answered: a probe that could not ask (a namespace not made, under
    a guest short of memory) or found a program missing is asked again at the next boot, instead of
    refusing every scenario of that kernel image until the cache goes."""
    if name == "netem_works":
        return bool(value[0])
    if name == "endpoint_answers":
        return not any(why.startswith(NO_NAMESPACE) for _, why in value.values())
    if name == "iperf3_facts":
        return value.get("iperf3") is not None
    return value is not None


NO_NAMESPACE = "the probe's namespace could not be made"   # kernel_features.endpoint_answers' reason


def settle() -> None:
    """A warm VM's guest: its jobs inherit the answers asked so far and write none back (their host boots
    nothing, and would leave the file in their result folders)."""
    _writes_back["on"] = False


def _well_formed(doc: Any) -> bool:
    return (isinstance(doc, dict) and isinstance(doc.get("key"), str) and isinstance(doc.get("answers"), list)
            and all(isinstance(a, list) and len(a) == 3 and isinstance(a[0], str) and isinstance(a[1], list)
                    for a in doc["answers"]))


def _write(path: Path, text: str) -> None:
    from runners.results.store import atomic_write

    atomic_write(path, text)


# ------------------------------------------------------------ the host's side


def host_cache(env=os.environ) -> Path:
    """$XDG_CACHE_HOME/mptcp-testbed/probe (default ~/.cache), beside the decompressed kernels."""
    return user_cache(env) / "probe"


def _kept_for(image: Path, cache: Path | None) -> Path:
    return (cache or host_cache()) / f"{image_digest(image)}.json"


def offer(image: Path, run_dir: Path, cache: Path | None = None) -> bool:
    """Before a cold boot: the answers kept for this kernel image, into the result folder, where its guest
    looks for them (the only folder it shares with the host besides the read-only root)."""
    try:
        text = _kept_for(image, cache).read_text()
        _write(Path(run_dir) / ANSWERS_FILE, text)
    except (OSError, RuntimeError):   # nothing kept, or no home folder to keep it in: the guest asks
        return False
    return True


def adopt(image: Path, run_dir: Path, cache: Path | None = None) -> bool:
    """After the guest: its answers (a well-formed file) kept for this kernel image; the file, and any
    temporary file of a write the guest did not finish, leave the result folder either way. True when kept."""
    path = Path(run_dir) / ANSWERS_FILE
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        doc = None
    kept = False
    try:
        if _well_formed(doc):
            target = _kept_for(image, cache)
            target.parent.mkdir(parents=True, exist_ok=True)
            _write(target, json.dumps(doc, indent=1) + "\n")
            _prune(target.parent, KEPT_IMAGES)
            kept = True
    except (OSError, RuntimeError):
        pass
    for left in [path, *Path(run_dir).glob(f".{ANSWERS_FILE}.*")]:
        try:
            left.unlink(missing_ok=True)
        except OSError:   # a results disk gone read-only: the set's own error says so
            pass
    return kept


def _prune(folder: Path, keep: int) -> None:
    files = sorted(folder.glob("*.json"), key=lambda f: f.stat().st_mtime, reverse=True)
    for old in files[keep:]:
        old.unlink(missing_ok=True)
