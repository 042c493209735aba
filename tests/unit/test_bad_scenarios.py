"""The corpus of hostile and careless scenario files (tests/fixtures/bad-scenarios): each is refused in
under 2 s and 200 MB, with our own message naming the file, exit 2, no traceback, nothing started.
Those a user may still run with a flag (their own code, a very long set) pass --check with a note."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "fixtures" / "bad-scenarios"
EXPECTED = json.loads((CORPUS / "expected.json").read_text())


# The child is started by a small launcher that reports its peak memory: a high-water mark survives
# exec, so a child forked straight from this (large) pytest process would start at pytest's size.
LAUNCHER = """import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
sys.stderr.write("\\n@peak-kb %d\\n" % usage.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run(*args: str, timeout: float = 30) -> tuple[subprocess.CompletedProcess, float, float]:
    """(result, seconds, the run-scenario process's own peak memory in MB)."""
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", LAUNCHER, sys.executable, "-m", "runners.cli", *args], cwd=REPO,
                       capture_output=True, text=True, timeout=timeout)
    seconds = time.monotonic() - t0
    err, _, peak = r.stderr.rpartition("\n@peak-kb ")
    r.stderr = err
    return r, seconds, int(peak.strip()) / 1024


@pytest.fixture(scope="module")
def special_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("special")
    os.mkfifo(d / "fifo.yaml")
    (d / "zero.yaml").symlink_to("/dev/zero")
    (d / "fifty-megabytes.yaml").write_text("name: t\ndescription: '" + "x" * 50_000_000 + "'\n")
    return {d / "fifo.yaml": "is not a regular file", d / "zero.yaml": "is not a regular file",
            d / "fifty-megabytes.yaml": "a scenario file may be at most 1048576"}


def test_the_corpus_is_large_enough():
    assert len(EXPECTED) >= 30 and all((CORPUS / f).exists() for f in EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_bad_scenario_is_refused_fast_with_our_message(name, tmp_path):
    expect = EXPECTED[name]
    r, seconds, _ = run(str(CORPUS / name), "--backend", "native", "--out", str(tmp_path / "o"))
    assert r.returncode == 2, (name, r.stdout, r.stderr)
    assert expect["message"] in r.stderr and str(CORPUS / name) in r.stderr, r.stderr[-800:]
    assert "Traceback" not in r.stderr + r.stdout
    assert seconds < 2.0, f"{name}: {seconds:.2f} s"
    assert not (tmp_path / "o").exists()            # nothing started, no result folder


def test_check_refuses_the_same_files_or_notes_what_running_them_needs():
    files = [str(CORPUS / n) for n in sorted(EXPECTED)]
    r, _, peak_mb = run("--check", *files, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    for name, expect in EXPECTED.items():
        if expect["check"] == "refused":
            assert f"{CORPUS / name}:" in r.stderr, name
        else:
            assert f"{CORPUS / name}: ok" in r.stdout and expect["message"] in r.stdout, name
    assert peak_mb < 200, f"{peak_mb:.0f} MB"


def test_special_files_are_refused_without_being_read(special_files, tmp_path):
    for path, message in special_files.items():
        r, seconds, peak_mb = run(str(path), "--out", str(tmp_path / "o"), timeout=10)
        assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, (path, r.stderr)
        assert seconds < 2.0 and peak_mb < 200, (path, seconds, peak_mb)
