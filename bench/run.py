"""Fidelity and overhead benchmark: writes numbers, asserts nothing.

Measures, on whichever backend it lands on (native, or one micro-VM boot):
  - single-path TCP goodput against the configured rate (10, 50, 100, 200 Mbit/s)
  - ping RTT against the configured delay (5, 50, 250 ms one-way)
  - measured loss against the configured loss (0.5 %, 5 %)
  - MPTCP efficiency on 2 and 4 equal disjoint paths: aggregate / sum of per-path TCP
  - run overhead: run-scenario's wall time minus traffic time, against a bare
    hand-written Mininet script (bench/bare_mininet.py) timed in the same session
Ratios are taken within one session, because these machines are noisy.

Usage: python -m bench.run [--backend auto|native|vm] [--out DIR] [--quick]
Writes DIR/<UTC stamp>/bench.json and bench.md (DIR defaults to bench/out).
"""
from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from runners.results import atomic_write, utc_stamp  # noqa: E402

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


class Bench:
    def __init__(self, out: Path, quick: bool):
        self.out = out
        self.quick = quick
        self.work = out / "runs"
        self.work.mkdir(parents=True, exist_ok=True)
        self.rows: list[dict] = []

    def run_scenario(self, name: str, text: str) -> tuple[dict, float]:
        f = self.work / f"{name}.yaml"
        f.write_text(text)
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "runners.cli", str(f), "--backend", "native",
                            "--out", str(self.work)], cwd=REPO, capture_output=True, text=True, timeout=1800)
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
        _, wall = self.run_scenario("overhead", scenario_yaml(
            "overhead", [{"name": "A", "bw": 10, "delay": "5ms"}], ["tcp"], secs))
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, str(REPO / "bench" / "bare_mininet.py"), "10", "5", str(secs)],
                           capture_output=True, text=True, timeout=600)
        bare = time.monotonic() - t0
        if r.returncode != 0:
            raise RuntimeError(f"bare Mininet script failed: {r.stderr[-2000:]}")
        self.add("overhead", "run-scenario, 1 path, 1 run", secs, round(wall - secs, 2), "s",
                 (wall - secs) / (bare - secs), f"bare Mininet script: {bare - secs:.2f} s beyond traffic")

    def write(self, backend: dict) -> None:
        doc = {"date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "kernel": platform.release(),
               "backend": backend, "rows": self.rows}
        write_doc(self.out, doc)


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=["auto", "native", "vm"], default="auto")
    ap.add_argument("--out", default=str(REPO / "bench" / "out"))
    ap.add_argument("--quick", action="store_true", help="fewer rates, shorter loss runs")
    ap.add_argument("--only", help="comma-separated groups to measure: rate,rtt,loss,mptcp,overhead (default: all)")
    ap.add_argument("--dir", help=argparse.SUPPRESS)  # internal: exact output folder (VM guest side)
    args = ap.parse_args()
    from runners.probe import probe
    from scenarios.loader import load_scenario

    out = Path(args.dir) if args.dir else Path(args.out).resolve() / utc_stamp()
    out.mkdir(parents=True, exist_ok=True)
    backend = args.backend
    if backend != "vm":
        report = probe(load_scenario(REPO / "scenarios" / "two-paths.yaml"))
        if not report.ok:
            if backend == "native":
                print(report.render(), file=sys.stderr)
                return 1
            backend = "vm"
        else:
            backend = "native"
    if backend == "vm":
        from runners.vm import plan_vm, run_in_vm
        guest = [sys.executable, "-m", "bench.run", "--backend", "native", "--dir", str(out)]
        if args.quick:
            guest.append("--quick")
        if args.only:
            guest += ["--only", args.only]
        plan = plan_vm(guest, [out])
        code = run_in_vm(plan)
        doc_path = out / "bench.json"
        if doc_path.exists():
            doc = json.loads(doc_path.read_text())
            doc["backend"].update(name="vm", accel="KVM" if plan.kvm else "TCG", kernel_image=plan.kernel.name,
                                  cpus=plan.cpus, memory=plan.memory)
            write_doc(out, doc)
            print((out / "bench.md").read_text())
        return code
    b = Bench(out, args.quick)
    steps = {"rate": b.rates, "rtt": b.delays, "loss": b.losses, "mptcp": b.efficiency, "overhead": b.overhead}
    wanted = args.only.split(",") if args.only else list(steps)
    for w in wanted:
        if w not in steps:
            ap.error(f"--only: unknown group {w!r} (groups: {', '.join(steps)})")
    try:
        for w in wanted:
            steps[w]()
    finally:
        b.write({"name": "native"})
    print(f"wrote {out / 'bench.json'} and {out / 'bench.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
