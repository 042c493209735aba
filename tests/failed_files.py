"""The files of an integration test that failed in the micro-VM, kept for reading afterwards.

A test's tmp_path lives in the guest's /tmp, which is gone when the VM stops: a failure that happens once
in a CI run (a run without a recovery, a capture short of packets) could then never be read. The guest
copies a failed test's tmp_path into the folder it shares with the host (beside its JUnit XML); the host
moves what came back to KEPT_DIR/<time>/ and says where. The newest KEEP_SETS sets are kept.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

KEPT_DIR = Path(os.environ.get("TESTBED_FAILED_TESTS_DIR", "/var/tmp/testbed-failed-tests"))
KEEP_SETS = 5
# results with raw files, pcaps at 128 bytes a packet: a few MB a test; a larger file is left out
MAX_FILE_BYTES = 20 * 1024 * 1024
SET_NAME = re.compile(r"\d{8}T\d{6}-\w+")   # <time>-<mkdtemp's letters>


def folder_name(nodeid: str) -> str:
    """tests/integration/test_labs.py::test_lab6[x] -> test_labs.py--test_lab6-x--<8 hex digits of the
    whole nodeid> (readable, and unique where two nodeids read alike once cleaned)."""
    readable = re.sub(r"[^A-Za-z0-9_.-]", "-", nodeid.rsplit("/", 1)[-1].replace("::", "--"))
    return f"{readable}-{hashlib.sha256(nodeid.encode()).hexdigest()[:8]}"


def keep(tmp_path: Path, shared: Path, nodeid: str) -> Path:
    """Copy a failed test's tmp_path into `shared`/failed/<test>/ (files over MAX_FILE_BYTES left out)."""
    dest = shared / "failed" / folder_name(nodeid)

    def too_big(folder, names):
        return [n for n in names if (Path(folder) / n).is_file() and (Path(folder) / n).stat().st_size > MAX_FILE_BYTES]
    shutil.copytree(tmp_path, dest, ignore=too_big, symlinks=True, dirs_exist_ok=True)
    return dest


def harvest(shared_dirs: list[Path], kept_dir: Path = KEPT_DIR, keep_sets: int = KEEP_SETS) -> Path | None:
    """Move every shard's failed/ into kept_dir/<time>/; the oldest sets beyond keep_sets go. The set's
    folder, or None when no test left files."""
    found = [d / "failed" for d in shared_dirs if (d / "failed").is_dir() and any((d / "failed").iterdir())]
    if not found:
        return None
    kept_dir.mkdir(parents=True, exist_ok=True)
    target = Path(tempfile.mkdtemp(prefix=time.strftime("%Y%m%dT%H%M%S-"), dir=kept_dir))
    for failed in found:
        for test in failed.iterdir():
            shutil.move(str(test), str(target / test.name))
    # only the sets made here, oldest first: the folder may hold other things
    sets = sorted(p for p in kept_dir.iterdir() if p.is_dir() and SET_NAME.fullmatch(p.name) and p != target)
    for old in sets[:max(0, len(sets) - (keep_sets - 1))]:
        shutil.rmtree(old, ignore_errors=True)
    return target
