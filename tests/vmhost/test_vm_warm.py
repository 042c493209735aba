"""Warm by default, booted for real (TCG here): the first VM run leaves its guest up, the next ones use it
with any --out (through its spool), their result sets the same files as a cold run's, --resume works on
such a set, and `vm down` leaves nothing. The cold run, with -q, also shows that a VM run's run.log holds
the boot and the guest's console."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest


pytestmark = pytest.mark.vm_host
REPO = Path(__file__).resolve().parents[2]


def shape(doc):
    """A JSON document's structure: its keys, nested, and its lists' lengths; not its values."""
    if isinstance(doc, dict):
        return {k: shape(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [shape(v) for v in doc]
    return None


def files(result_set: Path) -> list[str]:
    return sorted(str(p.relative_to(result_set)) for p in result_set.rglob("*") if p.is_file())


def the_set(out: Path) -> Path:
    sets = list(out.glob("*/2*"))
    assert len(sets) == 1, sets
    return sets[0]


@pytest.fixture
def warm_env(tmp_path):
    """This test's own warm VM slot, warm by default as for a user (the suite sets TESTBED_KEEP_VM=0)."""
    env = {**os.environ, "TESTBED_WARM_DIR": str(tmp_path / "warm")}
    env.pop("TESTBED_KEEP_VM", None)
    env.pop("CI", None)
    yield env
    subprocess.run([sys.executable, "-m", "runners.cli", "vm", "down"], cwd=REPO, env=env, timeout=120)
    assert not (tmp_path / "warm" / "state.json").exists()


def test_two_warm_runs_pay_one_boot_and_write_what_a_cold_run_writes(tmp_path, warm_env, new_leftovers):
    short = tmp_path / "short.yaml"
    short.write_text((REPO / "scenarios" / "two-paths.yaml").read_text().replace("duration: 10", "duration: 2"))

    def run(out: str, *extra: str, **env: str) -> str:
        r = subprocess.run([sys.executable, "-m", "runners.cli", str(short), "--backend", "vm",
                            "--out", str(tmp_path / out), *extra], cwd=REPO, capture_output=True, text=True,
                           timeout=600, env={**warm_env, **env})
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout

    # the same command line as the warm runs, with -q: the summary only on the terminal, and the whole
    # console in the set's run.log, the host's lines (the boot) and the guest's, each once
    cold = run("cold", "-q", TESTBED_KEEP_VM="0")
    assert "booting micro-VM" not in cold and "MPTCP" in cold, cold
    assert not (tmp_path / "warm" / "state.json").exists()
    log = (the_set(tmp_path / "cold") / "run.log").read_text()
    assert "booting micro-VM" in log and log.count("run r001-mptcp-A: mptcp with primary path A") == 1, log
    assert len(re.findall(r"run r001-mptcp-A: [\d.]+ Mbit/s", log)) == 1, log
    commands = (the_set(tmp_path / "cold") / "commands.log").read_text()
    assert "\tiperf3" in commands or " iperf3 " in commands, commands[-2000:]
    first = run("warm1")
    assert "booting the warm VM" in first and "it stops after 10 min without one" in first
    second = run("warm2")
    assert "running the job without a boot" in second and "booting" not in second
    cold_set, warm_set = the_set(tmp_path / "cold"), the_set(tmp_path / "warm2")
    assert files(warm_set) == files(cold_set)
    c, w = (json.loads((d / "results.json").read_text()) for d in (cold_set, warm_set))
    assert w["metadata"]["vm"]["warm"] and not c["metadata"]["vm"]["warm"]
    assert set(w["metadata"]["phases"]) - set(c["metadata"]["phases"]) == {"warm_vm_job_overhead"}
    # the host's CPU while the guest ran: qemu is the testbed's, under this command or under the warm VM's
    # process (a cold run: 1.25 CPUs of 2 under TCG, 2026-11-26)
    for doc in (c, w):
        assert doc["metadata"]["vm"]["host_cpu"]["testbed_cores"] > 0.3, doc["metadata"]["vm"]
        # and each run's, over its own traffic, read by the guest from the rows the host wrote beside it
        for r in doc["runs"]:
            host = r["fidelity"]["checks"]["host_cpu"]
            assert host["testbed_cores"] > 0.3 and host["others_cores"] >= 0 and 1.5 < host["seconds"] < 6, host
            assert abs(host["clock_offset_s"]) < 5 and not any("host" in n for n in r["fidelity"]["notes"]), r
    for doc in (c, w):
        doc["metadata"].pop("phases")
    # the user's command line: the cold run's -q is one argument more (the guest's own arguments are the
    # same three: the set's scenario copy and its job file, which carries -q)
    cold_argv, warm_argv = c["metadata"]["argv"], w["metadata"]["argv"]
    assert len(cold_argv) == len(warm_argv) + 1 and "-q" in cold_argv, (cold_argv, warm_argv)
    for doc in (c, w):
        doc["metadata"].pop("argv")
        doc["runs"].sort(key=lambda r: r["id"])    # each set shuffles its order
        for r in doc["runs"]:   # which directions a fidelity check judged depends on the traffic (a direction
            # needs 1,000 packets for the loss check: the ACKs' reached it in one set and not the other)
            # (and its reasons and notes, what the machine did: a busy host warns in one set, not the other)
            for key in ("checks", "reasons", "levels", "notes"):
                r.get("fidelity", {}).pop(key, None)
            # one interval between each two per-path samples, whose count follows the sampler's reads (0.3-0.9
            # s each on a slower machine): 11 intervals in one set and 10 in the other in CI, 2026-11-28
            r["path_series_mbps"] = r["path_series_mbps"][:1]
    assert shape(w) == shape(c)
    assert json.loads((warm_set / "metadata.json").read_text())["guest_argv"][0] == str(warm_set / "scenario.yaml")
    status = subprocess.run([sys.executable, "-m", "runners.cli", "vm", "status"], cwd=REPO, capture_output=True,
                            text=True, timeout=60, env=warm_env)
    assert status.returncode == 0 and "s left" in status.stdout, status.stdout
    resumed = run("unused", "--resume", str(warm_set))
    assert "running the job without a boot" in resumed and "0 to go" in resumed, resumed
    assert files(warm_set) == files(cold_set)
    assert new_leftovers() == []
