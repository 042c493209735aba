"""Fixtures shared by the unit tests of more than one module."""
from pathlib import Path

import pytest


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A checkout with the fresh-machine test's setup files (tests/fresh/gate.py's SETUP_FILES) and one file
    that is not one, each holding "<name> v1": the gate's and the kept root's stamps hash these."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("setup.sh", "requirements.txt", "pyproject.toml", "setup.py", "README.md"):
        (repo / name).write_text(f"{name} v1\n")
    return repo


@pytest.fixture(autouse=True, scope="session")
def own_cache_folder(tmp_path_factory):
    """No unit test writes into this user's ~/.cache: decompressed kernels, the probe's kept answers and
    calibrations go to a folder of the session's (a test that ran a guest in-process once kept its answers
    for a fake, empty kernel image in root's cache)."""
    patch = pytest.MonkeyPatch()
    patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
    yield
    patch.undo()
