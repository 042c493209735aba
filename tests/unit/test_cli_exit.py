"""run-scenario exits at once when done (runners.cli.exit_at_once): with its code, its output written, atexit's
handlers run, and an output it could not write said, as Python's own exit would."""
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


EXITING = """
import atexit, sys
from runners.cli import exit_at_once
atexit.register(lambda: print("atexit ran", file=sys.stderr))
print("the last line")
exit_at_once(int(sys.argv[1]))
"""


@pytest.mark.parametrize("code", [0, 3])
def test_a_command_exits_at_once_with_its_code_its_output_written_and_atexit_run(code):
    r = subprocess.run([sys.executable, "-c", EXITING, str(code)], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == code
    assert r.stdout == "the last line\n" and r.stderr == "atexit ran\n"


FULL_DISK = """
import errno, io, sys
from runners.cli import exit_at_once

class Full(io.RawIOBase):
    def writable(self):
        return True

    def write(self, b):
        raise OSError(errno.ENOSPC, "No space left on device")

sys.stdout = io.TextIOWrapper(io.BufferedWriter(Full(), 8192))
print("the last line, kept in the buffer until the exit")
exit_at_once(0)
"""


def test_a_command_whose_output_cannot_be_written_at_its_exit_says_so_and_fails():
    """Python's own exit says so and ends with 120 when the last flush fails: so does exit_at_once."""
    r = subprocess.run([sys.executable, "-c", FULL_DISK], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 120 and "its output could not be written" in r.stderr and "No space" in r.stderr


def test_a_command_started_with_its_output_closed_exits_with_its_code():
    r = subprocess.run(["sh", "-c", f'exec "$0" -c "$1" 3 >&-', sys.executable, EXITING], cwd=REPO,
                       stderr=subprocess.PIPE, text=True)
    assert r.returncode == 3 and "Traceback" not in r.stderr
