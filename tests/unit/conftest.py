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
