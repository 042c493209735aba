"""An exported script rebuilds the network by hand: run it, and read its qdiscs and MPTCP endpoints back
through Mininet's CLI."""
import subprocess
import sys

import pytest

from .helpers import leftovers, run_cli

pytestmark = pytest.mark.integration


def test_an_exported_script_builds_the_same_shaped_network(tmp_path):
    script = tmp_path / "net.py"
    r = run_cli("export", "scenarios/e4-delay.yaml", "--primary", "B", timeout=60)
    assert r.returncode == 0, r.stderr
    script.write_text(r.stdout)
    cli = "\n".join(["h1 tc qdisc show dev h1-eth0", "h2 tc qdisc show dev h2-eth1", "h2 ip mptcp endpoint show",
                     "h1 ip mptcp limits show", "h1 ping -c 1 -W 5 10.0.2.2", "exit", ""])
    run = subprocess.run([sys.executable, str(script)], input=cli, capture_output=True, text=True, timeout=300,
                         cwd=tmp_path)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    # e4-delay: path A 10 Mbit/s with 250 ms one way, path B 10 Mbit/s with 15 ms
    assert "netem" in out and "delay 250ms" in out and "delay 15ms" in out, out
    assert "rate 10Mbit" in out
    assert "1 received" in out
    assert "subflows" in out
    assert leftovers() == []
