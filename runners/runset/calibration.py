"""A machine's calibration: what it reproduces faithfully on one backend and kernel (`run-scenario
calibrate` measures it; docs/fidelity.md). Where the file lives, its name, reading and writing it, and its
table.

One file per machine, backend and kernel, in the cache folder of the user who ran the command:
`$XDG_CACHE_HOME/mptcp-testbed/calibration/` (default `~/.cache/...`); under sudo, the sudo user's
(SUDO_UID, as results are handed over to that user: runners.cli.run.hand_over), and the files belong to
that user. TESTBED_CALIBRATION_DIR overrides the folder (the tests use it). Written whole or not at all.
"""
from __future__ import annotations

import hashlib
import json
import os
import pwd
import re
import socket
from pathlib import Path

from runners.paths import user_cache

# 2: the probes of several paths are TCP flows at once (2026-11-27); a version 1 file's were MPTCP's, so
# its limits for 2-8 paths measured something else and are not compared with
VERSION = 2
PATH_COUNTS = (1, 2, 4, 8)     # paths at once that a calibration measures


def sudo_user(env=os.environ) -> tuple[int, int] | None:
    """(uid, gid) of the user who ran sudo, when this process is root under sudo; else None."""
    if os.geteuid() != 0 or not env.get("SUDO_UID", "").isdigit() or not env.get("SUDO_GID", "").isdigit():
        return None
    return int(env["SUDO_UID"]), int(env["SUDO_GID"])


def calibration_dir(env=os.environ) -> Path:
    """The folder of this user's calibrations (under sudo: the sudo user's, whose environment sudo did not
    keep, so their home's .cache)."""
    if env.get("TESTBED_CALIBRATION_DIR"):
        return Path(env["TESTBED_CALIBRATION_DIR"])
    who = sudo_user(env)
    if who is not None:
        try:
            return Path(pwd.getpwuid(who[0]).pw_dir) / ".cache" / "mptcp-testbed" / "calibration"
        except KeyError:   # a uid without a passwd entry: root's own cache
            pass
    return user_cache(env) / "calibration"


def machine_id() -> str:
    """This machine, readably: its host name and a short hash of /etc/machine-id (a cache folder may be
    shared by several machines over NFS; host names repeat across clones)."""
    try:
        mid = Path("/etc/machine-id").read_text().strip()
    except OSError:
        mid = ""
    host = re.sub(r"[^A-Za-z0-9.-]", "-", socket.gethostname())[:40] or "host"
    return f"{host}-{hashlib.sha256((mid or host).encode()).hexdigest()[:8]}"


def file_for(backend: str, kernel: str, env=os.environ, machine: str | None = None) -> Path:
    """The calibration file of this machine for a backend (`native` or `vm`; a warm VM is `vm`) and a
    kernel release."""
    backend = "vm" if backend in ("vm", "warm vm") else backend
    safe = re.sub(r"[^A-Za-z0-9._+-]", "_", kernel)
    return calibration_dir(env) / f"{machine or machine_id()}-{backend}-{safe}.json"


class CalibrationError(ValueError):
    """A calibration file that cannot be used; the message names the file and what is wrong."""


def read(path: Path) -> dict | None:
    """The calibration in `path`; None when there is none; CalibrationError when it cannot be used."""
    try:
        doc = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None
    except OSError as e:
        raise CalibrationError(f"calibration {path}: cannot read it ({e.strerror or e})") from None
    except ValueError as e:
        raise CalibrationError(f"calibration {path}: not JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("version") != VERSION or not isinstance(doc.get("limits"), dict):
        raise CalibrationError(f"calibration {path}: not a version {VERSION} calibration (an older or other "
                               "`run-scenario calibrate` wrote it: run it again)")
    return doc


def write(path: Path, doc: dict, env=os.environ) -> None:
    """Write the calibration whole (a temporary file renamed into place); under sudo, the folders made and
    the file belong to the sudo user."""
    from runners.results.store import atomic_write

    make_folder(path.parent, env)
    atomic_write(path, json.dumps(doc, indent=1) + "\n")
    give_to_user([path], env)


def make_folder(folder: Path, env=os.environ) -> None:
    """mkdir -p; under sudo, every folder it made belongs to the sudo user (~/.cache among them, when the
    user had none: a root-owned one would lock them out of their own cache)."""
    made = [p for p in [folder, *folder.parents] if not p.exists()]
    folder.mkdir(parents=True, exist_ok=True)
    give_to_user(made, env)


def give_to_user(paths, env=os.environ) -> None:
    """Under sudo: these files and folders to the sudo user (as a result set is handed over)."""
    who = sudo_user(env)
    if who is None:
        return
    for p in paths:
        try:
            os.lchown(p, *who)
        except OSError:
            pass


def path_limit(doc: dict, count: int) -> dict | None:
    """The calibration's figures for `count` paths at once ({"rate_mbit", "failed_at", ...}), or None."""
    return ((doc.get("limits") or {}).get("paths") or {}).get(str(count))


def rtt_within_10pct(delay: dict) -> float | None:
    """The smallest RTT the delay's typical (median) error is within 10 % of, ms; None unmeasured."""
    if not delay.get("samples") or delay.get("median_ms") is None:
        return None
    return round(max(delay["median_ms"], 0.0) / 0.10, 1)


def limit_text(lim: dict | None, unit: str = "Mbit/s") -> str:
    """A limit as the table shows it: '240 Mbit/s (280 was not)', 'at least 800 (the most tried)'."""
    if not lim or lim.get("value") is None and lim.get("failed_at") is None:
        return "not measured"
    value, failed = lim.get("value"), lim.get("failed_at")
    if value is None:
        return f"none: not at {failed:g} {unit}, the least tried"
    once = "; reproduced once, not probed again in time" if lim.get("confirmed") is False else ""
    if failed is None:
        return f"at least {value:g} {unit}, the most tried{once}"
    return f"{value:g} {unit} ({failed:g} was not{once})"


def table(doc: dict) -> str:
    """The calibration as a table (rich, as the run summary's)."""
    import io

    from rich.console import Console
    from rich.table import Table

    lim = doc.get("limits") or {}
    vm = doc.get("vm") or {}
    where = (f"{doc.get('backend')} backend, kernel {doc.get('kernel')}"
             + (f", {vm.get('accel', '?').upper()} micro-VM with {vm.get('cpus')} CPUs" if vm else ""))
    t = Table(title=f"calibration: {where} ({doc.get('date_utc', '?')})")
    for col in ("what", "faithful here", "probes"):
        t.add_column(col)
    for n in PATH_COUNTS:
        p = path_limit(doc, n) or {}
        agg = f"; {n * p['value']:g} Mbit/s in all" if n > 1 and p.get("value") else ""
        t.add_row(f"{n} path{'s' if n > 1 else ''} at once, per path", limit_text(p) + agg, str(p.get("probes", 0)))
    h = lim.get("hosts") or {}
    t.add_row(f"clients at {h.get('rate_mbit', '?'):g} Mbit/s each" if h.get("rate_mbit") else "clients",
              limit_text(h, "clients"), str(h.get("probes", 0)))
    d = lim.get("delay") or {}
    if d.get("samples"):
        t.add_row("RTT floor above the configured RTT (idle path)",
                  f"+{d['min_ms']:g} to +{d['max_ms']:g} ms (median +{d['median_ms']:g}); RTTs from "
                  f"{rtt_within_10pct(d):g} ms are within 10 % of it", str(d["samples"]))
    else:
        t.add_row("RTT floor above the configured RTT", "not measured", "0")
    console = Console(record=True, width=120, force_terminal=False, file=io.StringIO())
    console.print(t)
    console.print(f"rule: {doc.get('rule', '?')}")
    host = doc.get("host_cpu") or {}
    if host:   # the VM's qemu is part of it; anything else running makes the calibration read lower
        console.print(f"this machine meanwhile: {host['busy_pct']:g} % busy, {host['steal_pct']:g} % stolen by its "
                      f"hypervisor; {doc.get('seconds', 0):.0f} s in all")
    return console.export_text()
