"""`run-scenario shell FILE`: the scenario's network, shaped and configured, in Mininet's CLI."""
from __future__ import annotations

import argparse
import platform
from pathlib import Path

from runners.backends import BACKENDS
from runners.backends.vm.kernel_sets import kernel_base
from runners.backends.vm.kernels import native_refusal
from runners.cli.common import load_one_point, point_arguments
from runners.console.output import err
from runners.errors import EXIT_FAIL, EXIT_INPUT, EXIT_INTERRUPTED, EXIT_OK, EXIT_TERMINATED
from runners.paths import RESULTS
from runners.results.metadata import native_metadata


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run-scenario shell", description="Build a scenario's network, shape and "
                                "verify it, configure MPTCP as a run would, print its paths, and open Mininet's CLI "
                                "with the testbed's commands: paths, subflows, endpoints, counters, traffic, and path, "
                                "link and shape to change a path now "
                                "(`testbed` lists them). Leaving it (exit, Ctrl-D) cleans up as a run does.")
    point_arguments(p)
    p.add_argument("--backend", choices=["auto", *BACKENDS], default="auto")
    p.add_argument("--out", default=str(RESULTS), metavar="DIR",
                   help="where `traffic` stores its runs: a result set like a run's, in DIR/<scenario>/shell/<UTC "
                        "time>, apart from the run sets (DIR/<scenario>/latest does not move)")
    p.add_argument("--run-dir", help=argparse.SUPPRESS)    # the VM's guest: the host made the folder
    p.add_argument("--scenario-file", help=argparse.SUPPRESS)   # the VM's guest: see as_if_from
    return p


def main(argv: list[str]) -> int:
    p = build_parser()
    a = p.parse_args(argv)
    chosen = load_one_point(p, a)
    if chosen is None:
        return EXIT_INPUT
    exp, point, primary = chosen
    from runners.backends.choice import choose_backend

    elsewhere = native_refusal([point], platform.release(), kernel_base(exp)) if point.kernel else None
    if elsewhere and a.backend == "native":
        err(elsewhere)
        return EXIT_INPUT
    choice = choose_backend("vm" if elsewhere else a.backend, [point.scenario])
    if choice.refusal:
        err(choice.refusal)
        return EXIT_FAIL
    if choice.name == "vm":
        from runners.backends.vm.shell import shell_in_vm
        return shell_in_vm(a, exp, point)
    return _shell_here(a, exp, point, primary, choice.probe)


def _shell_here(a, exp, point, primary: str, probe_report) -> int:
    from runners.pipeline.runner import NativeRunner
    from runners.errors import RunFailure, Terminated
    from runners.pipeline.shell import SHELL_HELP, make_cli, open_session, path_table

    store = open_session(a.out, exp.scenario.name, getattr(a, "run_dir", None))
    run_dir = store.dir
    store.write_scenario(exp.text)
    store.set_metadata(scenario=exp.scenario.name, backend="native", shell=True, point=point.id, primary=primary,
                       **native_metadata(probe_report.facts))
    runner = NativeRunner(store, probe_report, log=print, base_dir=Path(exp.file).resolve().parent)
    try:
        with runner:
            runner.prepare(point)
            if "mptcp" in point.scenario.runs.compare:
                runner.mptcp.apply_endpoints(point.scenario, runner.plan, primary)
            print(f"{exp.scenario.name}, point {point.id} ({point.label}), primary path {primary}; "
                  f"runs from `traffic` go to {run_dir}")
            print(path_table(runner.plan, point.scenario))
            print(SHELL_HELP)
            make_cli(runner, point, primary)(runner.network.mininet)
    except RunFailure as e:
        err(str(e))
        return EXIT_FAIL
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Terminated:
        return EXIT_TERMINATED
    return EXIT_OK
