"""The CLI's tables: a subcommand is one module and one line in COMMANDS (imported only when it runs,
listed in the run's --help). What reaches the VM's guest: tests/unit/test_guest_job.py."""
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from runners.cli import COMMANDS, RUN, parse_command_line
from runners.cli.run import build_parser

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_subcommand_is_a_module_with_a_parser_and_main(name):
    module = importlib.import_module(COMMANDS[name].module)
    assert module.build_parser().prog == f"run-scenario {name}"
    assert callable(module.main)
    assert f"run-scenario {COMMANDS[name].usage}" in build_parser().epilog


def test_subcommands_are_imported_only_when_used():
    code = ("import sys, runners.cli; from runners.cli import COMMANDS, RUN; "
            "print(sorted(m for m in (*(c.module for c in COMMANDS.values()), RUN) if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stderr


def test_the_command_line_goes_to_its_module():
    assert parse_command_line(["report", "d"])[0] == "report"
    name, args = parse_command_line(["s.yaml", "--repeat", "2"])
    assert name == "run" and args.repeat == 2 and RUN == "runners.cli.run"
