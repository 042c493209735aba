"""What each VM test may leave behind: nothing more than was there when it began. A test that failed
before (a run killed at its timeout leaves its folder for `run-scenario clean`) is that test's failure,
not every later test's (CI of 2026-11-26 failed three tests for one)."""
import pytest

from runners.linux.leftovers import find_leftovers


@pytest.fixture
def new_leftovers():
    """A function listing what was left behind since the test began."""
    before = set(find_leftovers())
    return lambda: [line for line in find_leftovers() if line not in before]
