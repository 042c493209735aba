"""`run-scenario`: validate a scenario, get a capable kernel, run it, write results.

Exit codes: 0 ok, 2 bad input (nothing was started), 1 a failure while
running (finished runs are kept), 130 interrupted by Ctrl-C, 143 by SIGTERM.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

EXIT_OK, EXIT_FAIL, EXIT_INPUT = 0, 1, 2
REPO = Path(__file__).resolve().parent.parent

EPILOG = """\
backends:
  native  run on this kernel, as root. Needs MPTCP, sch_netem, Mininet and iperf3;
          a probe checks them all first and names whatever is missing.
  vm      boot a micro-VM (virtme-ng) with a distribution kernel from /boot (or --kernel)
          and run the native backend inside it. Uses KVM when it can boot a stock
          kernel, else TCG emulation (slower: ~20 s boot).
  auto    native when the probe passes, else vm (the default).

results:
  <out>/<scenario name>/<UTC timestamp>/ holds scenario.yaml, metadata.json,
  results.json, runs.csv (tidy: one row per run, metric and path) and raw/ tool output.

exit codes:
  0 ok; 1 failure while running (finished runs are kept); 2 bad input or bad
  command line (nothing was started); 130 Ctrl-C; 143 SIGTERM.

examples:
  run-scenario scenarios/two-paths.yaml
  run-scenario scenarios/e4-delay.yaml --repeat 3 --backend vm
  run-scenario --check scenarios/*.yaml
  run-scenario --schema > scenario.schema.json
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="run-scenario", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
        description="Run an MPTCP experiment described by a YAML scenario file in a Mininet network: "
                    "MPTCP against a TCP baseline, with throughput, per-path bytes, out-of-order "
                    "counts, retransmissions, subflows and RTT.")
    p.add_argument("scenario", nargs="*", help="scenario YAML file (several with --check)")
    p.add_argument("--out", default=str(REPO / "results"), metavar="DIR",
                   help="base folder for results (default: results/ of this checkout)")
    p.add_argument("--backend", choices=["auto", "native", "vm"], default="auto",
                   help="where to run (default: auto)")
    p.add_argument("--repeat", type=int, metavar="N", help="override runs.repeat")
    p.add_argument("--kernel", metavar="PATH", help="vm backend: kernel image to boot (default: newest /boot/vmlinuz-*)")
    p.add_argument("--vm-memory", default="2G", metavar="SIZE", help="vm backend: guest memory (default: 2G)")
    p.add_argument("--vm-cpus", type=int, metavar="N", help="vm backend: guest CPUs (default: host CPUs, at most 4)")
    p.add_argument("--check", action="store_true", help="only validate the scenario file(s) and exit")
    p.add_argument("--schema", action="store_true", help="print the scenario JSON Schema and exit")
    p.add_argument("--run-dir", help=argparse.SUPPRESS)  # internal: exact result folder (VM guest side)
    return p


def _err(msg: str) -> None:
    print(f"run-scenario: error: {msg}", file=sys.stderr)


def _git_revision() -> dict:
    try:
        rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip() != ""
        return {"git_revision": rev or None, "git_dirty": dirty}
    except (OSError, subprocess.SubprocessError):
        return {"git_revision": None, "git_dirty": None}


def _tool_version(argv: list[str]) -> str | None:
    if not shutil.which(argv[0]):
        return None
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        return (r.stdout or r.stderr).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def native_metadata(probe_facts: dict) -> dict:
    try:
        from mininet.net import VERSION as mn_version
    except ImportError:
        mn_version = None
    return {
        "backend_kernel": platform.release(),
        "kernel_version": platform.version(),
        "python": platform.python_version(),
        "mininet": mn_version,
        "iperf3": _tool_version(["iperf3", "--version"]),
        "iperf3_mptcp": "native --mptcp" if probe_facts.get("iperf3_native_mptcp") else "mptcpize run",
        "iproute2": _tool_version(["ip", "-V"]),
        "mptcpize": shutil.which("mptcpize"),
        **_git_revision(),
    }


def summary(runs: list[dict]) -> str:
    """A short table of the runs, and the MPTCP/TCP ratio of mean throughputs."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="runs", show_lines=False)
    for col in ("run", "mode", "primary", "Mbit/s", "subflows", "OFO tcp/mptcp", "retrans", "bytes per path"):
        table.add_column(col)
    for r in runs:
        m = r["metrics"]
        shares = "  ".join(f"{n}:{(p.get('share') or 0) * 100:.0f}%" for n, p in r["paths"].items())
        table.add_row(r["id"], r["mode"] + ("" if r["status"] == "ok" else f" ({r['status']})"), r["primary"],
                      f"{m['throughput_mbps']:.2f}", str(m["subflows"]), f"{m['ofo_tcp']}/{m['ofo_mptcp']}",
                      str(m["retrans_segs"]), shares)
    console = Console(record=True, width=110, force_terminal=False, file=io.StringIO())
    console.print(table)
    for primary in sorted({r["primary"] for r in runs}):
        means = {}
        for mode in ("mptcp", "tcp"):
            vals = [r["metrics"]["throughput_mbps"] for r in runs if r["mode"] == mode and r["primary"] == primary]
            if vals:
                means[mode] = sum(vals) / len(vals)
        if "mptcp" in means and means.get("tcp"):
            console.print(f"primary {primary}: MPTCP / TCP throughput {means['mptcp']:.2f} / {means['tcp']:.2f} "
                          f"Mbit/s = {means['mptcp'] / means['tcp']:.2f}x")
        elif means:
            console.print(f"primary {primary}: " + ", ".join(f"{m} {v:.2f} Mbit/s" for m, v in means.items()))
    return console.export_text()


def _run_native(args, scenario, text: str, run_dir: Path, report) -> int:
    from .native import NativeRunner, RunFailure, Terminated
    from .nsexec import CommandError
    from .results import ResultStore

    store = ResultStore(run_dir)
    store.write_scenario(text)
    started = time.time()
    store.set_metadata(scenario=scenario.name, backend=os.environ.get("TESTBED_BACKEND", "native"),
                       started_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
                       argv=sys.argv, **native_metadata(report.facts), probe=report.facts)
    print(f"results: {run_dir}", flush=True)
    runner = NativeRunner(scenario, store, report, log=lambda m: print(m, flush=True))
    code, status = EXIT_OK, "ok"
    try:
        runner.run()
    except KeyboardInterrupt:
        code, status = 130, "interrupted"
        _err(f"interrupted; {len(store.runs)} finished run(s) kept in {run_dir}")
    except Terminated:
        code, status = 143, "terminated"
        _err(f"terminated; {len(store.runs)} finished run(s) kept in {run_dir}")
    except (RunFailure, CommandError) as e:
        code, status = EXIT_FAIL, "failed"
        _err(f"{e}\n{len(store.runs)} finished run(s) kept in {run_dir}")
    store.set_metadata(status=status, finished_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       wall_seconds=round(time.time() - started, 2))
    if store.runs:
        print(summary(store.runs), flush=True)
    return code


def _run_vm(args, scenario, scenario_path: Path, text: str, run_dir: Path) -> int:
    from .results import ResultStore
    from .vm import VmError, kernel_release, plan_vm, run_in_vm

    guest = [sys.executable, "-m", "runners.cli", str(run_dir / "scenario.yaml"),
             "--backend", "native", "--run-dir", str(run_dir)]
    if args.repeat:
        guest += ["--repeat", str(args.repeat)]
    try:
        plan = plan_vm(guest, [run_dir], kernel=Path(args.kernel) if args.kernel else None,
                       memory=args.vm_memory, cpus=args.vm_cpus)
    except VmError as e:
        _err(str(e))
        return EXIT_FAIL
    ResultStore(run_dir).write_scenario(text)
    print(f"results: {run_dir}", flush=True)
    t0 = time.time()
    try:
        code = run_in_vm(plan)
    except VmError as e:
        _err(str(e))
        return EXIT_FAIL
    except KeyboardInterrupt:
        _err(f"interrupted; finished runs are kept in {run_dir}")
        return 130
    # The guest wrote metadata.json; add what only the host knows.
    meta_path = run_dir / "metadata.json"
    if meta_path.exists():
        store = ResultStore(run_dir)
        store.metadata = json.loads(meta_path.read_text())
        store.set_metadata(backend="vm", vm={"kernel_image": str(plan.kernel), "kernel": kernel_release(plan.kernel),
                                             "accel": "kvm" if plan.kvm else "tcg", "accel_reason": plan.accel_reason,
                                             "cpus": plan.cpus, "memory": plan.memory,
                                             "wall_seconds_with_boot": round(time.time() - t0, 2)},
                           host_kernel=platform.release())
    elif code == 0:
        _err("the VM finished but wrote no results")
        return EXIT_FAIL
    if code not in (0, 130, 143) and not (run_dir / "results.json").exists():
        _err(f"the VM run failed (exit {code}) before any run finished")
    return code if code in (0, 1, 2, 130, 143) else EXIT_FAIL


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from scenarios.loader import ScenarioError, load_scenario
    from scenarios.model import json_schema

    if args.schema:
        print(json.dumps(json_schema(), indent=2))
        return EXIT_OK
    if not args.scenario:
        parser.error("a scenario file is required (see --help)")
    if args.repeat is not None and not 1 <= args.repeat <= 1000:
        parser.error("--repeat must be between 1 and 1000")
    if args.check:
        bad = 0
        for f in args.scenario:
            try:
                load_scenario(f)
                print(f"{f}: ok")
            except ScenarioError as e:
                print(e.render(), file=sys.stderr)
                bad += 1
        return EXIT_INPUT if bad else EXIT_OK
    if len(args.scenario) > 1:
        parser.error("give one scenario file to run (several only with --check)")
    path = Path(args.scenario[0])
    try:
        scenario = load_scenario(path)
    except ScenarioError as e:
        print(e.render(), file=sys.stderr)
        return EXIT_INPUT
    if args.repeat:
        scenario = scenario.model_copy(update={"runs": scenario.runs.model_copy(update={"repeat": args.repeat})})
    text = path.read_text(encoding="utf-8")

    from .probe import probe
    from .results import new_run_dir

    backend = args.backend
    report = None
    if backend in ("auto", "native"):
        report = probe(scenario)
        if not report.ok:
            if backend == "native":
                _err(report.render())
                return EXIT_FAIL
            print(f"auto: {report.render()}\nauto: using the vm backend", flush=True)
            backend = "vm"
        else:
            backend = "native"
    run_dir = Path(args.run_dir) if args.run_dir else new_run_dir(Path(args.out).resolve(), scenario.name)
    if backend == "native":
        return _run_native(args, scenario, text, run_dir, report)
    return _run_vm(args, scenario, path, text, run_dir)


if __name__ == "__main__":
    sys.exit(main())
