"""Fidelity and overhead benchmark: writes numbers, asserts nothing.

Measures, on whichever backend it lands on (native, or one micro-VM boot):
  - single-path TCP goodput against the configured rate (10, 50, 100, 200 Mbit/s)
  - ping RTT against the configured delay (5, 50, 250 ms one-way)
  - measured loss against the configured loss (0.5 %, 5 %)
  - MPTCP efficiency on 2 and 4 equal disjoint paths: aggregate / sum of per-path TCP
  - run overhead: run-scenario's wall time minus traffic time, run as the VM's
    guest runs it (without the report and the tool versions, which the bare script
    does not make either: a VM run's host does them), against a bare hand-written
    Mininet script (bench/bare_mininet.py) timed in the same session
  - fidelity (docs/fidelity.md): the default scenario with the fidelity sampling on and off, alternated
    (its cost in throughput and per-run wall time), and its verdicts there and on an overload
    (4 paths of 300 Mbit/s)
  - phases (on the host, around the VM): the default scenario (two-paths) with a
    VM boot and with a warm VM, each phase in seconds, and wall time over
    traffic time
Ratios are taken within one session, because these machines are noisy.

Usage: python -m bench.run [--backend auto|native|vm] [--out DIR] [--quick] [--only GROUPS]
Writes DIR/<UTC stamp>/bench.json and bench.md (DIR defaults to bench/out).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # run as a script too

from runners.paths import REPO  # noqa: E402
from runners.results.metadata import read_metadata_file  # noqa: E402
from runners.results.store import atomic_write, utc_stamp  # noqa: E402

GUEST_GROUPS = ("rate", "rtt", "loss", "mptcp", "overhead", "fidelity")   # measured where the network runs
TCP_PAYLOAD_SHARE = 1448 / 1514  # MSS with timestamps over the Ethernet frame netem's rate counts


def scenario_yaml(name: str, paths: list[dict], compare: list[str], duration: float,
                  primaries: list[str] | None = None) -> str:
    lines = [f"name: {name}", "topology:", "  kind: dual-homed", "  paths:"]
    for p in paths:
        lines.append("    - {" + ", ".join(f"{k}: {v}" for k, v in p.items()) + "}")
    lines += ["traffic:", f"  duration: {duration:g}", "runs:", f"  compare: [{', '.join(compare)}]",
              "  pause: 200ms"]
    if primaries:
        lines.append(f"  primaries: [{', '.join(primaries)}]")
    return "\n".join(lines) + "\n"


def as_the_vms_guest(scenario: Path, run_dir: Path) -> list[str]:
    """The command that runs `scenario` natively into `run_dir` as the VM backend's guest does: from a job
    file (runners.backends.vm.guest), without the summary, the report and the tool versions and git
    revision (the host's part: 5.2 s in a fresh process of a TCG guest, 2026-11-25)."""
    import shutil
    from types import SimpleNamespace

    from runners.backends.vm.guest import guest_command, write_job
    from runners.cli.run import build_parser
    from runners.runset.options import RunOptions

    args = build_parser().parse_args([str(scenario), "--backend", "native"])
    args.capture_spec, args.argv, args.started_at, args.process_age = None, [], 0.0, 0.0
    run_dir.mkdir(parents=True)
    shutil.copy(scenario, run_dir / "scenario.yaml")
    return guest_command(run_dir, write_job(RunOptions.from_args(args), SimpleNamespace(file=str(scenario)), run_dir))


class Bench:
    def __init__(self, out: Path, quick: bool):
        self.out = out
        self.quick = quick
        self.work = out / "runs"
        self.work.mkdir(parents=True, exist_ok=True)
        self.rows: list[dict] = []

    def run_scenario(self, name: str, text: str, report: bool = True, env: dict | None = None) -> tuple[dict, float]:
        """Run it natively; without `report`, as the VM's guest runs it (no report, no tool versions)."""
        f = self.work / f"{name}.yaml"
        f.write_text(text)
        argv = ([sys.executable, "-m", "runners.cli", str(f), "--backend", "native", "--out", str(self.work)]
                if report else as_the_vms_guest(f, self.work / name / utc_stamp()))
        t0 = time.monotonic()
        r = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=1800,
                           env={**os.environ, **(env or {})})
        wall = time.monotonic() - t0
        if r.returncode != 0:
            raise RuntimeError(f"{name} failed: {r.stdout[-2000:]}{r.stderr[-2000:]}")
        d = sorted((self.work / name).iterdir())[-1]
        return json.loads((d / "results.json").read_text()), wall

    def add(self, group: str, case: str, configured, measured, unit: str, ratio=None, note: str = "") -> None:
        row = {"group": group, "case": case, "configured": configured, "measured": measured, "unit": unit,
               "ratio": ratio, "note": note}
        self.rows.append(row)
        print(f"{group:10s} {case:28s} configured {configured!s:>8} measured {measured!s:>10} {unit:7s} "
              f"ratio {ratio if ratio is None else round(ratio, 3)!s:>6} {note}", flush=True)

    # ------------------------------------------------------------------ cases

    def rates(self) -> None:
        for rate in ([10, 100] if self.quick else [10, 50, 100, 200]):
            doc, _ = self.run_scenario(f"rate-{rate}", scenario_yaml(
                f"rate-{rate}", [{"name": "A", "bw": rate, "delay": "2ms", "queue": 200}], ["tcp"], 10))
            got = doc["runs"][0]["metrics"]["throughput_mbps"]
            self.add("rate", f"TCP goodput at {rate} Mbit/s", rate, round(got, 2), "Mbit/s",
                     got / (rate * TCP_PAYLOAD_SHARE), "ratio to the goodput the rate allows (x1448/1514)")

    def delays(self) -> None:
        for delay in [5, 50, 250]:
            doc, _ = self.run_scenario(f"delay-{delay}", scenario_yaml(
                f"delay-{delay}", [{"name": "A", "bw": 10, "delay": f"{delay}ms"}], ["tcp"], 2))
            rtt = doc["runs"][0]["paths"]["A"]["rtt_avg_ms"]
            self.add("rtt", f"ping RTT, {delay} ms one-way", 2 * delay, rtt, "ms", rtt / (2 * delay))

    def losses(self) -> None:
        for loss in [0.5, 5]:
            name = f"loss-{str(loss).replace('.', '_')}"
            doc, _ = self.run_scenario(name, scenario_yaml(
                name, [{"name": "A", "bw": 10, "delay": "5ms", "loss": loss}],
                ["tcp"], 10 if self.quick else 20))
            p = doc["runs"][0]["paths"]["A"]
            self.add("loss", f"data-direction loss {loss}%", loss, round(p["loss_pct"], 3), "%",
                     p["loss_pct"] / loss, f"over {p['packets_sent']} packets")

    def efficiency(self) -> None:
        for n in [2, 4]:
            names = "ABCD"[:n]
            paths = [{"name": x, "bw": 10, "delay": "10ms"} for x in names]
            base, _ = self.run_scenario(f"eff{n}-tcp", scenario_yaml(f"eff{n}-tcp", paths, ["tcp"], 10, list(names)))
            mp, _ = self.run_scenario(f"eff{n}-mptcp", scenario_yaml(f"eff{n}-mptcp", paths, ["mptcp"], 10))
            per_path = sum(r["metrics"]["throughput_mbps"] for r in base["runs"])
            agg = mp["runs"][0]["metrics"]["throughput_mbps"]
            self.add("mptcp", f"efficiency, {n} x 10 Mbit/s", round(per_path, 2), round(agg, 2), "Mbit/s",
                     agg / per_path, f"subflows {mp['runs'][0]['metrics']['subflows']}")

    def overhead(self) -> None:
        secs = 5
        doc, wall = self.run_scenario("overhead", scenario_yaml(
            "overhead", [{"name": "A", "bw": 10, "delay": "5ms"}], ["tcp"], secs), report=False)
        secs = doc["runs"][0]["metrics"]["seconds"] or secs
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, str(REPO / "bench" / "bare_mininet.py"), "10", "5", str(secs)],
                           capture_output=True, text=True, timeout=600)
        bare = time.monotonic() - t0
        if r.returncode != 0:
            raise RuntimeError(f"bare Mininet script failed: {r.stderr[-2000:]}")
        self.add("overhead", "run-scenario, 1 path, 1 run", round(secs, 2), round(wall - secs, 2), "s",
                 (wall - secs) / (bare - secs), f"bare Mininet script: {bare - secs:.2f} s beyond traffic; "
                 "report not included (a phase of its own)")
        # what one more run costs: run-scenario's run beyond its traffic (pings, counters, endpoints and
        # iperf3's start and end) against the bare script's run (its server, its 0.5 s sleep, iperf3)
        bare_secs = json.loads(r.stdout)["end"]["sum_received"]["seconds"]
        bare_run = float(r.stderr.rsplit("run_wall_s=", 1)[1].split()[0]) - bare_secs
        ours_run = doc["metadata"]["phases"]["runs"][0]["overhead"]
        self.add("overhead", "per run: run-scenario's against the bare script's", round(secs, 2), round(ours_run, 2),
                 "s", ours_run / bare_run, f"bare Mininet script's run: {bare_run:.2f} s beyond its traffic; "
                 "ours measures RTT and counters too")
        for name, value in sorted(doc["metadata"].get("phases", {}).items()):
            if isinstance(value, (int, float)):
                self.add("overhead", f"run-scenario phase: {name}", None, round(value, 2), "s")
        for run in doc["metadata"].get("phases", {}).get("runs", []):
            self.add("overhead", "run-scenario phase: per-run overhead", None, run["overhead"], "s",
                     note=", ".join(f"{k} {v:.2f}" for k, v in run.get("steps", {}).items()))

    def fidelity(self) -> None:
        """The sampling's cost: the default scenario with it on and off, alternated, in this one session;
        then each run's fidelity there and on an overload."""
        text = (REPO / "scenarios" / "two-paths.yaml").read_text()
        seen: dict[str, list] = {"on": [], "off": []}
        for k in range(2 if self.quick else 3):
            for state in (("on", "off") if k % 2 == 0 else ("off", "on")):
                doc, _ = self.run_scenario(f"fidelity-{state}", text, report=False,
                                           env={"TESTBED_FIDELITY_SAMPLING": "1" if state == "on" else "0"})
                walls = {r["id"]: r["wall"] for r in doc["metadata"]["phases"]["runs"]}
                seen[state] += [(r["mode"], r["metrics"]["throughput_mbps"], walls[r["id"]], r) for r in doc["runs"]]
        for mode in ("mptcp", "tcp"):
            on = [x for x in seen["on"] if x[0] == mode]
            off = [x for x in seen["off"] if x[0] == mode]
            mean = lambda xs, i: sum(x[i] for x in xs) / len(xs)   # noqa: E731
            self.add("fidelity", f"default scenario {mode}: Mbit/s, sampling on/off", round(mean(off, 1), 3),
                     round(mean(on, 1), 3), "Mbit/s", mean(on, 1) / mean(off, 1),
                     f"on {[round(x[1], 2) for x in on]}, off {[round(x[1], 2) for x in off]}")
            self.add("fidelity", f"default scenario {mode}: run wall, sampling on/off", round(mean(off, 2), 3),
                     round(mean(on, 2), 3), "s", mean(on, 2) - mean(off, 2), "ratio column: on minus off, s")
        for state in ("on", "off"):
            for mode, _, _, r in seen[state]:
                f = r.get("fidelity") or {}
                self.add("fidelity", f"default scenario {mode}, sampling {state}: {f.get('status')}", None,
                         round(r["metrics"]["throughput_mbps"], 2), "Mbit/s", note=_fidelity_note(f))
        overload = scenario_yaml("overload", [{"name": x, "bw": 300, "delay": "5ms", "queue": 100} for x in "ABCD"],
                                 ["mptcp", "tcp"], 10)
        doc, _ = self.run_scenario("fidelity-overload", overload, report=False)
        for r in doc["runs"]:
            f = r.get("fidelity") or {}
            self.add("fidelity", f"4 x 300 Mbit/s {r['mode']}: {f.get('status')}", 1200 if r["mode"] == "mptcp" else 300,
                     round(r["metrics"]["throughput_mbps"], 1), "Mbit/s", note=_fidelity_note(f))

    def write(self, backend: dict) -> None:
        doc = {"date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "kernel": platform.release(),
               "backend": backend, "rows": self.rows}
        write_doc(self.out, doc)


def _fidelity_note(f: dict) -> str:
    """The figures a fidelity verdict rests on, in one line."""
    c = f.get("checks") or {}
    cpu = c.get("cpu") or {}
    parts = [f"idle {cpu.get('idle_pct')} %, saturated {cpu.get('saturated_pct')} %, one CPU saturated "
             f"{cpu.get('one_cpu_saturated_pct')} %, softirq {cpu.get('softirq_pct')} %" if cpu else "no CPU samples"]
    parts += [f"{d}: {x.get('rate_ratio')} of rate over {x.get('backlogged_s')} s backlogged, qlen max {x.get('qlen_max')}"
              for d, x in (c.get("shaping") or {}).items() if x.get("backlogged_s")]
    parts += [f"RTT {p} +{x['excess_ms']} ms" for p, x in (c.get("delay") or {}).items()]
    if c.get("load_rtt"):
        parts.append(f"sender RTT {c['load_rtt']['sender_ms']} ms, {c['load_rtt']['excess_ms']:+} ms beyond the "
                     f"{c['load_rtt']['explained_ms']} ms explained")
    if c.get("retransmissions"):
        parts.append(f"retransmitted {c['retransmissions']['retransmitted']}, shaping dropped "
                     f"{c['retransmissions']['shaping_dropped']}")
    parts += [f"drops {c['drops']}"] if c.get("drops") else []
    return "; ".join(parts + (f.get("reasons") or []))


def phases(out: Path, rows: list[dict]) -> None:
    """The default scenario in the VM backend, with a boot and with a warm VM (the VM shares results/
    of this checkout and `out`)."""
    from runners.backends.vm import warm as warmvm

    def add(case, configured, measured, unit, ratio=None, note=""):
        rows.append({"group": "phases", "case": case, "configured": configured, "measured": measured,
                     "unit": unit, "ratio": ratio, "note": note})
        print(f"phases     {case:40s} {measured!s:>8} {unit} {'' if ratio is None else round(ratio, 3)} {note}",
              flush=True)

    def default_scenario(label: str) -> None:
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "runners.cli", str(REPO / "scenarios" / "two-paths.yaml"),
                            "--backend", "vm", "--out", str(out / "phases"), "--keep-vm", "0s"],
                           cwd=REPO, capture_output=True, text=True, timeout=1800)
        wall = time.monotonic() - t0
        if r.returncode != 0:
            raise RuntimeError(f"default scenario ({label}) failed: {r.stdout[-2000:]}{r.stderr[-2000:]}")
        d = sorted((out / "phases" / "two-paths").iterdir())[-1]
        doc = json.loads((d / "results.json").read_text())
        meta = read_metadata_file(d)
        traffic = sum(run["metrics"]["seconds"] or 0 for run in doc["runs"])
        add(f"default scenario {label}: wall / traffic", round(traffic, 2), round(wall, 2), "s", wall / traffic,
            f"backend {meta.get('backend')}")
        ph = meta.get("phases", {})
        for name in ("vm_boot_and_exit", "warm_vm_job_overhead", "python_start", "prepare", "build", "shaping",
                     "teardown", "report"):
            if name in ph:
                add(f"default scenario {label}: {name}", None, ph[name], "s")
        for run in ph.get("runs", []):
            add(f"default scenario {label}: per-run overhead", None, run["overhead"], "s",
                note=", ".join(f"{k} {v:.2f}" for k, v in run.get("steps", {}).items()))

    vm = warmvm.default()
    was_up = vm.state() is not None
    if was_up:
        warmvm.stop(vm)
    try:
        default_scenario("with a VM boot")
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-m", "runners.cli", "vm", "up", "--share", str(out)], cwd=REPO,
                       check=True, timeout=900, capture_output=True)
        add("warm VM: vm up", None, round(time.monotonic() - t0, 2), "s")
        default_scenario("with a warm VM")
    finally:
        warmvm.stop(vm, log=lambda m: None)


def write_doc(out: Path, doc: dict) -> None:
    """bench.json and its markdown table, both from the same document."""
    atomic_write(out / "bench.json", json.dumps(doc, indent=2) + "\n")
    b = doc["backend"]
    md = [f"Benchmark of {doc['date_utc']}, kernel {doc['kernel']}, backend {b.get('name')}"
          f"{' (' + b['accel'] + ')' if b.get('accel') else ''}", "",
          "| group | case | configured | measured | unit | ratio | note |", "|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        ratio = "" if r["ratio"] is None else f"{r['ratio']:.3f}"
        md.append(f"| {r['group']} | {r['case']} | {r['configured']} | {r['measured']} | {r['unit']} | {ratio} "
                  f"| {r['note']} |")
    atomic_write(out / "bench.md", "\n".join(md) + "\n")


def in_the_vm(module: str, out: Path, argv: list[str], host_rows: list[dict] = ()) -> int:
    """Run `python -m module --backend native --dir out *argv` in one micro-VM boot, then write its
    bench.json and bench.md with the VM's facts (and `host_rows`, measured on the host, first)."""
    from runners.backends.vm.boot import plan_vm, run_in_vm

    plan = plan_vm([sys.executable, "-m", module, "--backend", "native", "--dir", str(out), *argv], [out])
    code = run_in_vm(plan)
    doc_path = out / "bench.json"
    if doc_path.exists():
        doc = json.loads(doc_path.read_text())
        doc["rows"] = list(host_rows) + doc["rows"]
        doc["backend"].update(name="vm", accel="KVM" if plan.kvm else "TCG", kernel_image=plan.kernel.name,
                              cpus=plan.cpus, memory=plan.memory)
        write_doc(out, doc)
        print((out / "bench.md").read_text())
    return code


def group_main(module: str, doc: str, groups: tuple[str, ...], bench_cls, probes) -> int:
    """The command line of a benchmark made of named groups (bench.events, bench.scale): each group a method
    of `bench_cls` (a Bench), run natively or, where the scenarios `probes(chosen groups)` gives (YAML texts)
    cannot all run here, in one micro-VM boot."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=["auto", "native", "vm"], default="auto")
    ap.add_argument("--out", default=str(REPO / "bench" / "out"))
    ap.add_argument("--only", help=f"comma-separated groups: {','.join(groups)} (default: all)")
    ap.add_argument("--dir", help=argparse.SUPPRESS)  # internal: exact output folder (VM guest side)
    args = ap.parse_args()
    chosen = args.only.split(",") if args.only else list(groups)
    for w in chosen:
        if w not in groups:
            ap.error(f"--only: unknown group {w!r} (groups: {', '.join(groups)})")
    from runners.backends.choice import choose_backend
    from scenarios.spec.loader import parse_scenario

    out = Path(args.dir) if args.dir else Path(args.out).resolve() / utc_stamp()
    out.mkdir(parents=True, exist_ok=True)
    texts = probes(chosen)   # none when the chosen groups build no network: they run where asked, else here
    choice = choose_backend(args.backend, [parse_scenario(text) for text in texts]) if texts else None
    if choice is not None and choice.refusal:
        print(choice.refusal, file=sys.stderr)
        return 1
    if (choice.name if choice is not None else args.backend) == "vm":
        return in_the_vm(module, out, ["--only", ",".join(chosen)])
    b = bench_cls(out, quick=False)
    try:
        for w in chosen:
            getattr(b, w)()
    finally:
        b.write({"name": "native"})
    print(f"wrote {out / 'bench.json'} and {out / 'bench.md'}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=["auto", "native", "vm"], default="auto")
    ap.add_argument("--out", default=str(REPO / "bench" / "out"))
    ap.add_argument("--quick", action="store_true", help="fewer rates, shorter loss runs")
    ap.add_argument("--only", help="comma-separated groups to measure: "
                                   f"{','.join([*GUEST_GROUPS, 'phases'])} (default: all)")
    ap.add_argument("--dir", help=argparse.SUPPRESS)  # internal: exact output folder (VM guest side)
    args = ap.parse_args()
    for w in (args.only.split(",") if args.only else []):
        if w not in (*GUEST_GROUPS, "phases"):
            ap.error(f"--only: unknown group {w!r} (groups: {', '.join([*GUEST_GROUPS, 'phases'])})")
    from runners.backends.choice import choose_backend
    from scenarios.spec.loader import load_scenario

    out = Path(args.dir) if args.dir else Path(args.out).resolve() / utc_stamp()
    out.mkdir(parents=True, exist_ok=True)
    choice = choose_backend(args.backend, [load_scenario(REPO / "scenarios" / "two-paths.yaml")])
    if choice.refusal:
        print(choice.refusal, file=sys.stderr)
        return 1
    backend = choice.name
    groups = args.only.split(",") if args.only else [*GUEST_GROUPS, "phases"]
    host_rows: list[dict] = []
    if "phases" in groups:
        phases(out, host_rows)   # on the host, around the VM: first, before the guest's groups
        groups.remove("phases")
    if backend == "vm":
        if not groups:
            write_doc(out, {"date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                            "kernel": platform.release(), "backend": {"name": "host"}, "rows": host_rows})
            print((out / "bench.md").read_text())
            return 0
        return in_the_vm("bench.run", out, (["--quick"] if args.quick else []) + ["--only", ",".join(groups)],
                         host_rows)
    b = Bench(out, args.quick)
    b.rows += host_rows
    steps = {"rate": b.rates, "rtt": b.delays, "loss": b.losses, "mptcp": b.efficiency, "overhead": b.overhead,
             "fidelity": b.fidelity}
    try:
        for w in groups:
            steps[w]()
    finally:
        b.write({"name": "native"})
    print(f"wrote {out / 'bench.json'} and {out / 'bench.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
