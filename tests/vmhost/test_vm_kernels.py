"""A kernel sweep through the VM backend, from the host: kernel 6.12 from /boot (named by its release
prefix) and a Debian 6.1 kernel that is NOT installed, unpacked to a folder of its own with its modules
in another (`--modules`), as a stand-in for a kernel one built oneself. One result set must hold both
kernels' runs, their kernel columns, each kernel's probe, and a cross-kernel verdict."""
import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runners.backends.vm.kernels import image_release

pytestmark = pytest.mark.vm_host
REPO = Path(__file__).resolve().parents[2]
CACHE = Path("/var/cache/mptcp-testbed/kernels")
SCENARIO = """name: kernel-pair
topology:
  kind: dual-homed
  paths:
    - {name: A, bw: 10, delay: 10ms, queue: 100}
    - {name: B, bw: 10, delay: 10ms, queue: 100}
traffic: {duration: 5}   # 3 s left the first run on a freshly booted kernel without an `ss` sample at times (2026-11-25)
runs: {compare: [mptcp], repeat: 2}
expect:
  - name: subflows-kept
    check: mptcp@6.12.subflows >= mptcp@6.1.subflows
  - name: throughput-kept
    check: mptcp@6.12.throughput_mbps >= 0.5 * mptcp@6.1.throughput_mbps
"""


def installed_abis() -> set[str]:
    return {p.name.removeprefix("vmlinuz-") for p in Path("/boot").glob("vmlinuz-*")}


def own_kernel() -> tuple[Path, Path]:
    """(bzImage, modules folder) of a Debian 6.1 kernel this machine has not installed: the newest
    linux-image-6.1.0-N-amd64 that apt can download, unpacked once into the cache."""
    names = subprocess.run(["apt-cache", "search", "--names-only", r"^linux-image-6\.1\.0-[0-9]+-amd64$"],
                           capture_output=True, text=True, timeout=120).stdout.split()
    abis = sorted({n.removeprefix("linux-image-") for n in names if n.startswith("linux-image-6.1.0-")},
                  key=lambda r: int(r.split("-")[1]), reverse=True)
    for release in [r for r in abis if r not in installed_abis()]:
        home = CACHE / release
        image, modules = home / "bzImage", home / "modules"
        if image.is_file() and (modules / "lib" / "modules" / release / "modules.order").is_file():
            return image, modules
        shutil.rmtree(home, ignore_errors=True)
        (home / "deb").mkdir(parents=True)
        got = subprocess.run(["apt-get", "download", f"linux-image-{release}"], cwd=home / "deb",
                             capture_output=True, text=True, timeout=600)
        debs = list((home / "deb").glob("*.deb"))
        if got.returncode != 0 or not debs:
            continue
        unpacked = home / "unpacked"
        subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(unpacked)], check=True, timeout=300)
        # the image and its modules in two unrelated folders: virtme-ng finds neither by itself
        shutil.move(str(unpacked / "boot" / f"vmlinuz-{release}"), image)
        (modules / "lib" / "modules").mkdir(parents=True)
        shutil.move(str(unpacked / "lib" / "modules" / release), modules / "lib" / "modules" / release)
        shutil.rmtree(unpacked)
        shutil.rmtree(home / "deb")
        return image, modules
    pytest.fail(f"no Debian 6.1 kernel other than the installed ones could be downloaded (apt-cache: {abis})")


def test_two_kernels_one_result_set_with_a_cross_kernel_verdict(tmp_path):
    if not any(r.startswith("6.12") for r in installed_abis()):
        pytest.fail("kernel 6.12 is not in /boot: ./setup.sh installs it")
    image, modules = own_kernel()
    release = image_release(image)
    assert release.startswith("6.1.0-") and release not in installed_abis()
    (tmp_path / "pair.yaml").write_text(SCENARIO)
    out = tmp_path / "res"
    r = subprocess.run([sys.executable, "-m", "runners.cli", str(tmp_path / "pair.yaml"), "--backend", "vm",
                        "--kernel", "6.12", "--kernel", str(image), "--modules", str(modules), "--out", str(out)],
                       cwd=REPO, capture_output=True, text=True, timeout=1200,
                       env={**os.environ, "TESTBED_WARM_DIR": str(tmp_path / "no-warm-vm")})
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-3000:]
    run_dir = (out / "kernel-pair" / "latest").resolve()
    assert re.search(rf"kernel 6\.12 \(6\.12\.[^)]*\): 1 point", r.stdout)
    assert f"kernel {image} ({release}): 1 point" in r.stdout
    doc = json.loads((run_dir / "results.json").read_text())
    ran = {(x["params"]["kernel"], x["kernel"]) for x in doc["runs"]}
    assert {k for k, _ in ran} == {"6.12", str(image)} and len(doc["runs"]) == 4
    assert (str(image), release) in ran and any(rel.startswith("6.12.") for k, rel in ran if k == "6.12")
    assert all(x["status"] == "ok" and x["metrics"]["subflows"] == 2 for x in doc["runs"]), [
        (x["id"], x["kernel"], x["status"], x.get("failure"), x["metrics"].get("subflows"),
         x["metrics"].get("subflow_shortfall")) for x in doc["runs"]]
    kernels = doc["metadata"]["kernels"]
    assert kernels[str(image)]["release"] == release and kernels[str(image)]["vm"]["modules"]
    # each kernel's own probe, from its own guest
    assert all(k["mptcp_features"]["mptcp"] and "subflow" in k["mptcp_features"]["endpoint_flags"]
               for k in kernels.values())
    rows = list(csv.DictReader((run_dir / "runs.csv").open()))
    assert {(x["kernel"], x["kernel_release"]) for x in rows} == ran
    verdicts = {v["name"]: v for v in json.loads((run_dir / "verdicts.json").read_text())}
    assert verdicts["subflows-kept"]["kind"] == "kernels" and verdicts["subflows-kept"]["point"] == "p001+p002"
    assert verdicts["subflows-kept"]["outcome"] == "pass"       # 2 subflows on each kernel
    assert (verdicts["throughput-kept"]["n_left"], verdicts["throughput-kept"]["n_right"]) == (2, 2)
    assert "subflows-kept" in (run_dir / "junit.xml").read_text()
