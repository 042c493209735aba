"""Every exit code of run-scenario is named once, in runners/errors.py: no module defines its own and no
bare 130 (Ctrl-C) or 143 (SIGTERM) stands in the code, where one written by hand can drift from the rest."""
from __future__ import annotations

import ast
import signal
from pathlib import Path

from runners import errors

REPO = Path(__file__).resolve().parents[2]
RUNNERS = REPO / "runners"
SIGNAL_EXITS = {130, 143}


def _code_files() -> list[Path]:
    return sorted(p for p in RUNNERS.rglob("*.py") if p != RUNNERS / "errors.py")


def test_no_bare_signal_exit_code_in_runners():
    """An integer 130 or 143 in the code (not in a comment or a help text) outside errors.py."""
    found = []
    for path in _code_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and type(node.value) is int and node.value in SIGNAL_EXITS:
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value}")
    assert found == [], "use errors.EXIT_INTERRUPTED / EXIT_TERMINATED:\n" + "\n".join(found)


def test_exit_codes_are_defined_only_in_errors():
    defined = []
    for path in _code_files():
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                if isinstance(node, ast.AnnAssign) else []
            names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            defined += [f"{path.relative_to(REPO)}:{node.lineno}: {n}" for n in names if n.startswith("EXIT_")]
    assert defined == [], "exit codes belong in runners/errors.py:\n" + "\n".join(defined)


def test_the_signal_exit_codes_are_what_shells_report():
    assert errors.EXIT_INTERRUPTED == 128 + signal.SIGINT == 130
    assert errors.EXIT_TERMINATED == 128 + signal.SIGTERM == 143
    assert set(errors.EXIT_STOPPED) == {errors.EXIT_INTERRUPTED, errors.EXIT_TERMINATED}
    codes = [errors.EXIT_OK, errors.EXIT_FAIL, errors.EXIT_INPUT, errors.EXIT_KERNEL_REFUSED, *errors.EXIT_STOPPED]
    assert len(set(codes)) == len(codes)
