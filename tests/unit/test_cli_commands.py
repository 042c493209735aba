"""The CLI's tables: a subcommand is one module and one line in COMMANDS (imported only when it runs,
listed in the run's --help), and every option of the run reaches the VM's guest or is said not to."""
import argparse
import importlib
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from runners.backends.vm import guest
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


def test_every_run_option_is_passed_to_the_guest_or_said_not_to_be():
    """A new run option must be put in one of guest.py's lists: else a VM run would drop it unnoticed."""
    dests = {a.dest for a in build_parser()._actions if not isinstance(a, argparse._HelpAction)}
    listed = set(guest.PASSED_ON) | set(guest.HOST_ONLY) | set(guest.GUEST_ONLY)
    assert dests == listed
    assert not (set(guest.PASSED_ON) & set(guest.HOST_ONLY))


def test_guest_flags_pass_on_every_option_they_should():
    options = SimpleNamespace(repeat=3, shard="1/2", baseline="b", max_repeat=6, until_conclusive=True,
                              variant=["v"], allow_commands=True, verbose=True, yes=True,
                              capture_spec=SimpleNamespace(roles=("client",), snaplen=96))
    flags = guest.guest_flags(options)
    args = build_parser().parse_args(["s.yaml", *flags])
    for dest in guest.PASSED_ON:
        assert getattr(args, dest) not in (None, False, []), dest
