"""End-to-end runs on a real kernel: Mininet, netem, MPTCP and iperf3, really started: interrupts (and a
run paused after its build), bad input, backup paths, and what -v, -q and a set's logs hold.

On a machine without MPTCP/netem these run inside one micro-VM (see conftest).
"""
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .helpers import REPO, leftovers, run_cli, write_scenario

pytestmark = pytest.mark.integration


def results_of(out_dir: Path, name: str) -> dict:
    sets = sorted(p for p in (out_dir / name).iterdir() if p.name != "latest")
    assert len(sets) == 1, sets
    assert (out_dir / name / "latest").resolve() == sets[0].resolve()
    return json.loads((sets[0] / "results.json").read_text())


SLOW = """\
name: slow
topology:
  kind: dual-homed
  paths:
    - {name: A, bw: 5, delay: 10ms}
    - {name: B, bw: 5, delay: 10ms}
traffic: {duration: 60}
runs: {compare: [mptcp, tcp]}
"""


# Ctrl-C's run is also paused after the build (--pause-after build), as the shell test's second terminal
# would be: the hosts' namespaces are there to look into, and SIGUSR1 lets the run go on.
@pytest.mark.parametrize("sig,code,pause", [(signal.SIGINT, 130, True), (signal.SIGTERM, 143, False)],
                         ids=["ctrl-c", "sigterm"])
def test_interrupt_mid_run_cleans_up(tmp_path, sig, code, pause):
    scen = write_scenario(tmp_path / "slow.yaml", SLOW)
    p = subprocess.Popen([sys.executable, "-u", "-m", "runners.cli", str(scen), "--backend", "native",
                          *(["--pause-after", "build"] if pause else []), "--out", str(tmp_path / "res")],
                         cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    seen, h1, released = [], None, False
    deadline = time.monotonic() + 240
    for line in p.stdout:
        seen.append(line)
        m = re.search(r"h1: nsenter -t (\d+) -n", line)
        h1 = m.group(1) if m else h1
        if line.startswith("to continue: kill -USR1"):
            assert pause and h1, "".join(seen)
            addrs = subprocess.run(["nsenter", "-t", h1, "-n", "ip", "-br", "addr"], capture_output=True,
                                   text=True).stdout
            assert "10.0.1.1" in addrs and "10.0.2.1" in addrs, addrs
            time.sleep(2)
            # still waiting: the process is there, and no run has started (no iperf3 anywhere yet)
            assert p.poll() is None, "".join(seen)
            assert subprocess.run(["pgrep", "-x", "iperf3"], capture_output=True).returncode == 1
            p.send_signal(signal.SIGUSR1)
            released = True
        if line.startswith("run r001-") and " with primary path " in line:   # the first run, MPTCP or TCP
            break
        assert time.monotonic() < deadline, "".join(seen)
    # released, the set goes on to its first run (which the Ctrl-C below then ends)
    assert released == pause, "".join(seen)
    time.sleep(5)  # iperf3 is running now
    assert [x for x in leftovers() if "Mininet host's network namespace" in x], "nothing was running?"
    p.send_signal(sig)
    out, _ = p.communicate(timeout=120)
    assert p.returncode == code, "".join(seen) + out
    assert "Traceback" not in out
    assert leftovers() == []
    d = next((tmp_path / "res" / "slow").iterdir())
    meta = json.loads((d / "metadata.json").read_text())
    assert meta["status"] in ("interrupted", "terminated")


def test_bad_input_as_root_starts_nothing(tmp_path):
    bad = write_scenario(tmp_path / "bad.yaml", SLOW.replace("bw: 5, delay: 10ms}", "bw: 0, delay: 10}", 1))
    r = run_cli(str(bad), "--backend", "native", "--out", str(tmp_path / "res"))
    assert r.returncode == 2
    assert "bad.yaml" in r.stderr and "topology.paths[0].bw" in r.stderr and "topology.paths[0].delay" in r.stderr
    assert not (tmp_path / "res").exists()
    assert leftovers() == []


def test_backup_paths_stay_idle_including_a_backup_primary(tmp_path):
    """Backup on a secondary path (endpoint flag) and on the primary (MP_PRIO once connected). The first
    set also runs with -v and the second with -q: what each prints, and what the set keeps of how it ran
    (commands.log: every command with its node, exit code and seconds; run.log: the console)."""
    base = (REPO / "scenarios" / "two-paths.yaml").read_text().replace("duration: 10", "duration: 6")
    base = base.replace("compare: [mptcp, tcp]", "compare: [mptcp]")
    for backup, verbosity in (("B", "-v"), ("A", "-q")):
        f = write_scenario(tmp_path / f"bk{backup}.yaml", base.replace("backup: []", f"backup: [{backup}]"))
        out = tmp_path / f"o{backup}"
        r = run_cli(str(f), "--backend", "native", verbosity, "--out", str(out))
        assert r.returncode == 0, r.stdout + r.stderr
        (run,) = results_of(out, "two-paths")["runs"]
        assert run["metrics"]["subflows"] == 2
        if backup == "B":
            assert run["paths"]["B"]["share"] < 0.05, run["paths"]
        else:
            # the primary carries data until the join and MP_PRIO (0.3-1.5 s under TCG, as load allows),
            # then idles: judged on the last sample, while the other path runs full
            last = run["path_series_mbps"][-1]
            assert last["t"] >= 4 and last["A"] < 0.5 and last["B"] > 5, run["path_series_mbps"]
            assert run["paths"]["A"]["share"] < 0.3, run["paths"]
        flags = {s["local"]: s.get("backup") for s in run["subflow_list"]}
        assert flags.get("10.0.1.1" if backup == "A" else "10.0.2.1") is True, run["subflow_list"]
        logs_kept(r, next(p for p in (out / "two-paths").iterdir() if p.name != "latest"), verbosity)
    assert leftovers() == []


COMMAND_LINE = re.compile(r"^\S+Z\t(\S+)\t(-?\d+|background)\t(\d+\.\d{3})\t(.+)$")


def logs_kept(r, result_set: Path, verbosity: str) -> None:
    run_log = (result_set / "run.log").read_text()
    assert "run r001-mptcp-A:" in run_log and "MPTCP" in run_log and "\x1b[" not in run_log
    if verbosity == "-q":      # the summary only; the log keeps what -q left out
        assert "run r001" not in r.stdout and "building topology" not in r.stdout and "results:" not in r.stdout
        assert "MPTCP" in r.stdout and r.stderr == "", r.stdout + r.stderr
        return
    # -v: every command on the terminal as it runs; two-paths: the server announces its second address,
    # path B, the backup in the -v set
    assert re.search(r"^\[h2\] ip mptcp endpoint add 10\.0\.2\.2 dev h2-eth1 signal backup$", r.stdout, re.M), \
        r.stdout
    assert re.search(r"^\[h2\] (mptcpize run )?iperf3 -s", r.stdout, re.M)
    lines = (result_set / "commands.log").read_text().splitlines()
    assert lines[0].startswith("# utc")
    parsed = [COMMAND_LINE.match(x) for x in lines[1:]]
    assert all(parsed), [x for x, m in zip(lines[1:], parsed) if not m][:3]
    assert {"h1", "h2"} <= {m.group(1) for m in parsed}
    assert any(m.group(4).startswith("tc qdisc") for m in parsed)
    assert any(m.group(2) == "background" and "iperf3" in m.group(4) for m in parsed)
    assert f"results: {result_set}" in run_log and "[h2] ip mptcp endpoint add" in run_log
