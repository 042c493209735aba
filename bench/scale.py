"""How the testbed's own time grows with the network (issue 33): writes numbers, asserts nothing.

  - paths: a dual-homed network of 1, 2, 4 and 8 paths (10 Mbit/s, 5 ms each; a scenario has 8 at most, as
    an MPTCP connection has 8 subflows at most), one 5 s MPTCP run
  - clients: a switched network (one OVS switch, the os-ken learning app) of 1, 4, 16 and 32 clients,
    each on a link of its own to the server's switch, one 5 s TCP run with every client sending at once
  - runs: a result set of 25, 50, 100 and 200 runs (lab 5's records, tests/fixtures/records), stored one
    after another as a run set stores them (results.json and runs.csv rewritten after every run): the last
    run's store and the set's stores in all; no network, so it runs where the command runs
Each network group first builds and runs its smallest size once, unrecorded (the first build after a boot is a cold
one). For each size, from the set's metadata.json: building the network, shaping, teardown, and the run's
overhead beyond its traffic. Then per group: the slope of each against the size (least squares: seconds
per path, or per node, a node being a host or a switch), and the first step whose cost per added unit is
over 1.5 times the average of the steps before it, by 0.5 s or more: where growth stops being linear.

Usage: python -m bench.scale [--backend auto|native|vm] [--out DIR] [--only GROUPS]
Writes DIR/<UTC stamp>/bench.json and bench.md (DIR defaults to bench/out).
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # run as a script too

from bench.run import Bench, group_main  # noqa: E402

GROUPS = ("paths", "clients", "runs")
SIZES = {"paths": (1, 2, 4, 8), "clients": (1, 4, 16, 32),    # 8 paths at most: the kernel joins 8 subflows
         "runs": (25, 50, 100, 200)}
RECORDS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "records"   # a TCG guest's, 2026-11-28
NON_LINEAR = 1.5    # a step's cost per added unit over this many times the steps' before it
NOISE_S = 0.5       # ... and by at least this many seconds in all
MEASURES = ("build", "shaping", "teardown", "run_overhead")


def dual_homed(n: int) -> str:
    paths = "\n".join(f"    - {{name: P{k}, bw: 10, delay: 5ms}}" for k in range(1, n + 1))
    return (f"name: scale-paths-{n}\ntopology:\n  kind: dual-homed\n  paths:\n{paths}\n"
            "traffic: {duration: 5}\nruns: {compare: [mptcp], pause: 200ms}\n")


def switched(n: int) -> str:
    clients = [f"h{k}" for k in range(2, n + 2)]
    links = "\n".join(f"    - {{name: l{h}, between: [{h}, s1], bw: 10, delay: 1ms}}" for h in ["h1", *clients])
    return (f"name: scale-clients-{n}\ntopology:\n  kind: switched\n  server: h1\n  clients: [{', '.join(clients)}]\n"
            "  switches:\n    - {name: s1, type: ovs, controller: true}\n  controller: {app: learning}\n"
            f"  links:\n{links}\n  paths:\n    - {{name: A, client_if: 0, server_if: 0}}\n"
            "traffic: {duration: 5, direction: upload}\nruns: {compare: [tcp], pause: 200ms}\n")


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys against xs."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def first_non_linear(units: list[float], ys: list[float]) -> tuple[int, float] | None:
    """(index of the first size whose step costs over NON_LINEAR times, per added unit, what the steps before
    it cost on average, that ratio), or None. A step whose excess over that average is under NOISE_S is not
    counted: TCG's run-to-run noise is that large, and four sizes cannot tell it from a bend."""
    for k in range(2, len(ys)):
        before = (ys[k - 1] - ys[0]) / (units[k - 1] - units[0])
        step = (ys[k] - ys[k - 1]) / (units[k] - units[k - 1])
        excess = (step - max(before, 0.0)) * (units[k] - units[k - 1])
        if step > NON_LINEAR * max(before, 0.0) and excess >= NOISE_S:
            return k, step / before if before > 0 else float("inf")
    return None


def bend_note(bend: tuple[int, float] | None, ys: list[float], sizes, group: str, unit: str) -> str:
    """first_non_linear's answer in words: the ratio, or the seconds added where the steps before cost nothing."""
    if bend is None:
        return "no step over 1.5x the cost per unit before it (by 0.5 s)"
    k, ratio = bend
    how = (f"{ratio:.1f}x the cost per {unit} of the steps before it" if ratio != float("inf") else
           f"{ys[k] - ys[k - 1]:.2f} s more where the steps before it cost nothing")
    return f"first non-linear step: to {sizes[k]} {group}, {how}"


MAKERS = {"paths": dual_homed, "clients": switched}


class ScaleBench(Bench):
    def paths(self) -> None:
        self._group("paths", dual_homed, lambda n: n, "path")

    def clients(self) -> None:
        self._group("clients", switched, lambda n: n + 2, "node")   # the clients, the server and the switch

    def runs(self) -> None:
        """A long set's store: an MPTCP and a TCP record, in turn, three of each per point."""
        from runners.results.store import ResultStore

        records = [json.loads((RECORDS / f"{name}.json").read_text()) for name in ("lab5-mptcp", "lab5-tcp")]
        last = []
        with tempfile.TemporaryDirectory() as tmp:
            for n in SIZES["runs"]:
                store, times = ResultStore(Path(tmp) / f"set-{n}", links_latest=False), []
                for i in range(n):
                    run = dict(records[i % 2], id=f"r{i:04d}", point=f"p{i // 6 + 1:03d}", repeat=i // 2 + 1)
                    t0 = time.perf_counter()
                    store.add_run(run)
                    times.append(time.perf_counter() - t0)
                last.append(times[-1])
                size = (Path(tmp) / f"set-{n}" / "results.json").stat().st_size
                self.add("runs", f"{n} runs: the last run's store", n, round(times[-1], 4), "s", times[-1] / n,
                         f"ratio: s per run in the set; the set's stores {sum(times):.2f} s; results.json "
                         f"{size / 1e6:.1f} MB")
        self.add("runs", "last store: slope per run", f"{SIZES['runs'][0]}-{SIZES['runs'][-1]} runs",
                 round(slope(list(SIZES["runs"]), last), 5), "s/run", None,
                 "each store rewrites the whole set's files: it grows with the set, and the set's stores with its square")

    def _group(self, group: str, make, units_of, unit: str) -> None:
        sizes = SIZES[group]
        seen: dict[str, list[float]] = {m: [] for m in MEASURES}
        # one build of the smallest size first, not recorded: the first build after a boot also reads OVS's,
        # os-ken's and Mininet's files from disk (1 client: 15.8 s cold against 13.4 s for 4 clients warm,
        # TCG micro-VM, 2026-11-27), which made the slope too shallow and the next step look like a bend
        self.run_scenario(f"scale-{group}-warm-up", make(sizes[0]), report=False)
        for n in sizes:
            doc, wall = self.run_scenario(f"scale-{group}-{n}", make(n), report=False)
            ph = doc["metadata"]["phases"]
            run = ph["runs"][0]
            values = {"build": ph["build"], "shaping": ph["shaping"], "teardown": ph["teardown"],
                      "run_overhead": run["overhead"]}
            for m in MEASURES:
                seen[m].append(values[m])
            units = units_of(n)
            self.add(group, f"{n} {group}: build", units, round(ph["build"], 2), "s", ph["build"] / units,
                     f"ratio: s per {unit}; shaping {ph['shaping']:.2f} s, teardown {ph['teardown']:.2f} s, "
                     f"the run {run['overhead']:.2f} s beyond its traffic ("
                     + ", ".join(f"{k} {v:.2f}" for k, v in run.get("steps", {}).items()) + f"); set {wall:.1f} s")
        units = [units_of(n) for n in sizes]
        for m in MEASURES:
            bend = first_non_linear(units, seen[m])
            self.add(group, f"{m}: slope per {unit}", f"{units[0]}-{units[-1]} {unit}s", round(slope(units, seen[m]), 3),
                     f"s/{unit}", None, bend_note(bend, seen[m], sizes, group, unit))


if __name__ == "__main__":
    print(time.strftime("bench.scale %Y-%m-%dT%H:%M:%SZ", time.gmtime()), flush=True)
    # the backend must carry the largest of each chosen group (a switched one needs OVS and the controller)
    sys.exit(group_main("bench.scale", __doc__, GROUPS, ScaleBench,
                        lambda groups: [MAKERS[g](SIZES[g][-1]) for g in groups if g in MAKERS]))
